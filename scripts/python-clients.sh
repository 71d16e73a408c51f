#!/usr/bin/env bash
# A Python with jsonschema, pika and opentelemetry-proto, for the message-schema tests, examples/python/
# and the OTLP protobuf decoder (scripts/otlp-decode.py), in a
# virtual environment (.run/clients-venv; override with IFW_CLIENTS_VENV) installed from PyPI on
# first use. Prints the interpreter's path. Exit status 75 when it cannot be installed: the tests
# that need it then fail (they never skip).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${IFW_CLIENTS_VENV:-$ROOT/.run/clients-venv}"
PACKAGES=('jsonschema>=4.18,<5' 'pika>=1.3,<2' 'opentelemetry-proto>=1.20,<2')

if ! "$VENV/bin/python" -c 'import jsonschema, pika, opentelemetry.proto.collector.trace.v1.trace_service_pb2' >/dev/null 2>&1; then
  command -v python3 >/dev/null 2>&1 || { echo "python-clients.sh: python3 is missing (scripts/deps.sh installs it)" >&2; exit 75; }
  echo "python-clients.sh: installing ${PACKAGES[*]} into $VENV" >&2
  if ! { { [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV" >/dev/null; } &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PACKAGES[@]}" >/dev/null; }; then
    echo "python-clients.sh: could not install ${PACKAGES[*]} from PyPI" >&2
    exit 75
  fi
fi
echo "$VENV/bin/python"
