#!/usr/bin/env bash
# What CI forgives nothing of: formatting, lints, and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --all-targets -- -D warnings
# The other architecture the policy has a file for: its code and tests must build clean too,
# where its standard library is installed (`rustup target add aarch64-unknown-linux-musl`).
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-musl; then
    cargo clippy --all-targets --target aarch64-unknown-linux-musl -- -D warnings
fi
scripts/test.sh "$@"
