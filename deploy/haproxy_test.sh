#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg as shipped, run by Debian's haproxy in front of
# three real reach-server replicas on loopback (TLS with certificates made
# by deploy/make-certs.sh): `reach bench` through haproxy makes 3,000 Solve
# calls on one connection, and each replica's Prometheus counter shows
# within 15 % of an even share (haproxy balances calls, not connections).
# Then a stream through haproxy with the Python client's resume_streams
# survives kill -9 of the replica holding it (ha_stream_check.py: every
# frame answered once, in order, no wait over 1 s, no pop): haproxy cuts
# such a stream (CANCELLED or UNKNOWN, not UNAVAILABLE) and the client
# resumes it all the same.
# Exits 77 (CTest: skipped) when haproxy is not installed (scripts/setup
# installs it).
#   deploy/haproxy_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
deploy=$(cd "$(dirname "$0")" && pwd)
command -v haproxy >/dev/null || { echo "haproxy is not installed"; exit 77; }
work=$(mktemp -d /tmp/reach-haproxy-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$deploy/make-certs.sh" "$work/tls" >/dev/null
cat "$work/tls/tls.crt" "$work/tls/tls.key" >"$work/tls.pem"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ports=() metrics=()
for i in 1 2 3; do
  "$build/server/reach-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --http_listen= --in_memory --solver_threads=1 \
    --tls_cert="$work/tls/tls.crt" --tls_key="$work/tls/tls.key" \
    >"$work/replica$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 200); do
    found=$(grep -o '(port [0-9]*)' "$work/replica$i.log" | tr -dc '0-9\n' || true)
    [ "$(echo "$found" | grep -c .)" -ge 2 ] && break
    sleep 0.05
  done
  ports+=("$(echo "$found" | sed -n 1p)")
  metrics+=("$(echo "$found" | sed -n 2p)")
  [ -n "${metrics[-1]}" ] || { cat "$work/replica$i.log"; exit 1; }
done

export HAPROXY_BIND="127.0.0.1:$(free_port)" HAPROXY_PEM="$work/tls.pem"
export REACH_CA="$work/tls/ca.crt" REACH_SERVER_NAME=localhost
export REACH_REPLICA_1="127.0.0.1:${ports[0]}" REACH_REPLICA_2="127.0.0.1:${ports[1]}"
export REACH_REPLICA_3="127.0.0.1:${ports[2]}"
haproxy -c -q -f "$deploy/haproxy/haproxy.cfg"
haproxy -db -f "$deploy/haproxy/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)

reach=("$build/client/reach" --tls-ca "$work/tls/ca.crt" --tls-server-name localhost)
# Each replica keeps its own registry here (--in_memory): the skeleton is
# registered on each, under the same content-addressed id.
for port in "${ports[@]}"; do
  id=$("${reach[@]}" --addr "127.0.0.1:$port" register "$deploy/../examples/humanoid.skeleton.json" |
    sed -n "s/^registered \([0-9a-f]*\).*/\1/p")
done
for _ in $(seq 100); do
  "${reach[@]}" --addr "$HAPROXY_BIND" health >/dev/null 2>&1 && break
  sleep 0.1
done

solves() {
  curl -fsS "http://127.0.0.1:$1/metrics" |
    awk '/^grpc_server_started_total\{/ && /grpc_method="Solve"/ { print $NF; f=1 } END { if (!f) print 0 }'
}
before=()
for m in "${metrics[@]}"; do before+=("$(solves "$m")"); done
"${reach[@]}" --addr "$HAPROXY_BIND" bench --rpc solve --concurrency 1 --requests 3000 \
  --skeleton "$id" >"$work/bench.txt"
counts=()
for i in 0 1 2; do counts+=($(( $(solves "${metrics[$i]}") - ${before[$i]} ))); done
total=$(( counts[0] + counts[1] + counts[2] ))
echo "haproxy: Solve calls per replica: ${counts[*]} (of $total)"
[ "$total" -ge 3000 ] || { echo "FAIL: $total calls reached the replicas"; exit 1; }
for c in "${counts[@]}"; do
  # Within 15 % of total / 3.
  if [ $(( c * 3 * 100 )) -lt $(( total * 85 )) ] || [ $(( c * 3 * 100 )) -gt $(( total * 115 )) ]; then
    echo "FAIL: uneven spread ${counts[*]}"; cat "$work/haproxy.log" | tail -5; exit 1
  fi
done

# The Python client, installed offline as the README says (Debian's grpcio
# and numpy).
/usr/bin/python3 -m pip install -q --no-deps --target "$work/site" "$deploy/../client/python" \
  2>/dev/null
replicas=()
register=()
for i in 0 1 2; do
  replicas+=(--replica "${pids[$i]}=http://127.0.0.1:${metrics[$i]}/metrics")
  register+=(--register-on "127.0.0.1:${ports[$i]}")
done
PYTHONPATH="$work/site" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$deploy/ha_stream_check.py" \
  "$HAPROXY_BIND" --ca "$work/tls/ca.crt" --server-name localhost --kill 'kill -9 {name}' \
  "${replicas[@]}" "${register[@]}"
echo "haproxy: OK"
