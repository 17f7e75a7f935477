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
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The real clients of bubblewrap (Anthropic's srt, OpenAI's Codex) that tests/clients.rs runs
# against airlock's drop-in bwrap; there, a client that cannot be installed fails the test.
scripts/clients.sh
export AIRLOCK_CLIENTS_REQUIRED=1

# The target the tests build and run: musl when rustup has it (scripts/target.sh).
source scripts/target.sh
echo "-- building and testing airlock for $AIRLOCK_TARGET" >&2
cargo build --release --locked 2>/dev/null || cargo build --release
cargo test --release --no-fail-fast -- --test-threads=2 "$@"
