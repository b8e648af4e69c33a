#!/usr/bin/env bash
# Smoke test of the HA stack (docker-compose.ha.yml) on this machine's
# engine: PostgreSQL 15, three reach-server replicas on it, haproxy in
# front, Prometheus (and Grafana where its image can be had). Makes fresh
# secrets, builds the images (tagged :smoke-ha unless REACH_IMAGE etc. say
# otherwise), starts the stack and checks, each step timed:
#   - no image, command line, environment or log holds the database password;
#   - a skeleton registered through haproxy solves through haproxy on every
#     replica (each reads it through from the database);
#   - a stream through haproxy (the Python client, resume_streams) survives
#     the kill of its replica's container: every frame answered once, in
#     order, no wait over 1 s, no joint step over twice the warm one;
#     the killed replica comes back and takes calls again;
#   - PostgreSQL stopped: 10 s of solves go on through haproxy, a registration gets
#     UNAVAILABLE and /metrics says reach_registry_store_up 0; started
#     again: registrations resume and what was registered is still there;
#   - Prometheus scrapes all three replicas, registry metrics included;
#     Grafana (if running) serves the dashboard with the registry panels;
#   - SIGTERM ends every replica with exit code 0.
# Tears everything down (volumes and secrets included) at the end.
#
#   deploy/smoke-ha.sh
# Environment: ENGINE=docker|podman; REACH_CLI (default build/client/reach)
# and the Python client from client/python (installed offline into a
# temporary directory, run by /usr/bin/python3 with Debian's grpcio and
# numpy); SMOKE_KEEP=1 leaves the stack running; SMOKE_BUILD=0 uses the
# images as they are (a rerun) instead of building them.
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
project=reach-ha-smoke
export REACH_GRPC_PORT=56051 PROMETHEUS_PORT=56090 GRAFANA_PORT=56000
export REACH_IMAGE=${REACH_IMAGE:-reach-server:smoke-ha} \
  REACH_POSTGRES_IMAGE=${REACH_POSTGRES_IMAGE:-reach-postgres:smoke-ha} \
  REACH_HAPROXY_IMAGE=${REACH_HAPROXY_IMAGE:-reach-haproxy:smoke-ha} \
  REACH_PROMETHEUS_IMAGE=${REACH_PROMETHEUS_IMAGE:-reach-prometheus:smoke-ha}
