#!/usr/bin/env bash
# Smoke test of the container stack on this machine's engine: makes fresh
# secrets (deploy/make-secrets.sh: dev CA, certificates, tokens), builds the
# images, starts reach-server + Prometheus (+ Grafana where its image can be
# had), then checks that the container turns healthy (its HEALTHCHECK runs
# `reach health` over TLS), that a plaintext client and a call without a
# token are refused, that a skeleton registers and solves through the CLI
# over TLS with a token, that /metrics wants basic auth and Prometheus
# scrapes it with its password (target up), that Grafana (if running)
# refuses anonymous viewers and serves the provisioned dashboard to its
# admin, and that SIGTERM stops the server with exit code 0. Tears
# everything down (volumes and secrets included) at the end.
#
#   deploy/smoke.sh
# Environment: ENGINE=docker|podman; GRAFANA_IMAGE (default in the compose
# file); SMOKE_KEEP=1 leaves the stack running.
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${ENGINE:-docker}
if [ "$engine" = podman ]; then
  compose=(podman-compose)
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  compose=(docker-compose)
fi
project=reach-smoke
export REACH_GRPC_PORT=55051 REACH_METRICS_PORT=59464 PROMETHEUS_PORT=59090 \
  GRAFANA_PORT=53000 REACH_VIEWER_PORT=59465
grafana_image=${GRAFANA_IMAGE:-grafana/grafana-oss:11.2.0}
export GRAFANA_IMAGE=$grafana_image
dc() { "${compose[@]}" -p "$project" -f deploy/docker-compose.yml "$@"; }
step() { echo "== smoke: $*"; }
fail() { echo "smoke: FAILED: $*" >&2; dc logs --tail=50 >&2 || true; exit 1; }
secrets=$(mktemp -d /tmp/reach-smoke-secrets.XXXXXX)
export REACH_SECRETS=$secrets
cleanup() {
  if [ "${SMOKE_KEEP:-0}" != 1 ]; then
    dc down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$secrets"
  fi
}
trap cleanup EXIT
started=$(date +%s)

step "making secrets in $secrets"
deploy/make-secrets.sh "$secrets" >/dev/null
client_token=$(cat "$secrets/client.token")
# The reach tool inside the container, over TLS (the image's REACH_TLS_CA)
# with the client's token.
reach() { dc exec -T -e REACH_TOKEN="$client_token" reach-server reach "$@"; }

# The base image: present, pulled, or built from the Debian mirror.
if ! "$engine" image inspect debian:bookworm >/dev/null 2>&1; then
  "$engine" pull debian:bookworm 2>/dev/null || ENGINE=$engine deploy/base-image.sh
fi

step "building the images"
dc build reach-server prometheus

services=(reach-server prometheus)
if "$engine" image inspect "$grafana_image" >/dev/null 2>&1 ||
   "$engine" pull "$grafana_image" >/dev/null 2>&1; then
  services+=(grafana)
else
  echo "smoke: $grafana_image cannot be had here; running without Grafana"
fi
step "starting ${services[*]}"
dc up -d "${services[@]}"
server=$(dc ps -q reach-server)

step "waiting for the container's HEALTHCHECK (reach health)"
for _ in $(seq 60); do
  health=$("$engine" inspect -f '{{.State.Health.Status}}' "$server")
  [ "$health" = healthy ] && break
  sleep 1
done
[ "$health" = healthy ] || fail "reach-server is $health"
dc exec -T reach-server reach health | grep -qx SERVING || fail "reach health"

step "refused: plaintext, no token, a wrong token"
if dc exec -T -e REACH_TLS_CA= -e REACH_TLS_SERVER_NAME= reach-server \
     reach --timeout=3 health >/dev/null 2>&1; then
  fail "a plaintext client was answered"
fi
refused=$(dc exec -T reach-server reach list 2>&1 || true)
grep -q UNAUTHENTICATED <<<"$refused" || fail "a call without a token: $refused"
refused=$(dc exec -T -e REACH_TOKEN=wrong reach-server reach list 2>&1 || true)
grep -q UNAUTHENTICATED <<<"$refused" || fail "a wrong token: $refused"

