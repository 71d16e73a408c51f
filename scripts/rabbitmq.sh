#!/usr/bin/env bash
# A project-local RabbitMQ node for development and tests.
#
#   scripts/rabbitmq.sh start      start the node (stops a stale one first), wait until it is ready;
#                                  a healthy node already running from the same folder is kept
#   scripts/rabbitmq.sh stop       stop it (also when frozen with kill -STOP)
#   scripts/rabbitmq.sh status     exit 0 and print a line if it runs, exit 3 if not
#   scripts/rabbitmq.sh wait [S]   wait up to S seconds (default 60) until it accepts AMQP
#   scripts/rabbitmq.sh ctl ARGS   rabbitmqctl against this node, e.g.
#                                  `ctl -q list_queues --no-table-headers name messages_ready consumers`
#   scripts/rabbitmq.sh freeze     kill -STOP the node (to test heartbeats and timeouts)
#   scripts/rabbitmq.sh thaw       kill -CONT the node
#   scripts/rabbitmq.sh pid        print the node's OS pid
#   scripts/rabbitmq.sh destroy    stop it and delete its folder (data and logs)
#   scripts/rabbitmq.sh kill9      kill -9 the node's Erlang VM (a crash, for failover tests)
#
# A three-node cluster on loopback, for the failover tests: nodes on IFW_AMQP_PORT, +1 and +2
# (default 5701), each in IFW_RABBIT_DIR/node-PORT, sharing one Erlang cookie in IFW_RABBIT_DIR/home.
#   scripts/rabbitmq.sh cluster start     start the three nodes (in parallel) and join the 2nd and 3rd
#                                         to the 1st; prints the three AMQP URLs, comma-separated
#   scripts/rabbitmq.sh cluster stop      stop the three nodes
#   scripts/rabbitmq.sh cluster destroy   stop them and delete the folder
#   scripts/rabbitmq.sh cluster urls      print the three AMQP URLs, comma-separated
# IFW_RABBIT_DIR defaults to $PWD/.run/rabbitmq-cluster for these.
#   scripts/rabbitmq.sh node N CMD ...    any single-node command above (start, stop, kill9, ctl ...)
#                                         on node N (1, 2 or 3) of the cluster; a killed node started
#                                         again rejoins the cluster
#
# Environment:
#   IFW_AMQP_PORT        AMQP port, default: the folder's last port, else 5672; 127.0.0.1 only
#   IFW_RABBIT_DIR       data, logs, config and the Erlang cookie; default $PWD/.run/rabbitmq
#   IFW_RABBIT_PLUGINS   comma-separated plugins to enable, e.g. rabbitmq_management (off by default:
#                        it adds a few seconds to the start)
#   IFW_MGMT_PORT        management listener when the plugin is on, default 15672 (127.0.0.1)
#   IFW_RABBIT_TIMEOUT   seconds `start` and `wait` allow, default 60
#   IFW_RABBIT_OWNER_PID the process the node belongs to (scripts/test.sh); once it has exited, a later
#                        `start` on the same port may stop the leftover node
#   IFW_RABBIT_HOME      the nodes' HOME (where the Erlang cookie lives), default IFW_RABBIT_DIR/home
#   IFW_RABBIT_ERL_ARGS  extra Erlang VM flags for the node, e.g. "+sbwt none" (no scheduler busy-wait)
#   IFW_RABBIT_EXTRA_CONF extra rabbitmq.conf lines (newline-separated), appended as given, e.g. a TLS
#                        listener: "listeners.ssl.default = 127.0.0.1:5671" and "ssl_options.certfile = ...".
#                        Files it names must be readable by the rabbitmq user.
#
# `start` exits 98 when the port (or the node name) is taken by something it must not stop.
# The node is named ifw-PORT@localhost and its Erlang distribution port is PORT+20000, so nodes on
# different AMQP ports never clash. Debian's rabbitmq-server runs as the `rabbitmq` user, so the folder
# is chowned to it and every RabbitMQ command here runs as that user (runuser as root, sudo otherwise),
# with HOME inside the folder so the node and `ctl` share one Erlang cookie.
#
# Start time measured here (2 cores, RabbitMQ 3.10.8, Erlang 25.2), from `start` to a ready node: 5 s on a
# quiet machine, 13-19 s while Swift builds load both cores (load average 11). `stop` takes 3-5 s.
set -euo pipefail

