# Sourced by the scripts that build airlock (test.sh, bench.sh, hot-code.sh): chooses the
# target they build, test and measure, and exports it as CARGO_BUILD_TARGET (which cargo
# reads in place of .cargo/config.toml's) and AIRLOCK_TARGET.
#
# airlock is built for musl when rustup has, or can add, the target's standard library: a
# static glibc binary spends about 1 ms of every launch in glibc's start-up, most of it CPUID
# probes that trap to the hypervisor in a VM, and musl makes none (measured on the 2-core dev
# VM: `airlock --version` 1.48 -> 0.64 ms). Otherwise the host tuple of .cargo/config.toml
# (static glibc) is used, and the build says so. A CARGO_BUILD_TARGET set by the caller wins.
if [[ -z ${CARGO_BUILD_TARGET:-} ]]; then
    musl="$(uname -m)-unknown-linux-musl"
    if rustup target list --installed 2>/dev/null | grep -qx "$musl" ||
        rustup target add "$musl" >&2; then
        export CARGO_BUILD_TARGET=$musl
    else
        CARGO_BUILD_TARGET=$(rustc -vV | sed -n 's/^host: //p')
        export CARGO_BUILD_TARGET
        echo "-- $musl not available from rustup: building for $CARGO_BUILD_TARGET (static" \
            "glibc, about 1 ms slower per launch)" >&2
    fi
fi
export AIRLOCK_TARGET=$CARGO_BUILD_TARGET
