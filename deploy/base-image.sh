#!/usr/bin/env bash
# Builds the debian:bookworm base image from a Debian mirror with debootstrap
# and imports it into the local container engine, for machines that can
# reach a Debian mirror but no container registry. Elsewhere `docker build`
# pulls debian:bookworm as usual and this script is not needed.
#
#   deploy/base-image.sh [TAG]        default TAG: debian:bookworm
# Environment: ENGINE=docker|podman (default: whichever is installed),
#              DEBIAN_MIRROR (default: http://deb.debian.org/debian).
set -euo pipefail

tag=${1:-debian:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
engine=${ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  else
    echo "base-image: no working docker or podman engine" >&2
    exit 1
  fi
fi
if "$engine" image inspect "$tag" >/dev/null 2>&1; then
  echo "base-image: $tag already present in $engine"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -q && apt-get install -y -q --no-install-recommends debootstrap
fi

rootfs=$(mktemp -d /tmp/reach-bookworm.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "base-image: debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
SOURCES
# Like the official image: no caches, no recommends, no man pages.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
printf 'APT::Install-Recommends "false";\n' > "$rootfs/etc/apt/apt.conf.d/99norecommends"
tar --numeric-owner -C "$rootfs" -c . |
  "$engine" import --change 'CMD ["bash"]' - "$tag"
echo "base-image: imported $tag into $engine"