if [[ ${1:-} == cluster || ${1:-} == node ]]; then
  DIR="${IFW_RABBIT_DIR:-$PWD/.run/rabbitmq-cluster}"
else
  DIR="${IFW_RABBIT_DIR:-$PWD/.run/rabbitmq}"
fi
# Without IFW_AMQP_PORT, the port the folder's node was last started on (so `stop` finds a node that
# scripts/run.sh started on the port of $AMQP_URL), else 5672.
DEFAULT_PORT=5672
[[ ${1:-} == cluster || ${1:-} == node ]] && DEFAULT_PORT=5701
PORT="${IFW_AMQP_PORT:-$(cat "$DIR/port" 2>/dev/null || echo $DEFAULT_PORT)}"
PLUGINS="${IFW_RABBIT_PLUGINS:-}"
MGMT_PORT="${IFW_MGMT_PORT:-15672}"
TIMEOUT="${IFW_RABBIT_TIMEOUT:-60}"
RABBIT_USER=rabbitmq
RABBIT_BIN=/usr/lib/rabbitmq/bin

die() { echo "rabbitmq.sh: $*" >&2; exit 1; }
say() { echo "rabbitmq.sh: $*" >&2; }

case "$PORT" in '' | *[!0-9]*) die "IFW_AMQP_PORT must be a port number, got '$PORT'" ;; esac
((PORT > 0 && PORT < 45536)) || die "IFW_AMQP_PORT must be between 1 and 45535 (the distribution port is PORT+20000), got $PORT"
DIST_PORT=$((PORT + 20000))
NODE="ifw-$PORT@localhost"
mkdir -p "$DIR" 2>/dev/null || true
DIR="$(cd "$DIR" 2>/dev/null && pwd)" || die "cannot create the folder IFW_RABBIT_DIR=$DIR"
PID_FILE="$DIR/rabbitmq.pid"
HOME_DIR="${IFW_RABBIT_HOME:-$DIR/home}"
# Child invocations of this script (timeout "$0" ctl ...) must address the same node.
export IFW_AMQP_PORT="$PORT" IFW_RABBIT_DIR="$DIR"

# Run a command as root (for chown/rm of files owned by rabbitmq).
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else die "run this as root or with passwordless sudo: the node runs as the $RABBIT_USER user (failed: $*)"; fi
}

# Run a command as the rabbitmq user with the node's environment, from inside the node's folder.
as_rabbit() {
  local -a env_args=(
    HOME="$HOME_DIR"
    PATH="$RABBIT_BIN:/usr/sbin:/usr/bin:/sbin:/bin"
    LANG=C.UTF-8 LC_ALL=C.UTF-8
    RABBITMQ_NODENAME="$NODE"
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    RABBITMQ_NODE_PORT="$PORT"
    RABBITMQ_DIST_PORT="$DIST_PORT"
    RABBITMQ_MNESIA_BASE="$DIR/mnesia"
    RABBITMQ_LOG_BASE="$DIR/log"
    RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf"
    RABBITMQ_ADVANCED_CONFIG_FILE="$DIR/advanced.config"
    RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf"
    RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins"
    RABBITMQ_PID_FILE="$PID_FILE"
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} ${IFW_RABBIT_ERL_ARGS:-}"
    ERL_EPMD_ADDRESS=127.0.0.1
    ERL_CRASH_DUMP="$DIR/log/erl_crash.dump"
  )
  if [[ $(id -un) == "$RABBIT_USER" ]]; then
    (cd "$DIR" && env "${env_args[@]}" "$@")
  elif [[ $(id -u) -eq 0 ]]; then
    (cd "$DIR" && runuser -u "$RABBIT_USER" -- env "${env_args[@]}" "$@")
  elif command -v sudo >/dev/null 2>&1; then
    (cd "$DIR" && sudo -n -u "$RABBIT_USER" env "${env_args[@]}" "$@")
  else
    die "run as root, as $RABBIT_USER, or with passwordless sudo: the node must run as $RABBIT_USER"
  fi
}

ctl() { as_rabbit "$RABBIT_BIN/rabbitmqctl" -n "$NODE" "$@"; }

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

node_pid() {
  local pid
  [[ -s $PID_FILE ]] || return 1
  pid="$(tr -dc 0-9 <"$PID_FILE")"
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  # A stale pid file whose pid was reused by an unrelated process does not count.
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == beam.smp ]] || return 1
  echo "$pid"
}

