# reach-server and the reach tool, built from source on Debian 12.
#
#   docker build -t reach-server .        (or: podman build -t reach-server .)
#   deploy/make-secrets.sh                # dev CA, certificates and tokens
#   docker run --rm -p 127.0.0.1:50051:50051 -p 127.0.0.1:9464:9464 \
#     -v $PWD/deploy/secrets/tls:/etc/reach/tls:ro \
#     -v $PWD/deploy/secrets/auth:/etc/reach/auth:ro reach-server
#
# The server listens on all interfaces, so it serves TLS from
# /etc/reach/tls (tls.crt, tls.key; the names of a Kubernetes TLS Secret)
# and requires a token from /etc/reach/auth/tokens (/metrics: basic auth).
# Without those files it refuses to start, naming the missing one. For
# plaintext without tokens on a trusted network, append
# `--tls_cert= --tls_key= --auth_tokens_file= --insecure` (and run with
# `-e REACH_TLS_CA= -e REACH_TLS_SERVER_NAME=` so the HEALTHCHECK's reach
# tool speaks plaintext too).
#
# Air-gapped machines: deploy/base-image.sh builds debian:bookworm with
# debootstrap and imports it into the local engine first.
ARG BASE_IMAGE=debian:bookworm

# Builder: the very setup script CI and developers use. The viewer's
# three.js comes with the source tree (viewer/node_modules/three, which
# scripts/setup fetched with npm on the host: run it before building).
FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY scripts/setup scripts/setup
RUN scripts/setup --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DREACH_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target reach-server reach \
 && strip /build/server/reach-server /build/client/reach

# Runtime: the shared libraries the two binaries link, nothing else.
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libsqlite3-0 libpq5 libssl3 libtinyxml2-9 libtinygltf2d libcivetweb1 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/reach --shell /usr/sbin/nologin reach \
 && mkdir -p /var/lib/reach && chown reach:reach /var/lib/reach
COPY --from=build /build/server/reach-server /build/client/reach /usr/local/bin/
USER reach
WORKDIR /var/lib/reach
# gRPC (reach.v1.IkService, grpc.health.v1, reflection), /metrics and the
# browser viewer (off by default; plain HTTP: publish it on loopback only).
EXPOSE 50051 9464 9465
# The SQLite registry: mount a volume to keep registrations.
VOLUME /var/lib/reach
# The reach tool inside the image speaks TLS to the server by default
# (health needs no token; other commands read REACH_TOKEN).
ENV REACH_TLS_CA=/etc/reach/tls/ca.crt REACH_TLS_SERVER_NAME=localhost
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["reach", "--addr=127.0.0.1:50051", "--timeout=2", "health"]
# reach-server drains streams and in-flight calls on SIGTERM (--shutdown_grace).
STOPSIGNAL SIGTERM
# The viewer is off: it is plain HTTP (see deploy/docker-compose.yml for
# serving it on the host's loopback with --http_listen=0.0.0.0:9465
# --insecure).
ENTRYPOINT ["reach-server", "--listen=0.0.0.0:50051", \
            "--metrics_listen=0.0.0.0:9464", "--http_listen=", \
            "--data_dir=/var/lib/reach", \
            "--tls_cert=/etc/reach/tls/tls.crt", "--tls_key=/etc/reach/tls/tls.key", \
            "--auth_tokens_file=/etc/reach/auth/tokens"]
