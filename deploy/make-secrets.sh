#!/usr/bin/env bash
# Everything the compose stack (deploy/docker-compose.yml) mounts, made once
# in deploy/secrets/ (git-ignored, 0700). Existing files are kept; delete
# the directory to start over.
#
#   DIR/tls/       ca.crt, tls.crt, tls.key   -> reach-server /etc/reach/tls
#   DIR/auth/      tokens (SHA-256 only)      -> reach-server /etc/reach/auth
#   DIR/pki/       the CA's key and a client certificate (deploy/make-certs.sh)
#   DIR/admin.token       a token with role admin
#   DIR/client.token      a token with role register (what a tool uses)
#   DIR/prometheus.token  role metrics: Prometheus' scrape password
#   DIR/grafana-admin-password
#   DIR/postgres-password  the HA stack's database password (docker-compose.ha.yml)
#   DIR/registry.flags     --registry=postgresql://reach:PASSWORD@postgres:5432/reach,
#                          read by each replica with --flagfile
#
#   deploy/make-secrets.sh [DIR]
#
# Directories, not single files, are mounted, so replacing a certificate or
# rotating a token (deploy/make-token.sh NAME ROLE --tokens DIR/auth/tokens)
# reaches the running server without a restart.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/secrets}"
"$here/make-certs.sh" "$dir/pki"
mkdir -p "$dir/tls" "$dir/auth"
chmod 700 "$dir"
chmod 755 "$dir/tls" "$dir/auth"
for f in ca.crt tls.crt tls.key; do
  cmp -s "$dir/pki/$f" "$dir/tls/$f" || cp -p "$dir/pki/$f" "$dir/tls/$f"
done
for spec in admin:admin client:register prometheus:metrics; do
  name=${spec%%:*}
  if [ -s "$dir/$name.token" ] && grep -q "^$name " "$dir/auth/tokens" 2>/dev/null; then
    continue
  fi
  "$here/make-token.sh" "$name" "${spec#*:}" --tokens "$dir/auth/tokens" \
    --out "$dir/$name.token" >/dev/null
  echo "make-secrets: token $name (${spec#*:}) in $dir/$name.token"
done
# Prometheus reads its password file as another user inside its container
# (a bind mount keeps the mode); it may read /metrics only, and DIR itself
# is the owner's alone.
chmod 644 "$dir/prometheus.token"
if [ ! -s "$dir/grafana-admin-password" ]; then
  (umask 022; openssl rand -base64 24 | tr -d '\n' >"$dir/grafana-admin-password")
  echo "make-secrets: Grafana admin password in $dir/grafana-admin-password"
fi
# The HA stack's PostgreSQL password, and the replicas' flag file naming
# the database with it (hex: nothing to escape in a URL). Readable inside
# the containers (PostgreSQL and reach run as their own users; a bind mount
# keeps the mode); DIR itself is the owner's alone.
if [ ! -s "$dir/postgres-password" ]; then
  (umask 022; openssl rand -hex 24 | tr -d '\n' >"$dir/postgres-password")
  echo "make-secrets: PostgreSQL password in $dir/postgres-password"
fi
if [ ! -s "$dir/registry.flags" ]; then
  (umask 022; echo "--registry=postgresql://reach:$(cat "$dir/postgres-password")@postgres:5432/reach" \
    >"$dir/registry.flags")
  echo "make-secrets: the replicas' --registry flag in $dir/registry.flags"
fi