# The pid of the beam process that carries our node name, wherever it was started from: a node left
# over from an earlier run whose folder is gone, a test run killed hard, or a node still booting that
# has not written its pid file yet. The name is not on beam's command line (RabbitMQ sets it at boot),
# but it is in its environment.
beam_pid() {
  local pid
  for pid in $(pgrep -u "$RABBIT_USER" -x beam.smp 2>/dev/null); do
    if [[ $(beam_env "$pid" RABBITMQ_NODENAME) == "$NODE" ]]; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# beam_env PID VAR: a variable from the environment the process was started with.
beam_env() {
  as_root cat "/proc/$1/environ" 2>/dev/null | tr '\0' '\n' | sed -n "s/^$2=//p" | head -n1
}

# A beam process with our node name that we may stop: it was started from our folder, its folder is
# gone, or the process that owned it (IFW_RABBIT_OWNER_PID, set by scripts/test.sh) has exited.
# A node that another live test run or another checkout uses is left alone.
reclaimable_pid() {
  local pid base owner
  pid="$(beam_pid)" || return 1
  base="$(beam_env "$pid" RABBITMQ_MNESIA_BASE)"
  if [[ $base == "$DIR/mnesia" || ! -d $base ]]; then
    echo "$pid"
    return 0
  fi
  owner="$(as_root cat "${base%/mnesia}/owner.pid" 2>/dev/null | tr -dc 0-9)" || true
  if [[ -n $owner ]] && ! kill -0 "$owner" 2>/dev/null; then
    echo "$pid"
    return 0
  fi
  return 1
}

log_tail() {
  local f
  for f in "$DIR/log/startup.log" "$DIR/log/$NODE.log"; do
    [[ -s $f ]] || continue
    echo "---- last lines of $f ----" >&2
    as_root tail -n 40 "$f" >&2 || true
  done
}

write_config() {
  as_root mkdir -p "$DIR/mnesia" "$DIR/log" "$HOME_DIR"
  local tmp
  tmp="$(mktemp)"
  {
    echo "# Generated by scripts/rabbitmq.sh; rewritten on every start."
    echo "listeners.tcp.default = 127.0.0.1:$PORT"
    echo "log.file.level = info"
    echo "log.console = false"
    if [[ ,$PLUGINS, == *,rabbitmq_management,* ]]; then
      echo "management.tcp.ip = 127.0.0.1"
      echo "management.tcp.port = $MGMT_PORT"
    fi
    if [[ ,$PLUGINS, == *,rabbitmq_prometheus,* ]]; then
      echo "prometheus.tcp.ip = 127.0.0.1"
    fi
    if [[ -n ${IFW_RABBIT_EXTRA_CONF:-} ]]; then
      printf '%s\n' "$IFW_RABBIT_EXTRA_CONF"
    fi
  } >"$tmp"
  as_root cp "$tmp" "$DIR/rabbitmq.conf"
  if [[ -n $PLUGINS ]]; then
    echo "[${PLUGINS}]." >"$tmp"
  else
    echo "[]." >"$tmp"
  fi
  as_root cp "$tmp" "$DIR/enabled_plugins"
  : >"$tmp"
  as_root cp "$tmp" "$DIR/rabbitmq-env.conf"
  rm -f "$tmp"
  as_root chown -R "$RABBIT_USER:$RABBIT_USER" "$DIR" "$HOME_DIR"
  as_root chmod 0750 "$HOME_DIR"
  as_rabbit test -w "$DIR/mnesia" ||
    die "user $RABBIT_USER cannot write $DIR (a parent folder is not searchable by it?); set IFW_RABBIT_DIR to a folder under /tmp"
}

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT)) gone_since=""
  while ((SECONDS < deadline)); do
    if port_answers "$PORT"; then
      # The AMQP listener opens near the end of the boot; await_startup confirms the boot finished.
      if ctl -q await_startup --timeout "$((deadline - SECONDS > 5 ? deadline - SECONDS : 5))" >/dev/null 2>&1; then
        return 0
      fi
    fi
    if [[ ${1:-} == --starting ]] && ! node_pid >/dev/null && ! beam_pid >/dev/null; then
      # No node holds our name. Right after `rabbitmq-server -detached` returns, the detached
      # boot can spend seconds in shell scripts before beam starts (long on a loaded machine), so
      # only give up when that lasts.
      gone_since=${gone_since:-$SECONDS}
      if ((SECONDS - gone_since >= 15)); then
        say "the node exited during start"
        return 1
      fi
    else
      gone_since=""
    fi
    sleep 0.2
  done
  say "timed out after ${TIMEOUT}s waiting for $NODE on 127.0.0.1:$PORT"
  return 1
}

