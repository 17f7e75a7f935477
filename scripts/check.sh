#!/usr/bin/env bash
# What CI forgives nothing of: formatting, lints, and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --all-targets -- -D warnings
scripts/test.sh "$@"
