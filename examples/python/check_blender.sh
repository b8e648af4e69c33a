#!/usr/bin/env bash
# Runs examples/python/blender_pose.py in Debian's Blender against a real
# reach-server (CTest python.blender_example; exit 77, skipped, where
# Blender is not installed: scripts/setup does not install it).
#
#   examples/python/check_blender.sh SERVER_BINARY PYTHON_SITE
set -euo pipefail
command -v blender >/dev/null || exit 77
server_bin=$1 site=$2
here="$(cd "$(dirname "$0")" && pwd)"
work=$(mktemp -d)
"$server_bin" --listen=127.0.0.1:0 --metrics_listen= --http_listen= --in_memory 2>"$work/log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait; rm -rf "$work"' EXIT
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on [^ ]* (port \([0-9]*\)).*/\1/p' "$work/log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/log" >&2; exit 1; }
PYTHONPATH="$site" blender -b --python-exit-code 1 --python "$here/blender_pose.py" -- \
  "$here/../../tests/data/mocap/cmu_02_01_walk.bvh" --addr "127.0.0.1:$port" \
  --frames 60 --out "$work/walk.blend" | tee "$work/out"
grep -q "blender_pose: 60 frames keyed" "$work/out"
test -s "$work/walk.blend"
