#!/usr/bin/env bash
# Installs what building, running and testing the worker needs on Debian or Ubuntu, and checks that a
# Swift toolchain is on PATH. Idempotent: when everything is present it prints nothing and exits 0.
#
#   scripts/deps.sh            system packages + Swift check
#   scripts/deps.sh --no-swift skip the Swift check (for scripts that only need the broker or Python)
#
# IFW_DEPS_EXTRA: more Debian packages for one checker, e.g. IFW_DEPS_EXTRA=prometheus (promtool) from
# scripts/check-prometheus.sh, so that `make build` does not install them for everyone.
#
# Runs apt-get as root, or through sudo when not root. Services that the packages would start at
# install time (a system-wide RabbitMQ on 5672, nginx on 80) are kept from starting: the project starts
# its own broker with scripts/rabbitmq.sh.
set -euo pipefail

check_swift=1
[[ ${1:-} == --no-swift ]] && check_swift=0

die() { echo "deps.sh: $*" >&2; exit 1; }

packages=(librabbitmq-dev libcurl4-openssl-dev libssl-dev libidn2-dev libvips-dev rabbitmq-server pkg-config openssl ca-certificates)
# Any nginx flavour will do for the local HTTP origins of the integration tests and benchmarks.
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || packages+=(nginx-light)
# shellcheck disable=SC2206 # a space-separated list of package names
packages+=(${IFW_DEPS_EXTRA:-})
# scripts/check-compose.sh installs its validator into a Python virtual environment.
if ! command -v python3 >/dev/null 2>&1; then
  packages+=(python3 python3-venv python3-pip)
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  packages+=(python3-venv python3-pip)
fi

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  command -v apt-get >/dev/null 2>&1 ||
    die "apt-get not found; install these by hand: ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    die "missing packages: ${missing[*]}. Run this script as root, or give this user passwordless sudo."
  fi
  echo "deps.sh: installing ${missing[*]}" >&2
  # Keep package scripts from starting system services (Debian's policy-rc.d protocol, exit 101 =
  # action forbidden) unless the administrator already has a policy in place.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 0755 "$policy"
    own_policy=1
  fi
  cleanup() { if ((own_policy)); then "${sudo[@]}" rm -f "$policy"; fi; }
  trap cleanup EXIT
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null ||
    die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || die "apt-get install failed for: ${missing[*]}"
  for p in "${missing[@]}"; do
    is_installed "$p" || die "package $p is still not installed"
  done
fi

# The S3 integration tests run moto's server mode (a local S3 that checks SigV4 signatures). Use
# moto_server from PATH if there is one, else install moto[server] into a virtual environment under
# .run/ (override with IFW_MOTO_VENV), where the tests look for it too.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOTO_VENV="${IFW_MOTO_VENV:-$ROOT/.run/moto-venv}"
if ! command -v moto_server >/dev/null 2>&1 && ! "$MOTO_VENV/bin/moto_server" --help >/dev/null 2>&1; then
  echo "deps.sh: installing moto[server] into $MOTO_VENV (for the S3 tests)" >&2
  rm -rf "$MOTO_VENV"
  if ! { python3 -m venv "$MOTO_VENV" >/dev/null &&
    "$MOTO_VENV/bin/python" -m pip install -q --disable-pip-version-check 'moto[server]>=5,<6' >/dev/null; }; then
    echo "deps.sh: WARNING: could not install moto[server] from PyPI; the S3 tests will fail under make test (skipped elsewhere)" >&2
  fi
fi

# The integration tests read and write some messages through an AMQP client of their own (pika,
# scripts/amqp-peer.py), so that a bug shared by the worker's encoder and decoder cannot hide.
PEER_VENV="${IFW_PEER_VENV:-$ROOT/.run/peer-venv}"
if ! "$PEER_VENV/bin/python" -c 'import pika' >/dev/null 2>&1; then
  echo "deps.sh: installing pika into $PEER_VENV (for the integration tests)" >&2
  rm -rf "$PEER_VENV"
  if ! { python3 -m venv "$PEER_VENV" >/dev/null &&
    "$PEER_VENV/bin/python" -m pip install -q --disable-pip-version-check 'pika>=1.3,<2' >/dev/null; }; then
    echo "deps.sh: WARNING: could not install pika from PyPI; the tests that need it will fail" >&2
  fi
fi

if ((check_swift)); then
  if ! command -v swift >/dev/null 2>&1 || ! swift --version >/dev/null 2>&1; then
    die "no working 'swift' on PATH. Install a Swift 6 toolchain for Linux (swift.org, or swiftly) and put its usr/bin on PATH; 'docker compose up --build' builds without one."
  fi
  ver="$(swift --version 2>/dev/null | grep -o 'Swift version [0-9]*' | head -n1 | awk '{print $3}')"
  if [[ -n $ver ]] && ((ver < 6)); then
    die "Swift $ver found; this package needs Swift 6.1 or newer"
  fi
fi
