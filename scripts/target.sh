# Sourced by the scripts that build airlock (test.sh, bench.sh, hot-code.sh): chooses the
# target they build, test and measure, and exports it as CARGO_BUILD_TARGET (which cargo
# reads in place of .cargo/config.toml's) and AIRLOCK_TARGET.
#
# airlock is built for musl when the rustc on PATH has, or rustup can add (within 5
# minutes), the target's standard library: a static glibc binary spends about 1 ms of every
# launch in glibc's start-up, most of it CPUID probes that trap to the hypervisor in a VM,
# and musl makes none (measured on the 2-core dev VM: `airlock --version` 1.48 -> 0.64 ms).
# Otherwise the host tuple of .cargo/config.toml (static glibc) is used, and the build says
# so. A CARGO_BUILD_TARGET set by the caller wins.
airlock_has_std() {
    local dir
    dir=$(rustc --print target-libdir --target "$1" 2>/dev/null) || return 1
    compgen -G "$dir/libstd-*.rlib" >/dev/null
}
if [[ -z ${CARGO_BUILD_TARGET:-} ]]; then
    musl="$(uname -m)-unknown-linux-musl"
    if ! airlock_has_std "$musl" && command -v rustup >/dev/null; then
        echo "-- rustup target add $musl" >&2
        timeout 300 rustup target add "$musl" >&2 || true
    fi
    if airlock_has_std "$musl"; then
        export CARGO_BUILD_TARGET=$musl
    else
        CARGO_BUILD_TARGET=$(rustc -vV | sed -n 's/^host: //p')
        export CARGO_BUILD_TARGET
        echo "-- no standard library for $musl: building for $CARGO_BUILD_TARGET (static" \
            "glibc, about 1 ms slower per launch)" >&2
    fi
fi
export AIRLOCK_TARGET=$CARGO_BUILD_TARGET
