#!/usr/bin/env bash
# Installs what tests/cgroup_v2.rs boots: a small virtual machine in which cgroup v2 owns the
# memory and pids controllers, as on most Linux hosts today. The dev VM cannot show that path:
# its controllers are bound to cgroup v1 hierarchies, and its cgroup v2 hierarchy has none.
#   - QEMU (Debian's qemu-system-x86), run with its own CPU emulator (TCG): no /dev/kvm needed;
#   - busybox-static: the guest's whole userland (a shell, su, mount), next to airlock's own
#     static binary;
#   - Debian 12's own kernel (the package linux-image-amd64 depends on), unpacked, not
#     installed: its vmlinuz alone, copied to $PREFIX/vmlinuz.
# Run as root. Idempotent: what is there already is not fetched again. Bounded: each step has
# a deadline.
#   scripts/vm.sh          install what is missing
#   scripts/vm.sh --check  exit 0 when everything is installed, 1 otherwise
set -euo pipefail

PREFIX=${AIRLOCK_VM_PREFIX:-/opt/airlock-vm}

# Debian's busybox (dynamic) and busybox-static both install /bin/busybox; the guest has no
# libraries, so only the static one will do.
static_busybox() {
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'
}
installed() {
  [ -x /usr/bin/qemu-system-x86_64 ] && static_busybox && [ -s "$PREFIX/vmlinuz" ]
}

if [[ ${1:-} == --check ]]; then
  installed && exit 0 || exit 1
fi
installed && exit 0

export DEBIAN_FRONTEND=noninteractive
need=()
[ -x /usr/bin/qemu-system-x86_64 ] || need+=(qemu-system-x86)
static_busybox || need+=(busybox-static)
kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'
}
if [ ${#need[@]} -gt 0 ] || [ -z "$(kernel_pkg)" ]; then
  timeout 600 apt-get update -qq
fi
if [ ${#need[@]} -gt 0 ]; then
  timeout 900 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -s "$PREFIX/vmlinuz" ]; then
  pkg=$(kernel_pkg)
  [ -n "$pkg" ] || { echo "vm.sh: apt knows no package linux-image-amd64 depends on" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # apt's download sandbox user must be able to write where the package goes.
  chmod 0777 "$work"
  (cd "$work" && timeout 900 apt-get download -qq "$pkg")
  deb=$(ls "$work"/*.deb)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards './boot/vmlinuz-*'
  mkdir -p "$PREFIX"
  cp "$work"/boot/vmlinuz-* "$PREFIX/vmlinuz.new"
  echo "$pkg" > "$PREFIX/kernel-package"
  mv "$PREFIX/vmlinuz.new" "$PREFIX/vmlinuz"
fi
installed
