#!/usr/bin/env bash
# The test suite, as `make test` and .ci/run run it:
#   1. installs missing system packages (scripts/deps.sh) and checks the Swift sources' formatting
#      (scripts/check-format.sh: swift format lint, .swift-format), which fails at once;
#   2. starts a throw-away RabbitMQ node on 127.0.0.1 (port 5673, or the next free one up to 5692;
#      IFW_AMQP_PORT forces one) while `swift build --build-tests` runs; beside the build too (their
#      first run mostly waits on PyPI), it validates docker-compose.yml (scripts/check-compose.sh),
#      deploy/kubernetes/ (scripts/check-kubernetes.sh), the alert rules and dashboard
#      (scripts/check-prometheus.sh), and for the whole suite installs the image tools
#      (scripts/image-tools.sh); their output is shown after the build, and an invalid file fails
#      the run then;
#   3. runs `swift test` with this script's arguments, e.g. `scripts/test.sh --filter ImageFetchWorkerTests`;
#   4. without arguments (the whole suite, as `make test` runs it), the allocation gate
#      (scripts/benchmark-gate.sh: the malloc counts of Benchmarks/ against Benchmarks/Thresholds/):
#      its release build runs at low priority (nice) beside `swift test`, its log is shown after the
#      tests, and the check runs once both are done;
#   5. when a test failed, repeats swift test's failure lines (✘) at the end of the output;
#   6. stops the node (and a background job still running) and deletes its folder and the run's
#      temporary folder (TMPDIR for everything it starts) on any exit (success, failure, Ctrl-C),
#      and exits with swift test's status, or the gate's (its build's)
#      when the tests passed.
#
# Environment the tests get:
#   IFW_TEST_AMQP_URL          amqp://guest:guest@127.0.0.1:PORT/%2F
#   IFW_TEST_RABBITMQ_SCRIPT   absolute path of scripts/rabbitmq.sh (start, stop, status, wait, freeze,
#                              thaw, pid, ctl ...); it finds the test node through the two below
#   IFW_TEST_RABBITMQ_CTL      "<abs>/scripts/rabbitmq.sh ctl": rabbitmqctl against the test node, e.g.
#                              $IFW_TEST_RABBITMQ_CTL -q list_queues --no-table-headers name messages_ready consumers
#   IFW_AMQP_PORT, IFW_RABBIT_DIR   the node's port and folder
#   IFW_TEST_MANAGEMENT_URL    http://127.0.0.1:MGMT_PORT, the management API (unset with IFW_TEST_MANAGEMENT=0)
#   IFW_RABBIT_PLUGINS, IFW_MGMT_PORT   so that `$IFW_TEST_RABBITMQ_SCRIPT start` brings the plugin back
#   IFW_TEST_CLUSTER_DIR       the folder of the three-node cluster that ClusterTests starts on first use
#                              (`rabbitmq.sh cluster start`, ports from 5701); destroyed here on exit
#   IFW_TEST_STRICT=1          a suite whose tool (broker, cluster, moto_server) is missing fails
#                              instead of being skipped
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RABBIT="$ROOT/scripts/rabbitmq.sh"

# Every temporary file of the run goes to one folder of its own, deleted on exit: the Swift driver
# leaves a TemporaryDirectory.* for each call, SwiftPM its locks, and the tests, the benchmarks and
# ImageMagick their scratch files. Sticky and world-writable like /tmp, since the broker runs as
# the rabbitmq user and inherits it.
IFW_TEST_TMP="$(mktemp -d "${TMPDIR:-/tmp}/ifw-test.XXXXXX")"
chmod 1777 "$IFW_TEST_TMP"
export TMPDIR="$IFW_TEST_TMP"
# Until the full cleanup below replaces it.
trap 'rm -rf "$IFW_TEST_TMP"' EXIT

"$ROOT/scripts/deps.sh"

# validate WHAT CHECKER: runs a validator; 75 means it could not be installed (a warning only).
validate() {
  local what=$1 checker=$2 rc=0
  echo "==> validating $what"
  "$ROOT/scripts/$checker" || rc=$?
  case $rc in
    0) ;;
    75) echo "WARNING: $what was not validated: the validator could not be installed" >&2 ;;
    *) echo "$what is invalid" >&2; exit "$rc" ;;
  esac
}
# The one check a developer trips on most, and quick: before the build, so it fails at once.
validate "the Swift sources' formatting (.swift-format)" check-format.sh

