#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need on a fresh Debian machine,
# then runs every test. Run as root: the integration tests launch airlock both as root and as
# uid 65534 (through setpriv).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v setpriv >/dev/null || need+=(util-linux)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v python3 >/dev/null && [ -x /usr/bin/python3 ] || need+=(python3)
[ -x /usr/bin/time ] || need+=(time)
# The C toolchain: the linker for the static glibc build, and what musl-gcc wraps.
command -v cc >/dev/null || need+=(gcc libc6-dev)
# The real tools tests/workloads.rs (and the netlink test) run inside, by their /usr/bin paths;
# strace kills the network namespace's helper mid-step in a containment test; musl-gcc builds
# tests/older_kernel.rs's static probe for its guest.
for tool in git:git sqlite3:sqlite3 make:make node:nodejs tar:tar ip:iproute2 curl:curl \
    script:bsdutils flock:util-linux xz:xz-utils zstd:zstd ps:procps pgrep:procps perl:perl \
    fakeroot:fakeroot dpkg-deb:dpkg strace:strace musl-gcc:musl-tools; do
  [ -x "/usr/bin/${tool%%:*}" ] || need+=("${tool#*:}")
done
/usr/bin/python3 -c 'import pip, setuptools' 2>/dev/null || need+=(python3-pip python3-setuptools)
# A venv with its own pip (ensurepip): Debian ships it apart.
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The tests run programs as uid 65534 that make their temporary files in /tmp (mktemp,
# airlock demo), as on any standard system, where /tmp is world-writable and sticky; a machine
# image that left it 0755 (seen on a fresh VM at stop 47) fails them with EACCES.
[ "$(stat -c %a /tmp)" = 1777 ] || { echo "test.sh: chmod 1777 /tmp (was $(stat -c %a /tmp))" >&2; chmod 1777 /tmp; }

# The real clients of bubblewrap (Anthropic's srt, OpenAI's Codex) that tests/clients.rs runs
# against airlock's drop-in bwrap; there, a client that cannot be installed fails the test.
scripts/clients.sh
export AIRLOCK_CLIENTS_REQUIRED=1
# The virtual machine tests/cgroup_v2.rs and tests/older_kernel.rs boot (QEMU, busybox-static,
# Debian 12's kernel 6.1): the dev VM's memory and pids controllers are cgroup v1's, so cgroup
# v2's limits are shown there, and so is the boundary on a distribution's older kernel; and
# the other kernels tests/ubuntu_kernels.rs and tests/unsupported_kernel.rs boot (Ubuntu
# 22.04's 5.15 and 24.04's 6.8, Debian 11's 5.10), with Debian 12's apparmor_parser.
scripts/vm.sh
export AIRLOCK_VM_REQUIRED=1
# A Debian 12 image run by rootful podman (runc), which tests/containers.rs runs airlock in:
# what a container's default confinement refuses, and the boundary under the options that
# lift it (about 4 s; the image is built once, cached under /opt/airlock-containers).
scripts/containers.sh
export AIRLOCK_CONTAINERS_REQUIRED=1

# Every test runs against the binary the scripts ship (musl when available, see
# scripts/target.sh), then against the static glibc one that a plain `cargo build` makes (the
# README's demo command) when the two differ.
source scripts/target.sh
host=$(rustc -vV | sed -n 's/^host: //p')
targets=("$AIRLOCK_TARGET")
[[ $AIRLOCK_TARGET == "$host" ]] || targets+=("$host")
status=0
for t in "${targets[@]}"; do
    echo "-- building and testing airlock for $t" >&2
    export CARGO_BUILD_TARGET=$t
    cargo build --release --locked 2>/dev/null || cargo build --release
    cargo test --release --no-fail-fast -- --test-threads=2 "$@" || status=1
done
# What the tests leave in the temporary directory once their processes are gone: the copies of
# the binary (tests/common/mod.rs: airlock-test-{bin,bwrap}-PID-XXXXXX) and srt's sockets
# (srt-mux-PID-N.sock, tests/clients.rs). Every test process has exited now.
for f in "${TMPDIR:-/tmp}"/airlock-test-bin-* "${TMPDIR:-/tmp}"/airlock-test-bwrap-* /tmp/srt-mux-*.sock; do
    [[ -e $f ]] || continue
    pid=${f##*/}; pid=${pid#airlock-test-bin-}; pid=${pid#airlock-test-bwrap-}; pid=${pid#srt-mux-}
    pid=${pid%%-*}
    [[ -d /proc/$pid ]] || rm -rf -- "$f"
done
exit $status