grafana_image=${GRAFANA_IMAGE:-grafana/grafana-oss:11.2.0}
export GRAFANA_IMAGE=$grafana_image
reach_cli=${REACH_CLI:-build/client/reach}
python=/usr/bin/python3
dc() { "${compose[@]}" -p "$project" -f deploy/docker-compose.ha.yml "$@"; }
started=$(date +%s)
last=$started
step() {
  local now; now=$(date +%s)
  echo "== smoke-ha [+$((now - started)) s, previous step $((now - last)) s]: $*"
  last=$now
}
fail() { echo "smoke-ha: FAILED: $*" >&2; dc logs --tail=40 >&2 || true; exit 1; }
tmp=$(mktemp -d /tmp/reach-smoke-ha.XXXXXX)
secrets=$tmp/secrets
export REACH_SECRETS=$secrets
cleanup() {
  if [ "${SMOKE_KEEP:-0}" != 1 ]; then
    dc down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

[ -x "$reach_cli" ] || fail "$reach_cli is missing (scripts/build, or set REACH_CLI)"
step "making secrets in $secrets"
deploy/make-secrets.sh "$secrets" >/dev/null
client_token=$(cat "$secrets/client.token")
metrics_token=$(cat "$secrets/prometheus.token")
password=$(cat "$secrets/postgres-password")
reach() {
  "$reach_cli" --addr "127.0.0.1:$REACH_GRPC_PORT" --tls-ca "$secrets/tls/ca.crt" \
    --token "$client_token" --timeout 10 "$@"
}

step "installing the Python client into $tmp/site (offline)"
"$python" -m pip install -q --no-deps --target "$tmp/site" client/python ||
  fail "pip install client/python"

if ! "$engine" image inspect debian:bookworm >/dev/null 2>&1; then
  "$engine" pull debian:bookworm 2>/dev/null || ENGINE=$engine deploy/base-image.sh
fi
if [ "${SMOKE_BUILD:-1}" = 1 ]; then
  step "building the images"
  dc build reach-1 postgres haproxy prometheus
fi

services=(postgres reach-1 reach-2 reach-3 haproxy prometheus)
if "$engine" image inspect "$grafana_image" >/dev/null 2>&1 ||
   "$engine" pull "$grafana_image" >/dev/null 2>&1; then
  services+=(grafana)
else
  echo "smoke-ha: $grafana_image cannot be had here; running without Grafana"
fi
step "starting ${services[*]}"
dc up -d "${services[@]}"

# Container, address and /metrics of each replica (the host reaches the
# stack's network; nothing but haproxy and Prometheus is published).
declare -A cid ip
for r in reach-1 reach-2 reach-3; do
  cid[$r]=$(dc ps -q "$r")
  ip[$r]=$("$engine" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${cid[$r]}")
done
metrics() { curl -sf -u "prometheus:$metrics_token" "http://${ip[$1]}:9464/metrics"; }
# The sum of a metric's series on a replica's /metrics whose lines hold
# every further argument (a label="value"); 0 when absent, -1 unreachable.
metric() {
  local out; out=$(metrics "$1") || { echo -1; return; }
  local name=$2; shift 2
  awk -v m="$name" -v labels="$*" '
    index($0, m " ") == 1 || index($0, m "{") == 1 {
      n = split(labels, want, " "); ok = 1
      for (i = 1; i <= n; i++) if (index($0, want[i]) == 0) ok = 0
      if (ok) v += $NF
    }
    END { print v + 0 }' <<<"$out"
}
healthy() { [ "$("$engine" inspect -f '{{.State.Health.Status}}' "$1")" = healthy ]; }

step "waiting for PostgreSQL and the replicas' HEALTHCHECKs"
for _ in $(seq 90); do
  ok=1
  for c in "$(dc ps -q postgres)" "${cid[@]}"; do healthy "$c" || ok=0; done
  [ $ok = 1 ] && break
  sleep 1
done
[ $ok = 1 ] || fail "not every container turned healthy"
for _ in $(seq 30); do reach health >/dev/null 2>&1 && break; sleep 0.5; done
[ "$(reach health)" = SERVING ] || fail "reach health through haproxy"

step "the database password is in no image, command line, environment or log"
for c in "$(dc ps -q postgres)" "${cid[@]}"; do
  ! grep -qF "$password" <<<"$("$engine" inspect "$c")" || fail "docker inspect $c shows the password"
  ! grep -qF "$password" <<<"$("$engine" top "$c" -eo pid,args)" || fail "a process of $c has it in argv"
done
for i in "$REACH_IMAGE" "$REACH_POSTGRES_IMAGE"; do
  ! grep -qF "$password" <<<"$("$engine" image inspect "$i")" || fail "image $i holds the password"
done
logs=$(dc logs 2>&1)
! grep -qF "$password" <<<"$logs" || fail "a log shows the password"
grep -q "store=postgresql://reach@postgres:5432/reach" <<<"$logs" ||
  fail "the replicas do not say they use the PostgreSQL registry"

step "register through haproxy; solves through haproxy reach every replica"
id=$(reach register --json examples/humanoid.skeleton.json |
  sed -n 's/.*"skeletonId":"\([0-9a-f]*\)".*/\1/p')
[ ${#id} = 64 ] || fail "register printed no id"
solves=(grpc_server_handled_total 'grpc_method="Solve"' 'grpc_code="OK"')
declare -A before
for r in reach-1 reach-2 reach-3; do before[$r]=$(metric "$r" "${solves[@]}"); done
reach bench --rpc solve --skeleton "$id" --requests 300 --format json |
  grep -q '"statusCodes":{"OK":300}' || fail "300 solves through haproxy"
spread=""
for r in reach-1 reach-2 reach-3; do
  n=$(( $(metric "$r" "${solves[@]}") - before[$r] ))
  spread+=" $r=$n"
  [ "$n" -gt 0 ] || fail "no solve reached $r:$spread"
done
echo "solves per replica:$spread"
reads=$(( $(metric reach-1 reach_registry_read_throughs_total) + $(metric reach-2 reach_registry_read_throughs_total) + $(metric reach-3 reach_registry_read_throughs_total) ))
echo "read-throughs from the database: $reads"

step "a stream through haproxy survives the kill of its replica's container"
args=()
for r in reach-1 reach-2 reach-3; do args+=(--replica "${cid[$r]}=http://${ip[$r]}:9464/metrics"); done
out=$(PYTHONPATH=$tmp/site PYTHONDONTWRITEBYTECODE=1 "$python" deploy/ha_stream_check.py \
  "127.0.0.1:$REACH_GRPC_PORT" --ca "$secrets/tls/ca.crt" --token-file "$secrets/client.token" \
  --metrics-token-file "$secrets/prometheus.token" --kill "$engine kill {name}" "${args[@]}") ||
  fail "the stream across the kill: $out"
echo "$out"
killed=$(sed -n 's/^killed //p' <<<"$out")
for r in reach-1 reach-2 reach-3; do [ "${cid[$r]}" = "$killed" ] && killed_name=$r; done
# Unary calls do not resume: those haproxy still sends to the dead replica
# before its check fails twice (1 s apart) get UNAVAILABLE. Once it is
# marked down, every call goes to the other two.
server=r${killed_name#reach-}
# (Into a variable first: `grep -q` closing the pipe early would fail the
# pipeline.)
marked=""
for _ in $(seq 40); do
  marked=$(dc logs haproxy 2>/dev/null | grep "Server reach/$server is DOWN" || true)
  [ -n "$marked" ] && break
  sleep 0.25
done
[ -n "$marked" ] || fail "haproxy did not mark $killed_name down"
reach bench --rpc solve --skeleton "$id" --requests 60 --format json |
  grep -q '"statusCodes":{"OK":60}' || fail "solves through haproxy with $killed_name down"

step "the killed replica ($killed_name) comes back and takes calls again"
# restart: unless-stopped brings it back; start it should the engine not.
[ "$("$engine" inspect -f '{{.State.Running}}' "$killed")" = true ] ||
  "$engine" start "$killed" >/dev/null
for _ in $(seq 60); do healthy "$killed" && break; sleep 1; done
healthy "$killed" || fail "$killed_name did not come back healthy"
ip[$killed_name]=$("$engine" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$killed")
back=$(metric "$killed_name" "${solves[@]}")
sleep 2  # haproxy's check: 1 s apart, one success brings it back.
reach bench --rpc solve --skeleton "$id" --requests 60 --format json |
  grep -q '"statusCodes":{"OK":60}' || fail "solves after $killed_name came back"
n=$(( $(metric "$killed_name" "${solves[@]}") - back ))
echo "$killed_name answered $n of 60 solves after its restart"
[ "$n" -gt 0 ] || fail "haproxy sends $killed_name no calls after its restart"

step "PostgreSQL stopped: solves go on, registrations UNAVAILABLE"
dc stop postgres >/dev/null 2>&1
stopped_at=$(date +%s.%N)
# Ten seconds of solves through haproxy while the database is away.
bench=$(reach bench --rpc solve --skeleton "$id" --duration 10 --concurrency 2 --format json) ||
  fail "solves through haproxy with PostgreSQL down: $bench"
grep -q '"statusCodes":{"OK":[0-9]*}' <<<"$bench" ||
  fail "solves through haproxy with PostgreSQL down: $bench"
echo "solves with PostgreSQL down: $(grep -o '"statusCodes":{[^}]*}' <<<"$bench")"
refused=$(reach register examples/humanoid_limited.skeleton.json 2>&1 || true)
grep -q UNAVAILABLE <<<"$refused" || fail "a registration with PostgreSQL down: $refused"
echo "registration with PostgreSQL down: $(head -1 <<<"$refused")"
for _ in $(seq 20); do
  down=0
  for r in reach-1 reach-2 reach-3; do
    [ "$(metric "$r" reach_registry_store_up)" = 0 ] && down=$((down + 1))
  done
  [ $down = 3 ] && break
  sleep 0.5
done
[ $down = 3 ] || fail "reach_registry_store_up is not 0 on every replica"

step "PostgreSQL started again: registrations resume, nothing lost"
dc start postgres >/dev/null 2>&1
restarted_at=$(date +%s.%N)
for _ in $(seq 120); do
  second=$(reach register --json examples/humanoid_limited.skeleton.json 2>/dev/null |
    sed -n 's/.*"skeletonId":"\([0-9a-f]*\)".*/\1/p') || true
  [ ${#second} = 64 ] && break
  sleep 0.25
done
[ ${#second} = 64 ] || fail "no registration within 30 s of PostgreSQL's start"
accepted_at=$(date +%s.%N)
for _ in $(seq 40); do
  up=0
  for r in reach-1 reach-2 reach-3; do
    [ "$(metric "$r" reach_registry_store_up)" = 1 ] && up=$((up + 1))
  done
  [ $up = 3 ] && break
  sleep 0.25
done
[ $up = 3 ] || fail "reach_registry_store_up is not 1 again on every replica"
awk -v s="$stopped_at" -v r="$restarted_at" -v a="$accepted_at" 'BEGIN {
  printf "PostgreSQL down %.1f s; first registration accepted %.2f s after its start\n", r - s, a - r }'
reach get "$id" >/dev/null || fail "the first skeleton is gone after PostgreSQL's restart"
for r in reach-1 reach-2 reach-3; do
  # Each replica holds the new one (its listener caught up), no read-through.
  for _ in $(seq 20); do
    [ "$(metric "$r" reach_skeletons)" = 3 ] && break
    sleep 0.25
  done
  [ "$(metric "$r" reach_skeletons)" = 3 ] || fail "$r holds $(metric "$r" reach_skeletons) skeletons, not 3"
done

step "Prometheus scrapes all three replicas, registry metrics included"
query() {
  curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$1"
}
for _ in $(seq 60); do
  query 'count(up{job="reach"} == 1) == 3' | grep -q '"result":\[{' && break
  sleep 1
done
query 'count(up{job="reach"} == 1) == 3' | grep -q '"result":\[{' || fail "Prometheus: not 3 replicas up"
for m in reach_registry_store_up reach_skeleton_cache_hits_total \
         reach_registry_listener_reconnects_total reach_registry_change_sequence; do
  query "count(count by (instance) ($m)) == 3" | grep -q '"result":\[{' ||
    fail "Prometheus: $m not from all three replicas"
done
query 'sum(reach_registry_listener_reconnects_total) > 0' | grep -q '"result":\[{' ||
  echo "smoke-ha: (no listener reconnect scraped yet)"

if [[ " ${services[*]} " == *" grafana "* ]]; then
  step "Grafana serves the dashboard with its registry panels"
  for _ in $(seq 60); do
    curl -sf "http://127.0.0.1:$GRAFANA_PORT/api/health" >/dev/null && break
    sleep 1
  done
  curl -sf -u "admin:$(cat "$secrets/grafana-admin-password")" \
    "http://127.0.0.1:$GRAFANA_PORT/api/dashboards/uid/reach-overview" |
    grep -q 'reach_registry_store_up' || fail "dashboard reach-overview without registry panels"
fi

step "SIGTERM drains every replica and exits 0"
dc stop reach-1 reach-2 reach-3 >/dev/null 2>&1
for r in reach-1 reach-2 reach-3; do
  code=$("$engine" inspect -f '{{.State.ExitCode}}' "${cid[$r]}")
  [ "$code" = 0 ] || fail "$r exited $code"
done

step "done"
echo "smoke-ha: OK in $(( $(date +%s) - started )) s (${services[*]})"
