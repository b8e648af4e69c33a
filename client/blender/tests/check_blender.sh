#!/usr/bin/env bash
# CTest blender.addon: the Reach add-on in Debian's Blender against a real
# reach-server on loopback. Exit 77 (skipped) only where no blender is
# installed; scripts/setup installs it.
# 1. docs/blender.md's commands as written (the client with pip
#    --user, offline, and the add-on into ~/.config/blender/3.4, with HOME
#    a directory of this test's; BCN_Epileptic.glb driven with the CMU walk
#    in one batch and over a live stream), from a copy of the repository's
#    layout made of links so that their outputs land here; check_walk.py
#    checks each saved .blend and the render.
# 2. A glTF clip: the walk that `reach retarget --out X.glb` writes into a
#    copy of BCN's own file, driven onto BCN again (check_gltf.py).
# 3. Bad input, and an armature moved, turned and scaled in other units
#    (check_addon.py, then check_walk.py on its .blend).
# 4. A second server with TLS (deploy/make-certs.sh) and tokens
#    (check_secure.py).
# 5. The "Python path" preference, in a Blender that cannot import the
#    client otherwise (check_python_path.py).
#
#   client/blender/tests/check_blender.sh SERVER_BINARY REACH_BINARY
set -euo pipefail
if ! command -v blender >/dev/null; then
  echo "blender.addon: SKIPPED: no blender on PATH (apt-get install blender; scripts/setup installs it)"
  exit 77
fi
server_bin=$1 reach_bin=$2
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
work=$(mktemp -d)
# The check asks the server for the same batch again and compares: a
# generous --max_solve_ms keeps a slow, shared machine from leaving the
# later frames of one of the two runs unsolved.
"$server_bin" --listen=127.0.0.1:0 --metrics_listen= --http_listen= --in_memory \
  --max_solve_ms=120000 2>"$work/log" &
server=$!
secure=""
trap 'kill -TERM $server $secure 2>/dev/null || true; wait; rm -rf "$work"' EXIT
port_of() {  # the port a server logged it listens on
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on [^ ]* (port \([0-9]*\)).*/\1/p' "$1" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$1" >&2; return 1; }
  echo "$port"
}
port=$(port_of "$work/log")

mkdir -p "$work/repo" "$work/home"
for d in client examples proto tests; do ln -s "$repo/$d" "$work/repo/$d"; done
# The shell blocks of docs/blender.md that install the client and the add-on
# and run it.
/usr/bin/python3 - "$repo/docs/blender.md" >"$work/readme.sh" <<'PY'
import sys, textwrap
section = open(sys.argv[1], encoding="utf-8").read()
blocks, current = [], None
for line in section.splitlines():
    if line.startswith("    ") or (current is not None and not line.strip()):
        current = (current or []) + [line]
    else:
        if current:
            blocks.append(textwrap.dedent("\n".join(current)).strip() + "\n")
        current = None
if current:
    blocks.append(textwrap.dedent("\n".join(current)).strip() + "\n")
run = [b for b in blocks if b.startswith(("python3 -m pip install --user", "blender -b --addons"))]
assert len(run) == 2, f"docs/blender.md: {len(run)} add-on blocks, want 2 (install, run)"
print("".join(run))
PY
cat "$work/readme.sh"
# Debian's python3 and pip, offline (no index; a proxy that refuses).
export HOME="$work/home" PATH="/usr/bin:/bin:$PATH" PIP_NO_INDEX=1 \
  PIP_DISABLE_PIP_VERSION_CHECK=1 http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
  no_proxy=127.0.0.1,localhost
unset PYTHONPATH PYTHONUSERBASE
(cd "$work/repo" && REACH_ADDRESS="127.0.0.1:$port" bash -euo pipefail "$work/readme.sh") \
  | tee "$work/out"