step "register and solve through the CLI over TLS with a token"
"$engine" cp examples/humanoid.skeleton.json "$server":/tmp/humanoid.skeleton.json
id=$(reach register --json /tmp/humanoid.skeleton.json |
  sed -n 's/.*"skeletonId":"\([0-9a-f]*\)".*/\1/p')
[ ${#id} = 64 ] || fail "register printed no id"
# (Not `tee /dev/stderr`: when stderr is a file, tee would truncate it.)
solved=$(reach solve --skeleton "$id" --chain l_arm --target 0.35,1.2,0.25)
echo "$solved"
grep -q "chain l_arm: reached" <<<"$solved" || fail "solve"
reach bench --rpc stream --requests 500 --format json |
  grep -q '"statusCodes":{"OK":500}' || fail "bench"
# An admin token may delete any skeleton.
deleted=$(dc exec -T -e REACH_TOKEN="$(cat "$secrets/admin.token")" reach-server \
  reach delete "$id" 2>&1) || fail "admin delete: $deleted"

step "/metrics wants basic auth"
metrics=http://127.0.0.1:$REACH_METRICS_PORT/metrics
code=$(curl -s -o /dev/null -w '%{http_code}' "$metrics")
[ "$code" = 401 ] || fail "/metrics without auth answered $code"
# (Into a variable first: `grep -q` closing the pipe early would fail curl.)
scraped=$(curl -sf -u "prometheus:$(cat "$secrets/prometheus.token")" "$metrics") ||
  fail "/metrics with the scraper's token"
grep -q '^grpc_server_handled_total' <<<"$scraped" || fail "/metrics: no grpc_server_handled_total"

step "Prometheus scrapes the server"
up=""
for _ in $(seq 60); do
  up=$(curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" \
    --data-urlencode 'query=up{job="reach"}' | grep -o '"value":\[[^]]*"1"\]' || true)
  [ -n "$up" ] && break
  sleep 1
done
[ -n "$up" ] || fail "Prometheus target reach is not up"
curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" \
  --data-urlencode 'query=sum(grpc_server_handled_total{grpc_method="SolveStream"})' |
  grep -q '"result":\[{' || fail "no SolveStream series in Prometheus"

if [[ " ${services[*]} " == *" grafana "* ]]; then
  step "Grafana serves the provisioned dashboard"
  for _ in $(seq 60); do
    curl -sf "http://127.0.0.1:$GRAFANA_PORT/api/health" >/dev/null && break
    sleep 1
  done
  code=$(curl -s -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$GRAFANA_PORT/api/dashboards/uid/reach-overview")
  [ "$code" = 401 ] || fail "Grafana answered an anonymous viewer with $code"
  curl -sf -u "admin:$(cat "$secrets/grafana-admin-password")" \
    "http://127.0.0.1:$GRAFANA_PORT/api/dashboards/uid/reach-overview" |
    grep -q '"uid":"reach-overview"' || fail "dashboard reach-overview"
fi

step "the viewer: its page, and its API behind the token"
viewer=http://127.0.0.1:$REACH_VIEWER_PORT
curl -sf "$viewer/" | grep -q "Reach viewer" || fail "the viewer's page"
code=$(curl -s -o /dev/null -w '%{http_code}' "$viewer/api/skeletons")
[ "$code" = 401 ] || fail "the viewer's API answered no token with $code"
curl -sf -H "Authorization: Bearer $client_token" "$viewer/api/skeletons" |
  grep -q '"skeletons"' || fail "the viewer's API with the client's token"

step "SIGTERM drains and exits 0"
dc stop reach-server
code=$("$engine" inspect -f '{{.State.ExitCode}}' "$server")
[ "$code" = 0 ] || fail "reach-server exited $code"

echo "smoke: OK in $(( $(date +%s) - started )) s (${services[*]})"