# A private folder for the node; the ports are chosen below.
IFW_RABBIT_DIR="$(mktemp -d "${TMPDIR:-/tmp}/ifw-test-rabbitmq.XXXXXX")"
chmod 0755 "$IFW_RABBIT_DIR"
export IFW_RABBIT_DIR
# The cluster's folder (created by the tests on first use, so a filtered run pays nothing for it).
export IFW_TEST_CLUSTER_DIR="$IFW_RABBIT_DIR.cluster"
export IFW_TEST_STRICT=1
# Lets a later run reclaim the port if this one is killed with SIGKILL and cannot clean up.
export IFW_RABBIT_OWNER_PID=$$

start_pid=""
checks_pid=""
gate_pid=""
checks_log="$IFW_RABBIT_DIR.checks.log"
gate_log="$IFW_RABBIT_DIR.gate-build.log"
test_log="$IFW_RABBIT_DIR.swift-test.log"
# stop_job PID: ends a background job started with setsid (its own process group) and all it started.
stop_job() {
  kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $checks_pid ]]; then stop_job "$checks_pid"; fi
  if [[ -n $gate_pid ]]; then stop_job "$gate_pid"; fi
  if [[ -n $start_pid ]] && kill -0 "$start_pid" 2>/dev/null; then
    # Interrupted while the broker was booting: end rabbitmq.sh start (a child of the subshell) too.
    pkill -TERM -P "$start_pid" 2>/dev/null || true
    kill "$start_pid" 2>/dev/null || true
    wait "$start_pid" 2>/dev/null || true
  fi
  echo "==> stopping the test RabbitMQ node" >&2
  # Without IFW_AMQP_PORT (start not finished), rabbitmq.sh reads the port from the node's folder.
  "$RABBIT" destroy >/dev/null 2>&1 || true
  if [[ -d $IFW_TEST_CLUSTER_DIR ]]; then
    echo "==> stopping the test RabbitMQ cluster" >&2
    IFW_RABBIT_DIR="$IFW_TEST_CLUSTER_DIR" IFW_AMQP_PORT="" "$RABBIT" cluster destroy >/dev/null 2>&1 || true
  fi
  rm -rf "$IFW_RABBIT_DIR" "$IFW_RABBIT_DIR.start.log" "$IFW_RABBIT_DIR.port" "$checks_log" "$gate_log" "$test_log" "$IFW_TEST_CLUSTER_DIR"* 2>/dev/null || true
  # Last: it holds the folders above, and whatever else the toolchain and the tests left.
  rm -rf "$IFW_TEST_TMP" 2>/dev/null || true
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The management plugin, for the `depth --management-url` tests; IFW_TEST_MANAGEMENT=0 leaves it off.
# Its listener is the AMQP port + 10000 (15673 for 5673), so parallel test nodes never share it.
# Exported, so that a test that stops and starts the node gets the plugin back.
if [[ ${IFW_TEST_MANAGEMENT:-1} != 0 ]]; then
  export IFW_RABBIT_PLUGINS="${IFW_RABBIT_PLUGINS:-rabbitmq_management}"
fi

if [[ -n ${IFW_AMQP_PORT:-} ]]; then
  ports=("$IFW_AMQP_PORT")
else
  mapfile -t ports < <(seq 5673 5692)
fi

# Start the broker in the background: it boots while Swift compiles.
start_log="$IFW_RABBIT_DIR.start.log"
start_broker() {
  local port rc
  for port in "${ports[@]}"; do
    rc=0
    IFW_AMQP_PORT=$port IFW_MGMT_PORT=$((port + 10000)) "$RABBIT" start || rc=$?
    if ((rc == 0)); then
      echo "$port" >"$IFW_RABBIT_DIR.port"
      return 0
    fi
    ((rc == 98)) || return "$rc"
  done
  echo "no free port among ${ports[*]}" >&2
  return 1
}
echo "==> starting a test RabbitMQ node (log: $start_log)"
start_broker >"$start_log" 2>&1 &
start_pid=$!