do_stop() {
  local pid stopped=0
  pid="$(node_pid || reclaimable_pid || true)"
  if [[ -z $pid ]]; then
    port_answers "$PORT" && say "note: something else answers on 127.0.0.1:$PORT; not ours, left alone"
    stop_epmd_if_ours
    return 0
  fi
  # A node frozen by kill -STOP cannot answer rabbitmqctl; resume it first.
  kill -CONT "$pid" 2>/dev/null || as_root kill -CONT "$pid" 2>/dev/null || true
  if timeout 30 "$0" ctl -q stop >/dev/null 2>&1; then
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || { stopped=1; break; }
      sleep 0.1
    done
  fi
  if ((stopped == 0)) && kill -0 "$pid" 2>/dev/null; then
    say "rabbitmqctl stop did not end pid $pid; sending TERM"
    as_root kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "sending KILL to pid $pid"
      as_root kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    fi
  fi
  as_root rm -f "$PID_FILE"
  stop_epmd_if_ours
  say "stopped $NODE"
}

# Kill epmd only if this script started it and no Erlang node is registered with it any more.
stop_epmd_if_ours() {
  if [[ -f $DIR/epmd.ours ]] && ! epmd -names 2>/dev/null | grep -q '^name '; then
    epmd -kill >/dev/null 2>&1 || true
    as_root rm -f "$DIR/epmd.ours"
  fi
}

do_start() {
  command -v "$RABBIT_BIN/rabbitmq-server" >/dev/null 2>&1 || [[ -x $RABBIT_BIN/rabbitmq-server ]] ||
    die "rabbitmq-server is not installed; run scripts/deps.sh"
  local t0=$SECONDS
  local other pid
  if pid="$(node_pid)" && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != T ]] && port_answers "$PORT"; then
    say "$NODE is already running from this folder (pid $pid): amqp://guest:guest@127.0.0.1:$PORT/%2F"
    return 0
  fi
  if node_pid >/dev/null || reclaimable_pid >/dev/null; then
    say "stopping a node left over from an earlier run"
    do_stop
  fi
  if other="$(beam_pid)"; then
    say "$NODE is in use by a live node (pid $other, folder $(beam_env "$other" RABBITMQ_MNESIA_BASE)); choose another IFW_AMQP_PORT"
    exit 98
  fi
  if port_answers "$PORT" || port_answers "$DIST_PORT"; then
    say "127.0.0.1:$PORT or its distribution port $DIST_PORT is in use by another program; choose another IFW_AMQP_PORT"
    exit 98
  fi
  write_config
  echo "$PORT" | as_root tee "$DIR/port" >/dev/null
  if [[ -n ${IFW_RABBIT_OWNER_PID:-} ]]; then
    echo "$IFW_RABBIT_OWNER_PID" | as_root tee "$DIR/owner.pid" >/dev/null
  else
    as_root rm -f "$DIR/owner.pid"
  fi
  if ! epmd -names >/dev/null 2>&1; then
    as_rabbit epmd -daemon
    as_root touch "$DIR/epmd.ours"
  fi
  say "starting $NODE on 127.0.0.1:$PORT (folder $DIR)"
  # shellcheck disable=SC2016 # expanded by the inner sh
  as_rabbit sh -c 'exec "$0" -detached >"$1" 2>&1 </dev/null' "$RABBIT_BIN/rabbitmq-server" "$DIR/log/startup.log" ||
    { log_tail; die "rabbitmq-server -detached failed"; }
  if ! wait_ready --starting; then
    log_tail
    do_stop >/dev/null 2>&1 || true
    die "RabbitMQ did not start"
  fi
  say "ready after $((SECONDS - t0))s: amqp://guest:guest@127.0.0.1:$PORT/%2F"
}

do_status() {
  local pid
  if pid="$(node_pid)" && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == T ]]; then
    echo "frozen (stopped by a signal): $NODE pid $pid; resume with: $0 thaw"
    return 3
  fi
  if pid="$(node_pid)" && port_answers "$PORT"; then
    echo "running: $NODE pid $pid amqp://127.0.0.1:$PORT folder $DIR"
    return 0
  fi
  if pid="$(node_pid)"; then
    echo "starting, frozen or failing: $NODE pid $pid (port $PORT does not answer) folder $DIR"
    return 3
  fi
  echo "not running: $NODE (folder $DIR)"
  return 3
}