grep -q "drive_rig: .*: 343 frames keyed" "$work/out"
for blend in walk.blend walk_live.blend; do
  png=()
  [ "$blend" = walk.blend ] && png=(--png "$work/repo/walk.png")
  # --python-use-system-env: the check imports the client from the user site.
  blender -b "$work/repo/$blend" --python-use-system-env --python-exit-code 1 \
    --python "$here/check_walk.py" -- --clip "$repo/tests/data/mocap/cmu_02_01_walk.bvh" \
    --first 1 --addr "127.0.0.1:$port" "${png[@]}" 2>&1 | grep -v '^$' | grep -v '^Blender quit' \
    | tee "$work/check"
  grep -q "check_walk: ok" "$work/check"
done

# 2. A glTF clip (the file's second animation; its first is BCN's own).
"$reach_bin" --addr "127.0.0.1:$port" retarget "$repo/tests/data/mocap/cmu_02_01_walk.bvh" \
  --first 1 --to "$repo/tests/data/rigs/BCN_Epileptic.glb" --out "$work/walk_bcn.glb" >/dev/null
(cd "$work/repo" && REACH_ADDRESS="127.0.0.1:$port" blender -b --addons reach_blender \
   --python-exit-code 1 --python examples/blender/drive_rig.py -- \
   tests/data/rigs/BCN_Epileptic.glb "$work/walk_bcn.glb" --animation cmu_02_01_walk \
   --out walk_gltf.blend) | grep drive_rig
blender -b "$work/repo/walk_gltf.blend" --python-exit-code 1 --python "$here/check_gltf.py" -- \
  "$work/walk_bcn.glb" cmu_02_01_walk 2>&1 | grep check_gltf | tee "$work/check"
grep -q "check_gltf: ok" "$work/check"

# 3. Bad input, and an armature object moved, turned and scaled in other units.
(cd "$work/repo" && blender -b --addons reach_blender --python-exit-code 1 \
   --python "$here/check_addon.py" -- "$repo/tests/data/rigs/BCN_Epileptic.glb" \
   "$repo/tests/data/mocap/cmu_02_01_walk.bvh" "$work/walk_bcn.glb" "127.0.0.1:$port" \
   "$work/moved.blend") 2>&1 | grep check_addon | tee "$work/check"
grep -q "check_addon: ok" "$work/check"
blender -b "$work/moved.blend" --python-use-system-env --python-exit-code 1 \
  --python "$here/check_walk.py" -- --clip "$repo/tests/data/mocap/cmu_02_01_walk.bvh" \
  --first 1 --addr "127.0.0.1:$port" 2>&1 | grep check_walk | tee "$work/check"
grep -q "check_walk: ok" "$work/check"

# 4. TLS and a token.
"$repo/deploy/make-certs.sh" "$work/pki" >/dev/null
token=$(openssl rand -hex 32)
echo "artist $(printf %s "$token" | sha256sum | cut -d' ' -f1) solve,register" >"$work/pki/tokens"
"$server_bin" --listen=127.0.0.1:0 --metrics_listen= --http_listen= --in_memory \
  --tls_cert="$work/pki/tls.crt" --tls_key="$work/pki/tls.key" \
  --auth_tokens_file="$work/pki/tokens" 2>"$work/secure.log" &
secure=$!
secure_port=$(port_of "$work/secure.log")
blender -b --addons reach_blender --python-exit-code 1 --python "$here/check_secure.py" -- \
  "$repo/tests/data/rigs/BCN_Epileptic.glb" "$repo/tests/data/mocap/cmu_02_01_walk.bvh" \
  "127.0.0.1:$secure_port" "$work/pki/ca.crt" "$token" 2>&1 | grep check_secure | tee "$work/check"
grep -q "check_secure: ok" "$work/check"

# 5. The client from pip --target, found through the add-on's preference
#    only (a HOME with no user site).
python3 -m pip install -q --no-deps --target "$work/target" "$repo/client/python"
mkdir -p "$work/home2"
HOME="$work/home2" BLENDER_USER_SCRIPTS="$work/home/.config/blender/3.4/scripts" \
  blender -b --addons reach_blender --python-exit-code 1 --python "$here/check_python_path.py" -- \
  "$work/target" "127.0.0.1:$port" 2>&1 | grep check_python_path | tee "$work/check"
grep -q "check_python_path: ok" "$work/check"
