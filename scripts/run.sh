#!/usr/bin/env bash
# Builds and runs the worker, as `make run` does:
#   1. installs missing system packages (scripts/deps.sh);
#   2. if nothing answers at the host and port of $AMQP_URL (default amqp://guest:guest@localhost:5672/%2F)
#      and that host is this machine, starts the project-local RabbitMQ node (scripts/rabbitmq.sh,
#      folder .run/rabbitmq) and leaves it running: `make stop-rabbitmq` stops it;
#   3. builds the release binary (scripts/release-build.sh, as the Dockerfile does) and execs `image-fetch-worker run` with this script's arguments,
#      e.g. `scripts/run.sh --config worker.yaml` or `make run ARGS="..."`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/deps.sh"

url="${AMQP_URL:-amqp://guest:guest@localhost:5672/%2F}"
url="${url%%,*}"                       # the first broker of a failover list
scheme="${url%%://*}"
rest="${url#*://}"
rest="${rest%%/*}"                     # authority: [user[:pass]@]host[:port]
hostport="${rest##*@}"
if [[ $hostport == \[* ]]; then        # [IPv6]:port
  host="${hostport%%]*}"; host="${host#[}"
  port="${hostport##*]}"; port="${port#:}"
else
  host="${hostport%%:*}"
  port=""
  [[ $hostport == *:* ]] && port="${hostport##*:}"
fi
[[ -n $port ]] || { [[ $scheme == amqps ]] && port=5671 || port=5672; }
[[ -n $host ]] || host=localhost

answers() {
  if [[ $1 == localhost ]]; then
    # bash tries one address only; the broker may listen on 127.0.0.1 or on ::1.
    answers 127.0.0.1 "$2" || answers ::1 "$2"
  else
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
  fi
}

start_pid=""
if answers "$host" "$port"; then
  echo "==> RabbitMQ answers at $host:$port"
elif [[ $host == localhost || $host == 127.0.0.1 || $host == ::1 ]]; then
  echo "==> nothing answers at $host:$port; starting a local RabbitMQ node (.run/rabbitmq) while building"
  IFW_AMQP_PORT="$port" IFW_RABBIT_DIR="$ROOT/.run/rabbitmq" "$ROOT/scripts/rabbitmq.sh" start &
  start_pid=$!
else
  echo "WARNING: nothing answers at $host:$port; the worker will keep trying to connect" >&2
fi

echo "==> scripts/release-build.sh --product image-fetch-worker"
build_rc=0
"$ROOT/scripts/release-build.sh" --product image-fetch-worker || build_rc=$?
if [[ -n $start_pid ]]; then
  wait "$start_pid" || { echo "the local RabbitMQ node did not start" >&2; exit 1; }
  echo "==> local RabbitMQ left running on 127.0.0.1:$port; stop it with: make stop-rabbitmq"
fi
((build_rc == 0)) || exit "$build_rc"

bin="$(swift build -c release --show-bin-path)/image-fetch-worker"
exec "$bin" run "$@"