# ---- the three-node cluster ----

cluster_ports() { echo "$PORT" $((PORT + 1)) $((PORT + 2)); }

# on_node N ARGS: this script's single-node command ARGS on node N of the cluster.
on_node() {
  local n=$1 p
  shift
  [[ $n == [123] ]] || die "node must be 1, 2 or 3, got '$n'"
  p=$((PORT + n - 1))
  IFW_AMQP_PORT=$p IFW_RABBIT_DIR="$DIR/node-$p" IFW_RABBIT_HOME="$DIR/home" "$0" "$@"
}

cluster_urls() {
  local p urls=()
  for p in $(cluster_ports); do urls+=("amqp://guest:guest@127.0.0.1:$p/%2F"); done
  (IFS=,; echo "${urls[*]}")
}

cluster_stop() {
  local n pids=()
  for n in 1 2 3; do
    [[ -d $DIR/node-$((PORT + n - 1)) ]] || continue
    on_node "$n" stop >/dev/null 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  stop_epmd_if_ours
  say "stopped the cluster on ports $(cluster_ports)"
}

cluster_start() {
  local t0=$SECONDS n rc pids=() failed=0 taken=0 first="ifw-$PORT@localhost"
  ((PORT + 2 < 45536)) || die "IFW_AMQP_PORT must leave room for three nodes"
  echo "$PORT" | as_root tee "$DIR/port" >/dev/null
  as_root mkdir -p "$DIR/home"
  as_root chown "$RABBIT_USER:$RABBIT_USER" "$DIR/home"
  as_root chmod 0750 "$DIR/home"
  # One epmd for the three nodes, started before they boot in parallel.
  if ! epmd -names >/dev/null 2>&1; then
    as_rabbit epmd -daemon
    as_root touch "$DIR/epmd.ours"
  fi
  for n in 1 2 3; do
    on_node "$n" start &
    pids+=($!)
  done
  for n in 0 1 2; do
    rc=0
    wait "${pids[$n]}" || rc=$?
    ((rc == 0)) || failed=1
    ((rc == 98)) && taken=1
  done
  if ((failed)); then
    cluster_stop
    ((taken)) && exit 98
    die "a cluster node did not start"
  fi
  # Fresh nodes: join the 2nd and 3rd to the 1st (stop_app, join_cluster, start_app; start_app returns
  # once the node has booted). One rabbitmqctl call costs 1-2 s on a quiet machine (an Erlang VM
  # starts each time), 30 s under a parallel Swift build.
  for n in 2 3; do
    on_node "$n" ctl -q stop_app >/dev/null &&
      on_node "$n" ctl -q join_cluster "$first" >/dev/null &&
      on_node "$n" ctl -q start_app >/dev/null ||
      { cluster_stop; die "node $n did not join $first"; }
  done
  local running
  running="$(on_node 1 ctl -q eval 'length(rabbit_nodes:all_running()).' 2>/dev/null | tr -dc 0-9)"
  [[ $running == 3 ]] || { cluster_stop; die "the cluster has ${running:-?} running nodes, not 3"; }
  say "cluster ready after $((SECONDS - t0))s: $(cluster_urls)"
  cluster_urls
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  cluster)
    sub="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$sub" in
      start) cluster_start ;;
      stop) cluster_stop ;;
      destroy) cluster_stop; as_root rm -rf "$DIR" ;;
      urls) cluster_urls ;;
      *) die "usage: $0 cluster start|stop|destroy|urls" ;;
    esac
    ;;
  node)
    [[ $# -ge 2 ]] || die "usage: $0 node N COMMAND [ARGS]"
    on_node "$@"
    ;;
  kill9)
    pid="$(node_pid)" || die "$NODE is not running"
    as_root kill -KILL "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    as_root rm -f "$PID_FILE"
    ;;
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  wait)
    TIMEOUT="${1:-$TIMEOUT}"
    wait_ready || exit 1
    ;;
  ctl) ctl "$@" ;;
  pid) node_pid || die "$NODE is not running" ;;
  freeze | thaw)
    pid="$(node_pid)" || die "$NODE is not running"
    if [[ $cmd == freeze ]]; then as_root kill -STOP "$pid"; else as_root kill -CONT "$pid"; fi
    ;;
  destroy)
    do_stop
    as_root rm -rf "$DIR"
    ;;
  *)
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
    ;;
esac
