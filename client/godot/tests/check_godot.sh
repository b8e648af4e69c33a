#!/usr/bin/env bash
# CTest godot.client: the Godot example project (client/godot) headless in
# Debian's Godot 3 (godot3-server) against a real reach-server on loopback
# with tokens and roles (--auth_tokens_file); tests/run_tests.gd checks the
# answers by its own forward kinematics. Exit 77 (skipped) only where
# godot3-server is not installed; scripts/setup installs it.
#
#   client/godot/tests/check_godot.sh SERVER_BINARY
set -euo pipefail
if ! command -v godot3-server >/dev/null; then
  echo "godot.client: SKIPPED: no godot3-server on PATH (apt-get install godot3-server; scripts/setup installs it)"
  exit 77
fi
server_bin=$1
here="$(cd "$(dirname "$0")" && pwd)"
project="$(cd "$here/.." && pwd)"
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -TERM $server 2>/dev/null; wait; rm -rf "$work"' EXIT

token=$(openssl rand -hex 24)
solve_token=$(openssl rand -hex 24)
{
  echo "game $(printf %s "$token" | sha256sum | cut -d' ' -f1) solve,register"
  echo "player $(printf %s "$solve_token" | sha256sum | cut -d' ' -f1) solve"
} >"$work/tokens"
"$server_bin" --listen=127.0.0.1:0 --metrics_listen= --http_listen=127.0.0.1:0 --in_memory \
  --auth_tokens_file="$work/tokens" --max_solve_ms=10000 2>"$work/server.log" &
server=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*viewer on [^ ]* (port \([0-9]*\)).*/\1/p' "$work/server.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/server.log" >&2; exit 1; }

# The README's shell blocks as written, in a directory of the test's own
# (client/ a link to the repository's): the first makes a game project
# from the add-on (my_game/addons/reach), which gets the example's scene,
# rig and tests; the second runs the tests headless there. HOME is the
# test's own (user:// and Godot's settings land there).
/usr/bin/python3 - "$project/README.md" "$work" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
blocks = [part.split("```")[0] for part in text.split("```sh\n")[1:]]
assert len(blocks) == 2, f"README: {len(blocks)} sh blocks, want 2 (copy, test)"
for name, block in zip(["copy.sh", "run.sh"], blocks):
    open(f"{sys.argv[2]}/{name}", "w").write(block)
PY
mkdir -p "$work/home"
ln -s "$project/.." "$work/client"
(cd "$work" && bash -euo pipefail copy.sh)
[ -f "$work/my_game/addons/reach/reach_client.gd" ]
cp -r "$project/project.godot" "$project/main.tscn" "$project/main.gd" "$project/rig.tscn" \
  "$project/tests" "$work/my_game/"
echo "godot.client: $(cat "$work/run.sh")"
# timeout: Godot must never hold CI up (run_tests.gd's own watchdog quits
# after 120 s; this is the backstop).
status=0
(cd "$work" && HOME="$work/home" REACH_HTTP_URL="http://127.0.0.1:$port" REACH_TOKEN="$token" \
  REACH_SOLVE_TOKEN="$solve_token" timeout -k 5 170 bash -euo pipefail run.sh) \
  >"$work/out" 2>"$work/err" || status=$?
grep -v "^$" "$work/out"
if [ "$status" -ne 0 ] || grep -q "SCRIPT ERROR" "$work/err" || ! grep -q '^godot.client: ok$' "$work/out"; then
  echo "godot.client: godot3-server exited $status; its stderr:" >&2
  grep -v 'locale\|make_dir_recursive\|^   At: \|^$' "$work/err" >&2 || true
  echo "godot.client: the server's log:" >&2
  tail -20 "$work/server.log" >&2
  exit 1
fi
