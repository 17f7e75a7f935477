#!/usr/bin/env bash
# Installs the real clients of bubblewrap that tests/clients.rs runs against airlock's drop-in
# `bwrap`, into one prefix (default /opt/airlock-clients; AIRLOCK_CLIENTS_PREFIX overrides):
#   - Anthropic's sandbox runtime (`srt`, npm @anthropic-ai/sandbox-runtime) and what it needs
#     on Linux besides bwrap: socat and ripgrep (Debian packages);
#   - OpenAI's Codex CLI (`codex sandbox`, npm @openai/codex);
#   - Debian's own bubblewrap client, ansible-runner (python3-ansible-runner, which brings
#     ansible and bubblewrap): `ansible-runner run --process-isolation` wraps ansible-playbook
#     in bwrap; installed without recommends, pinned to bookworm's version;
#   - strace (the tests check which bwrap binary really ran), curl (a probe inside srt), and
#     Debian's bubblewrap (the reference the captured command lines are replayed against).
# Versions are pinned to the ones the fixtures in tests/fixtures/clients/ were captured with;
# SRT_VERSION / CODEX_VERSION / ANSIBLE_RUNNER_VERSION override. Idempotent: what is there
# already is not fetched again.
# Run as root. Bounded: each install step has a deadline.
#   scripts/clients.sh          install what is missing
#   scripts/clients.sh --check  exit 0 when everything is installed, 1 otherwise
set -euo pipefail

PREFIX=${AIRLOCK_CLIENTS_PREFIX:-/opt/airlock-clients}
SRT_VERSION=${SRT_VERSION:-0.0.78}
CODEX_VERSION=${CODEX_VERSION:-0.171.0}
ANSIBLE_RUNNER_VERSION=${ANSIBLE_RUNNER_VERSION:-2.3.1-2}

missing_debs() {
  local need=()
  command -v socat >/dev/null || need+=(socat)
  command -v rg >/dev/null || need+=(ripgrep)
  command -v strace >/dev/null || need+=(strace)
  command -v curl >/dev/null || need+=(curl)
  command -v setpriv >/dev/null || need+=(util-linux)
  [ -x /usr/bin/bwrap ] || need+=(bubblewrap)
  # Debian's nodejs only suggests npm (NodeSource's bundles it).
  command -v npm >/dev/null || need+=(npm)
  echo "${need[@]}"
}

# Debian packages installed without their recommends (ansible's bring 34 more packages here:
# kerberos, winrm, libcloud and cloud SDK modules no local playbook needs).
missing_debs_lean() {
  local need=()
  command -v ansible-runner >/dev/null || need+=("python3-ansible-runner=$ANSIBLE_RUNNER_VERSION")
  echo "${need[@]}"
}

missing_npm() {
  local need=()
  [ -x "$PREFIX/bin/srt" ] || need+=("@anthropic-ai/sandbox-runtime@$SRT_VERSION")
  [ -x "$PREFIX/bin/codex" ] || need+=("@openai/codex@$CODEX_VERSION")
  echo "${need[@]}"
}

if [ "${1:-}" = "--check" ]; then
  debs=$(missing_debs)
  lean=$(missing_debs_lean)
  npms=$(missing_npm)
  [ -z "$debs$lean$npms" ] && exit 0
  echo "missing: $debs $lean $npms" >&2
  exit 1
fi

if [ "$(id -u)" != 0 ]; then
  echo "clients.sh: run as root (apt-get, and $PREFIX is shared by root and uid 65534)" >&2
  exit 2
fi

debs=$(missing_debs)
lean=$(missing_debs_lean)
if [ -n "$debs$lean" ]; then
  export DEBIAN_FRONTEND=noninteractive
  timeout 180 apt-get update -qq
fi
if [ -n "$debs" ]; then
  echo "clients.sh: apt-get install $debs" >&2
  # shellcheck disable=SC2086
  timeout 180 apt-get install -y -qq $debs >/dev/null
fi
if [ -n "$lean" ]; then
  echo "clients.sh: apt-get install --no-install-recommends $lean" >&2
  # shellcheck disable=SC2086
  timeout 300 apt-get install -y -qq --no-install-recommends $lean >/dev/null
fi

npms=$(missing_npm)
if [ -n "$npms" ]; then
  command -v npm >/dev/null || { echo "clients.sh: npm is not installed" >&2; exit 1; }
  mkdir -p "$PREFIX"
  echo "clients.sh: npm install -g --prefix $PREFIX $npms" >&2
  # shellcheck disable=SC2086
  timeout 240 npm install -g --prefix "$PREFIX" --no-audit --no-fund --loglevel=error $npms
fi

# uid 65534 runs the clients too: everything under the prefix must be reachable by it.
chmod -R go+rX "$PREFIX"
echo "clients.sh: srt $("$PREFIX/bin/srt" --version), $("$PREFIX/bin/codex" --version)," \
  "$(ansible-runner --version)" >&2
