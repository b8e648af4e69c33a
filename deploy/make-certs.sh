#!/usr/bin/env bash
# Makes a development CA and the certificates a Reach deployment needs, with
# openssl (ECDSA P-256):
#
#   DIR/ca.crt, ca.key          the CA (keep ca.key away from servers)
#   DIR/tls.crt, tls.key        reach-server's certificate (serverAuth), for
#                               the names below
#   DIR/client.crt, client.key  a client certificate (clientAuth), for a
#                               server run with --tls_client_ca=DIR/ca.crt
#
#   deploy/make-certs.sh [DIR] [--days N] [--name DNS_OR_IP]... [--force]
#
#   DIR        where to write (default deploy/secrets; created 0700)
#   --name     a further name for the server's certificate (repeatable);
#              always included: localhost, 127.0.0.1, ::1, reach-server and
#              the Kubernetes names reach-server(.reach(.svc(.cluster.local)))
#   --days     validity (default 365)
#   --force    replace existing files (default: keep what is there, so the
#              CA the clients trust does not change under them)
#
# The file names are those of a Kubernetes TLS Secret (tls.crt, tls.key,
# ca.crt), so the same files mount in compose and in k8s:
#   kubectl -n reach create secret generic reach-tls \
#     --from-file=tls.crt=DIR/tls.crt --from-file=tls.key=DIR/tls.key \
#     --from-file=ca.crt=DIR/ca.crt
# For production, issue them from your own CA or cert-manager
# (deploy/k8s-cert-manager/).
set -euo pipefail

dir=""
days=365
force=0
names=(DNS:localhost IP:127.0.0.1 IP:::1 DNS:reach-server DNS:reach-server.reach
       DNS:reach-server.reach.svc DNS:reach-server.reach.svc.cluster.local)
while [ $# -gt 0 ]; do
  case "$1" in
    --days) days="$2"; shift 2 ;;
    --name)
      if [[ "$2" =~ ^[0-9.]+$ || "$2" == *:* ]]; then names+=("IP:$2"); else names+=("DNS:$2"); fi
      shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make-certs: unknown option $1" >&2; exit 2 ;;
    *) dir="$1"; shift ;;
  esac
done
[ -n "$dir" ] || dir="$(dirname "$0")/secrets"
command -v openssl >/dev/null || { echo "make-certs: needs openssl (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"

if [ "$force" = 0 ] && [ -s ca.crt ] && [ -s tls.crt ] && [ -s client.crt ]; then
  echo "make-certs: $PWD already holds ca.crt, tls.crt and client.crt (--force replaces them)"
  exit 0
fi

umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -days "$days" -subj "/CN=Reach development CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt

# leaf NAME CN USAGE SAN
leaf() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$tmp/$1.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$3"
    [ -n "$4" ] && echo "subjectAltName=$4"
  } >"$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.crt -CAkey ca.key \
    -CAcreateserial -CAserial "$tmp/ca.srl" -days "$days" \
    -extfile "$tmp/$1.ext" -out "$1.crt" 2>/dev/null
}
leaf tls reach-server serverAuth "$(IFS=,; echo "${names[*]}")"
leaf client reach-client clientAuth ""

# Readable inside containers, whose user is not this one; the directory
# (0700) keeps other users of this machine out.
chmod 644 ca.crt tls.crt tls.key client.crt client.key
chmod 600 ca.key
echo "make-certs: wrote $PWD/{ca,tls,client}.{crt,key} (valid $days days; server names: ${names[*]})"