# The validators and the image tools, beside the build: on a fresh clone they spend most of their
# time installing from PyPI. setsid: a process group of their own, which cleanup ends as one.
checks() {
  validate docker-compose.yml check-compose.sh
  validate deploy/kubernetes/ check-kubernetes.sh
  # Never exits 75: without promtool the alert rules are untested, and `make test` fails.
  validate "deploy/prometheus/ and deploy/grafana/" check-prometheus.sh
  # For the whole suite, what ImageSnifferDifferentialTests needs (it calls image-tools.sh again,
  # which then fails that test with its message, should this fail).
  if ((whole_suite)); then
    echo "==> installing the image tools (scripts/image-tools.sh)"
    "$ROOT/scripts/image-tools.sh" || echo "WARNING: scripts/image-tools.sh failed" >&2
  fi
}
export -f checks validate
export ROOT whole_suite=$(($# == 0))
echo "==> validating docker-compose.yml and deploy/ beside the build (log: $checks_log)"
setsid bash -c 'set -euo pipefail; checks' >"$checks_log" 2>&1 &
checks_pid=$!

echo "==> swift build --build-tests"
build_rc=0
swift build --build-tests || build_rc=$?

checks_rc=0
wait "$checks_pid" || checks_rc=$?
checks_pid=""
cat "$checks_log"
((checks_rc == 0)) || exit "$checks_rc"

# A failed or interrupted build ends the run at once (swift build exits 130 on Ctrl-C); the EXIT trap
# stops a broker that is still booting.
((build_rc == 0)) || { echo "swift build --build-tests failed ($build_rc)" >&2; exit "$build_rc"; }

broker_rc=0
wait "$start_pid" || broker_rc=$?
start_pid=""
cat "$start_log" >&2
if [[ -s $IFW_RABBIT_DIR.port ]]; then
  IFW_AMQP_PORT="$(cat "$IFW_RABBIT_DIR.port")"
  export IFW_AMQP_PORT
fi
rm -f "$start_log" "$IFW_RABBIT_DIR.port"
((broker_rc == 0)) || { echo "the test RabbitMQ node did not start" >&2; exit 1; }

export IFW_TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:$IFW_AMQP_PORT/%2F"
export IFW_TEST_RABBITMQ_SCRIPT="$RABBIT"
export IFW_TEST_RABBITMQ_CTL="$RABBIT ctl"
export IFW_MGMT_PORT=$((IFW_AMQP_PORT + 10000))
if [[ ,${IFW_RABBIT_PLUGINS:-}, == *,rabbitmq_management,* ]]; then
  export IFW_TEST_MANAGEMENT_URL="http://127.0.0.1:$IFW_MGMT_PORT"
fi

if (($# == 0)); then
  # Integration tests mostly wait on the broker and the origins, so the gate's release build takes
  # the spare core, at the lowest priority so that the tests still get the CPU when they want it.
  echo "==> building the allocation gate's benchmarks beside swift test (log: $gate_log)"
  setsid nice -n 19 "$ROOT/scripts/benchmark-gate.sh" build >"$gate_log" 2>&1 &
  gate_pid=$!
fi

echo "==> swift test $* (RabbitMQ at 127.0.0.1:$IFW_AMQP_PORT)"
test_rc=0
# Serial: some suites stop, restart or freeze the shared broker, which would break others
# running at the same time. The output is kept, so that the failures can be repeated last: a CI log
# often shows only its tail, which the gate's output fills.
swift test --no-parallel "$@" 2>&1 | tee "$test_log" || test_rc=${PIPESTATUS[0]}

if (($# == 0)); then
  echo "==> the allocation gate (scripts/benchmark-gate.sh); its build, run beside swift test:"
  gate_rc=0
  wait "$gate_pid" || gate_rc=$?
  gate_pid=""
  cat "$gate_log"
  if ((gate_rc == 0)); then
    "$ROOT/scripts/benchmark-gate.sh" || gate_rc=$?
  else
    echo "benchmark-gate.sh: the benchmarks did not build (exit $gate_rc)" >&2
  fi
  ((test_rc != 0 || gate_rc == 0)) || test_rc=$gate_rc
fi
if ((test_rc != 0)) && grep -q '✘' "$test_log"; then
  echo "==> what failed in swift test (exit $test_rc), repeated from above:" >&2
  grep '✘' "$test_log" | head -n 60 >&2
fi
exit "$test_rc"
