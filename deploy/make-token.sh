#!/usr/bin/env bash
# Makes a random bearer token for reach-server's --auth_tokens_file.
#
#   deploy/make-token.sh NAME ROLES [--tokens FILE] [--out FILE]
#
#   NAME     the token's name (letters, digits, '.', '_', '-'): what logs,
#            quotas and the registry's owners show
#   ROLES    solve | register | admin, optionally with ,metrics (or only
#            metrics: may read /metrics with basic auth as NAME)
#   --tokens the token file to update (default deploy/secrets/tokens): the
#            line "NAME SHA256 ROLES" replaces any line for NAME, so running
#            it again rotates the token; a running server picks the file up
#            within --auth_reload_interval, or at once on SIGHUP
#   --out    also write the token itself to FILE (e.g. for Prometheus'
#            password_file), mode 0600; default: DIR/NAME.token beside
#            --tokens
#
# Prints the token (the only place it appears besides --out). The token file
# holds its SHA-256 only.
set -euo pipefail

name="" roles="" tokens="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) tokens="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make-token: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "$name" ]; then name="$1"; elif [ -z "$roles" ]; then roles="$1";
       else echo "make-token: unexpected argument $1" >&2; exit 2; fi; shift ;;
  esac
done
if ! [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]]; then
  echo "make-token: NAME: expected letters, digits, '.', '_' or '-', got '$name'" >&2; exit 2
fi
if ! [[ "$roles" =~ ^(solve|register|admin|metrics)(,(solve|register|admin|metrics))*$ ]]; then
  echo "make-token: ROLES: expected solve, register, admin or metrics (comma-separated), got '$roles'" >&2; exit 2
fi
[ -n "$tokens" ] || tokens="$(dirname "$0")/secrets/tokens"
[ -n "$out" ] || out="$(dirname "$tokens")/$name.token"
# A directory made here is the owner's alone (it may hold raw tokens).
[ -d "$(dirname "$tokens")" ] || mkdir -p -m 700 "$(dirname "$tokens")"
[ -d "$(dirname "$out")" ] || mkdir -p -m 700 "$(dirname "$out")"

token=$(openssl rand -hex 32)
digest=$(printf '%s' "$token" | openssl dgst -sha256 -r | cut -d' ' -f1)
# Replace by rename, so a server watching the file never reads half of it.
tmp=$(mktemp "$tokens.XXXXXX")
if [ -f "$tokens" ]; then
  awk -v n="$name" '$1 != n' "$tokens" >"$tmp"
else
  echo "# reach-server --auth_tokens_file: name sha256(token) roles" >"$tmp"
fi
printf '%s %s %s\n' "$name" "$digest" "$roles" >>"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$tokens"
# The token itself: readable by its owner only.
rm -f "$out"
(umask 077; printf '%s' "$token" >"$out")
echo "$token"
