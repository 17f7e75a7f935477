#!/usr/bin/env bash
# Installs what tests/containers.rs runs airlock in: podman (with runc: crun refuses this dev
# VM's hybrid cgroup layout) and a Debian 12 image built here, since container registries may
# be unreachable. The image is a minbase debootstrap with bubblewrap (to compare with airlock's
# bwrap mode), imported as localhost/airlock-bookworm; its rootfs tarball is cached under
# $PREFIX (about 50 MB compressed), so a lost image is imported again without the network.
# Run as root. Idempotent: what is there already is not fetched again. Bounded: each step has
# a deadline.
#   scripts/containers.sh          install what is missing
#   scripts/containers.sh --check  exit 0 when everything is installed, 1 otherwise
set -euo pipefail

PREFIX=${AIRLOCK_CONTAINERS_PREFIX:-/opt/airlock-containers}
IMAGE=localhost/airlock-bookworm:latest
TARBALL=$PREFIX/bookworm-minbase.tar.gz

have_tools() { [ -x /usr/bin/podman ] && command -v runc >/dev/null && command -v debootstrap >/dev/null; }
installed() { have_tools && podman image exists "$IMAGE" 2>/dev/null; }

if [[ ${1:-} == --check ]]; then
  installed && exit 0 || exit 1
fi
installed && exit 0

export DEBIAN_FRONTEND=noninteractive
if ! have_tools; then
  timeout 600 apt-get update -qq
  timeout 900 apt-get install -y -qq --no-install-recommends podman runc debootstrap >/dev/null
fi

if [ ! -s "$TARBALL" ]; then
  mkdir -p "$PREFIX"
  work=$(mktemp -d "$PREFIX/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  timeout 1200 debootstrap --variant=minbase --include=bubblewrap bookworm "$work/root" \
    http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work"/root/var/cache/apt/archives/*.deb "$work"/root/var/lib/apt/lists/*
  tar -C "$work/root" -czf "$TARBALL.new" .
  mv "$TARBALL.new" "$TARBALL"
fi
timeout 300 podman import -q "$TARBALL" "$IMAGE" >/dev/null
installed
