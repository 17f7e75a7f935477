#!/usr/bin/env bash
# Installs the small virtual machines the guest tests boot (tests/common/vm.rs): cgroup v2
# owning the memory and pids controllers, as on most Linux hosts today (tests/cgroup_v2.rs;
# the dev VM binds them to cgroup v1 and its v2 hierarchy has none), and distributions'
# kernels other than the dev VM's (older_kernel.rs, userns_disabled.rs, ubuntu_kernels.rs,
# unsupported_kernel.rs).
#   - QEMU (Debian's qemu-system-x86), run with its own CPU emulator (TCG): no /dev/kvm needed;
#   - busybox-static: the guest's whole userland (a shell, su, mount), next to airlock's own
#     static binary;
#   - Debian 12's own kernel (the package linux-image-amd64 depends on), unpacked, not
#     installed: its vmlinuz alone, copied to $PREFIX/vmlinuz;
#   - other distributions' current kernels, the same way, as $PREFIX/vmlinuz-NAME: debian11,
#     Debian 11's 5.10, older than airlock supports (tests/unsupported_kernel.rs); ubuntu2204
#     and ubuntu2404, the generic kernels of Ubuntu 22.04 (5.15) and 24.04 (6.8)
#     (tests/ubuntu_kernels.rs). apt itself fetches and verifies them, with a sources list,
#     lists, cache and status of its own in a temporary directory: the host's apt
#     configuration is neither read for sources nor changed. Debian's archive is verified by
#     debian-archive-keyring; Ubuntu's by the keys of Debian's ubuntu-keyring package (from
#     bookworm-backports, so verified by Debian's keys too), unpacked there, not installed;
#   - Debian 12's apparmor_parser (from the package apparmor, unpacked), which loads a profile
#     in the Ubuntu 24.04 guest, as $PREFIX/apparmor_parser.
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
DEBIAN_KEYS=/usr/share/keyrings/debian-archive-keyring.gpg
# For each other kernel: its NAME, the meta-package that depends on it, and the sources.list
# line of its archive, signed by Debian's keys or Ubuntu's (both words are replaced).
OTHERS=(
  debian11 linux-image-amd64 "deb [signed-by=DEBIAN_KEYS] http://deb.debian.org/debian bullseye main"
  ubuntu2204 linux-image-generic "deb [signed-by=UBUNTU_KEYS] http://archive.ubuntu.com/ubuntu jammy-updates main"
  ubuntu2404 linux-image-generic "deb [signed-by=UBUNTU_KEYS] http://archive.ubuntu.com/ubuntu noble-updates main"
)
others_installed() {
  local i
  for ((i = 0; i < ${#OTHERS[@]}; i += 3)); do
    [ -s "$PREFIX/vmlinuz-${OTHERS[i]}" ] || return 1
  done
}
installed() {
  [ -x /usr/bin/qemu-system-x86_64 ] && static_busybox && [ -s "$PREFIX/vmlinuz" ] &&
    others_installed && [ -s "$PREFIX/apparmor_parser" ]
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
apparmor_known() {
  [ -s "$PREFIX/apparmor_parser" ] || apt-cache show apparmor >/dev/null 2>&1
}
if [ ${#need[@]} -gt 0 ] || [ -z "$(kernel_pkg)" ] || ! apparmor_known; then
  timeout 600 apt-get update -qq
fi
if [ ${#need[@]} -gt 0 ]; then
  timeout 900 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt's download sandbox user (_apt) must reach the lists and the packages' directories.
chmod 0755 "$work"

# An apt of its own in $work/$1, reading only the sources.list line $2: its lists, cache and
# (empty) status are there, the host's sources, preferences and status are not read, and
# nothing of the host's apt is changed. Sets the array apt; updates the lists.
private_apt() {
  local dir=$work/$1
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/deb"
  chown _apt "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/deb"
  echo "$2" > "$dir/sources.list"
  : > "$dir/status"
  apt=(-qq -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache"
    -o Dir::State::status="$dir/status" -o APT::Architectures=amd64)
  timeout 600 apt-get "${apt[@]}" update
}

# Download the package $2 with the private apt of $1 into $work/$1/deb (the only .deb there).
download() {
  (cd "$work/$1/deb" && timeout 900 apt-get "${apt[@]}" download "$2")
}

# The package the meta-package $1 depends on first whose name starts with $2.
depends() {
  timeout 60 apt-cache "${apt[@]}" depends "$1" | awk -v p="Depends: $2" 'index($0, p) {print $2; exit}'
}

# The vmlinuz of the kernel package $2, downloaded into $work/$1/deb, installed as $3 (and the
# package's name as $3.package).
unpack() {
  local dir=$work/$1/deb
  dpkg-deb --fsys-tarfile "$dir"/*.deb | tar -x -C "$dir" --wildcards './boot/vmlinuz-*'
  mkdir -p "$PREFIX"
  install -m 0644 "$dir"/boot/vmlinuz-* "$3.new"
  echo "$2" > "$3.package"
  mv "$3.new" "$3"
}

if [ ! -s "$PREFIX/vmlinuz" ]; then
  pkg=$(kernel_pkg)
  [ -n "$pkg" ] || { echo "vm.sh: apt knows no package linux-image-amd64 depends on" >&2; exit 1; }
  mkdir -p "$work/debian12/deb"
  chown _apt "$work/debian12/deb"
  (cd "$work/debian12/deb" && timeout 900 apt-get download -qq "$pkg")
  unpack debian12 "$pkg" "$PREFIX/vmlinuz"
  mv "$PREFIX/vmlinuz.package" "$PREFIX/kernel-package"
fi

# Debian 12's apparmor_parser, unpacked from its package, not installed: linked to libc alone,
# it runs in the Ubuntu 24.04 guest (given the host's loader and libc) to load a profile.
if [ ! -s "$PREFIX/apparmor_parser" ]; then
  mkdir -p "$work/apparmor/deb"
  chown _apt "$work/apparmor/deb"
  (cd "$work/apparmor/deb" && timeout 900 apt-get download -qq apparmor)
  dpkg-deb --fsys-tarfile "$work"/apparmor/deb/*.deb |
    tar -x -C "$work/apparmor" --wildcards './*sbin/apparmor_parser'
  mkdir -p "$PREFIX"
  install -m 0755 "$work"/apparmor/*sbin/apparmor_parser "$PREFIX/apparmor_parser.new"
  mv "$PREFIX/apparmor_parser.new" "$PREFIX/apparmor_parser"
fi

# Ubuntu's archive keys, from Debian's own ubuntu-keyring package (bookworm-backports, which
# debian-archive-keyring verifies); unpacked into $work, not installed.
ubuntu_keyring=$work/ubuntu-keyring/deb/usr/share/keyrings/ubuntu-archive-keyring.gpg
fetch_ubuntu_keyring() {
  [ -s "$ubuntu_keyring" ] && return
  private_apt ubuntu-keyring "deb [signed-by=$DEBIAN_KEYS] http://deb.debian.org/debian bookworm-backports main"
  download ubuntu-keyring ubuntu-keyring
  dpkg-deb -x "$work"/ubuntu-keyring/deb/*.deb "$work/ubuntu-keyring/deb"
  [ -s "$ubuntu_keyring" ] || { echo "vm.sh: no $ubuntu_keyring in ubuntu-keyring" >&2; exit 1; }
}

for ((i = 0; i < ${#OTHERS[@]}; i += 3)); do
  name=${OTHERS[i]} meta=${OTHERS[i + 1]} source=${OTHERS[i + 2]}
  [ -s "$PREFIX/vmlinuz-$name" ] && continue
  if [[ $source == *UBUNTU_KEYS* ]]; then
    fetch_ubuntu_keyring
    source=${source//UBUNTU_KEYS/$ubuntu_keyring}
  fi
  private_apt "$name" "${source//DEBIAN_KEYS/$DEBIAN_KEYS}"
  pkg=$(depends "$meta" linux-image-)
  [ -n "$pkg" ] || { echo "vm.sh: $name's archive has no package $meta depends on" >&2; exit 1; }
  download "$name" "$pkg"
  unpack "$name" "$pkg" "$PREFIX/vmlinuz-$name"
done
installed
