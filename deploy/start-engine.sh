#!/usr/bin/env bash
# Makes a container engine available for deploy/smoke.sh on a Debian 12
# machine: installs Debian's docker.io and docker-compose when missing and
# starts dockerd when no daemon answers. Idempotent.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in docker.io docker-compose; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "start-engine: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if docker info >/dev/null 2>&1; then
  echo "start-engine: docker daemon is running"
  exit 0
fi
# Under systemd the package's unit starts it; elsewhere (containers, CI
# runners without an init) start the daemon directly.
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  $SUDO systemctl start docker
else
  $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
fi
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then
    echo "start-engine: docker daemon started"
    exit 0
  fi
  sleep 1
done
echo "start-engine: dockerd did not come up; see /var/log/dockerd.log" >&2
exit 1
