#!/usr/bin/env bash
# End-to-end benchmarks of the worker (issues 2 and 6). Repeatable: same job, same origin, same
# images for every run; only the machine's load differs, and each run records it.
#
#   scripts/bench.sh                      png32 and slow256 (issue 2's (a) and (b))
#   scripts/bench.sh png32 slow1024 …     the named scenarios, in that order
#   scripts/bench.sh all                  png32 floor32 python32 slow256 slow1024 floor1024 jpeg16
#                                         floor16 png32-files (not soak: it is long)
#   scripts/bench.sh png32 floor32 png32 floor32   the worker and the C floor, alternating
#   scripts/bench.sh soak:200000          a scenario with another job count (NAME:JOBS)
#   scripts/bench.sh internet-all         the internet scenario's five runs (issue 31): internet
#                                         internet-python internet-img2dataset internet512 internet512-python
#   scripts/bench.sh --list               the scenario names
#   make bench ARGS="png32 soak"          the same through make
#
# Scenarios (see Sources/image-fetch-bench/Scenario.swift):
#   png32     12 KB PNG from nginx, concurrency 32, 100,000 jobs   msgs/s, CPU µs/msg, peak RSS
#   floor32   png32's job done by the C floor of issue 6 (Benchmarks/Floor/floor.c: one thread,
#             rabbitmq-c and libcurl), to read png32 against on the same machine in the same minutes
#   python32  png32's job done by the Python peer (Benchmarks/python-peer: aio-pika and aiohttp in
#             a venv under .run/ that this script makes), the worker a user would otherwise write
#   png32-files  the same with a new file per job (each job its own storage key), 60,000 jobs
#   png32-decode  png32 with image.verify=decode (libvips decodes every body), 60,000 jobs
#   jpeg16-decode jpeg16 with image.verify=decode, 3,000 jobs
#   slow256   100 ms origin, concurrency 256, 30,000 jobs         efficiency = rate ÷ 2,560/s
#   slow1024  100 ms origin, concurrency 1,024, 80,000 jobs       msgs/s, peak RSS, threads
#   floor1024 slow1024's job done by the C floor: what rabbitmq-c, libcurl and the bodies need at
#             concurrency 1,024 without the worker, to read slow1024's rate and peak RSS against
#   jpeg16    3 MB JPEG from nginx, concurrency 16, 6,000 jobs    rate ÷ the origin's own rate (wrk)
#   floor16   jpeg16's job done by the C floor: how close to nginx alone a worker that hashes and
#             stores each 3 MB image can get on these cores
#   mixed     3,000 jobs for nginx alone, then again beside 300 (one in eleven) for a 2 s origin on
#             127.0.0.2; concurrency 32: the fast origin's share of its rate alone, jobs ok (issue 17)
#   capacity  600 jobs for an origin on 127.0.0.3 that serves 8 at once and answers 429 with
#             Retry-After: 1 beyond; concurrency 64: refused requests per image, capacity used
#             (BENCH_WORKER=old/image-fetch-worker runs both against a build without the scheduler)
#   capacity4, capacity12  capacity's origin and jobs with 4 or 12 workers of concurrency 64 on the
#             one queue (/metrics on BENCH_METRICS_PORT + i): what a fleet costs the origin (issue 35)
#   soak      1,000,000 PNG jobs, concurrency 32; RSS sampled each second: flat or not
#   internet  100 HTTPS origins (oNNN.bench.test on 127.0.1.N, nginx, TLS 1.3, HTTP/2 by ALPN, a CA
#             of the run), each 20–80 ms away (50 ms on average), Zipf popularity (the busiest 24 %
#             of the jobs, the top five 51 %), 400 images of 20–400 KB, 1.5 % 404s, 1 % HTML pages,
#             0.5 % cut JPEGs, every job its own URL; concurrency 64, 20,000 jobs: messages/s against
#             Little's law (64 ÷ the jobs' mean delay), CPU per job, deferrals, outcomes, the mean
#             fetch against a permit's hold, and from the origins' access log the connections, TLS
#             resumptions, HTTP versions and the origin's own time a request (issue 31;
#             scripts/bench-internet/ and docs/benchmarks.md, "The internet-like scenario")
#   internet-python     the same jobs through the Python peer, concurrency 64
#   internet-img2dataset  the first 5,000 of them through img2dataset (PyPI, 2 processes × 64
#             threads, resize off, no re-encoding), in a venv under .run/
#   internet512, internet512-python   internet and internet-python at concurrency 512
#
# What it does: installs what is missing (scripts/deps.sh, plus wrk and cjpeg for the benchmark
# only), builds the release binaries as the Dockerfile does (scripts/release-build.sh: the worker
# and the driver image-fetch-bench), starts a RabbitMQ node of
# its own (port BENCH_AMQP_PORT, data in a temporary folder) and an nginx origin on 127.0.0.1
# (generated nginx.conf, one worker process), writes the images (a real 12 KB PNG, and a 3 MB JPEG
# made by cjpeg from seeded noise), and runs the driver once per scenario. The driver publishes all
# the jobs with confirms before it starts the worker, runs the 100 ms origin itself (SwiftNIO, one
# thread), consumes the results, lets the first 5 % of the jobs warm up uncounted, then measures
# from the warm-up's last result to the run's last result: messages/s, the worker's CPU (user+sys of
# the whole process from /proc/PID/stat) per message, peak RSS (VmHWM), the most threads seen
# (sampled every 100 ms), delivery→ack p50/p99 from the worker's /metrics histogram (the counted
# window only), admission→result p50/p99 from the results' duration_ms, and the broker's and
# origin's CPU. Every run ends with SIGTERM and checks that every job gave exactly one ok result and
# the worker exited 0. Everything is stopped and the temporary folder removed on exit (also on
# Ctrl-C).
#
# Output: per scenario a block of figures, then a summary table (figure, value, target, met), and
# docs/benchmark-runs.md gets each scenario's section replaced (between its <!-- bench:NAME -->
# markers); docs/benchmarks.md, which explains the figures, quotes them by hand.
#
# The internet scenarios add names to /etc/hosts for the run (between marker lines, removed on exit,
# also on Ctrl-C), because the Python peer and img2dataset resolve through the system; the worker
# does too, unless BENCH_INTERNET_RESOLVE=pinned (then fetch.resolve pins the names). The images are
# made once into .run/bench-internet (Pillow in .run/bench-internet-venv); every contender trusts
# the run's CA (fetch.tls.ca_file, FETCH_TLS_CA_FILE for the worker and the peer, SSL_CERT_FILE for
# img2dataset).
#
# Environment:
#   BENCH_AMQP_PORT     RabbitMQ port, default 5699 (127.0.0.1; the node is ifw-PORT, its own)
#   BENCH_HTTP_PORT     nginx port, default 18080
#   BENCH_METRICS_PORT  the worker's /metrics port, default 19690
#   BENCH_JOBS          job count for every scenario named without :JOBS
#   BENCH_RESULTS       during (default): the driver consumes the results while the worker runs, as a
#                       downstream consumer would; after: it only polls the results queue's depth during
#                       the run (every 20 ms) and reads the results once the worker stopped, so the
#                       broker does less work on the shared cores inside the counted window
#   BENCH_NO_BUILD=1    use the existing release build
#   BENCH_WORKER=PATH   run this worker binary instead of the release build's (to compare two builds)
#   BENCH_NO_DOCS=1     do not touch docs/benchmark-runs.md
#   BENCH_KEEP=1        keep the temporary folder (worker logs, nginx.conf) and print its path
#   BENCH_REPEAT=N      run each scenario N times; report the median run by messages/s, and list every
#                       run's messages/s and CPU per message (this machine's speed varies between runs)
#   BENCH_INTERNET_PORT the internet origins' port, default 443 (on 127.0.1.1–127.0.1.100)
#   BENCH_INTERNET_RESOLVE  system (default) or pinned: how the worker resolves the origins' names
#   BENCH_WRAP="CMD …"  run the worker (or the C floor) under this command, e.g. valgrind; what
#                       scripts/callgrind.sh uses to count instructions per message
#   BENCH_OTLP=1        tracing on: starts scripts/otlp-sink.py on 127.0.0.1:BENCH_OTLP_PORT (default
#                       14318), a stand-in collector that answers 200 and counts requests, bytes and
#                       spans, and gives the worker OTEL_EXPORTER_OTLP_ENDPOINT; each scenario then
#                       adds a row "OTLP sink" with what arrived during its runs
#
# The machine's other load shows in the figures: each section records the load average at the start
# and end and how busy the machine was during the counted window. Compare runs on a quiet machine.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$PWD"
AMQP_PORT="${BENCH_AMQP_PORT:-5699}"
HTTP_PORT="${BENCH_HTTP_PORT:-18080}"
METRICS_PORT="${BENCH_METRICS_PORT:-19690}"
say() { echo "bench.sh: $*" >&2; }
die() { say "$*"; exit 1; }

usage() { awk 'NR > 1 && /^# What it does/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

all_names=(png32 floor32 python32 png32-files png32-decode jpeg16-decode slow256 slow1024 floor1024 jpeg16 floor16 mixed capacity capacity4 capacity12 soak
  internet internet-python internet-img2dataset internet512 internet512-python)
requested=()
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --list)
      for n in "${all_names[@]}"; do echo "$n"; done
      exit 0
      ;;
    all) requested+=(png32 floor32 python32 slow256 slow1024 floor1024 jpeg16 floor16 png32-files) ;; # png32-files last: its writeback slows what follows
    internet-all) requested+=(internet internet-python internet-img2dataset internet512 internet512-python) ;;
    *)
      name="${arg%%:*}"
      [[ " ${all_names[*]} " == *" $name "* ]] || die "unknown scenario '$name' (known: ${all_names[*]}, all)"
      if [[ $arg == *:* ]]; then
        jobs="${arg#*:}"
        [[ $jobs =~ ^[0-9]+$ ]] || die "'$arg': the job count after ':' must be a number"
      fi
      requested+=("$arg")
      ;;
  esac
done
((${#requested[@]} > 0)) || requested=(png32 slow256)
COMMAND="scripts/bench.sh${*:+ $*}"
[[ -n ${BENCH_JOBS:-} ]] && COMMAND="BENCH_JOBS=$BENCH_JOBS $COMMAND"
RESULTS_MODE="${BENCH_RESULTS:-during}"
[[ $RESULTS_MODE == during || $RESULTS_MODE == after ]] || die "BENCH_RESULTS must be during or after, got '$RESULTS_MODE'"
[[ -n ${BENCH_RESULTS:-} ]] && COMMAND="BENCH_RESULTS=$BENCH_RESULTS $COMMAND"

# --- Dependencies -------------------------------------------------------------------------------
# The Swift driver leaves an empty TemporaryDirectory.* in TMPDIR at every call (about six a run
# here): its calls get a folder of their own, removed on exit.
SWIFT_TMP="$(mktemp -d "${TMPDIR:-/tmp}/ifw-bench-swift.XXXXXX")"
trap 'rm -rf "$SWIFT_TMP"' EXIT
swift() { TMPDIR="$SWIFT_TMP" command swift "$@"; }

TMPDIR="$SWIFT_TMP" scripts/deps.sh
# The benchmark's own tools, not needed to build or test: wrk (the JPEG origin's own rate), cjpeg
# (libjpeg-turbo-progs, to make the 3 MB JPEG) and OpenSSL's headers (the C floor's SHA-256).
# Without them jpeg16 falls back to curl, or is skipped, and floor32 is skipped.
bench_packages=()
command -v wrk >/dev/null 2>&1 || bench_packages+=(wrk)
command -v cjpeg >/dev/null 2>&1 || bench_packages+=(libjpeg-turbo-progs)
[[ -f /usr/include/openssl/sha.h ]] || bench_packages+=(libssl-dev)
if ((${#bench_packages[@]} > 0)); then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
  say "installing ${bench_packages[*]} (benchmark tools only)"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${bench_packages[@]}" >/dev/null 2>&1 ||
    { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${bench_packages[@]}" >/dev/null 2>&1; } ||
    say "could not install ${bench_packages[*]}; continuing without"
fi

# 1,024 connections to the origin plus the broker's and the results' sockets.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# --- Build --------------------------------------------------------------------------------------
if [[ -z ${BENCH_NO_BUILD:-} ]]; then
  say "building the release binaries (scripts/release-build.sh)"
  TMPDIR="$SWIFT_TMP" scripts/release-build.sh
fi
BIN="$(swift build -c release --show-bin-path)"
[[ -x $BIN/image-fetch-worker && -x $BIN/image-fetch-bench ]] || die "no release build in $BIN"

# --- Temporary folder, and cleanup of everything this script starts ------------------------------
WORK="$(mktemp -d /tmp/ifw-bench.XXXXXX)"
chmod 0755 "$WORK" # the rabbitmq user and nginx's worker (nobody) must reach their folders
NGINX_PID_FILE="$WORK/nginx/nginx.pid"
rabbit() { IFW_AMQP_PORT="$AMQP_PORT" IFW_RABBIT_DIR="$WORK/rabbitmq" scripts/rabbitmq.sh "$@"; }
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -s $NGINX_PID_FILE ]]; then
    kill -QUIT "$(cat "$NGINX_PID_FILE")" 2>/dev/null || true
  fi
  # A worker (or yardstick) whose driver was interrupted: it runs in a process group of its own.
  if [[ -s $WORK/contender.pid ]]; then
    local contender
    contender="$(cat "$WORK/contender.pid")"
    kill -TERM "$contender" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$contender" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$contender" 2>/dev/null || true
  fi
  [[ $(type -t internet_stop) == function ]] && internet_stop
  [[ -s $WORK/otlp-sink.pid ]] && kill "$(cat "$WORK/otlp-sink.pid")" 2>/dev/null
  if [[ -d $WORK/rabbitmq ]]; then
    rabbit stop >/dev/null 2>&1 || true
  fi
  rm -rf "$SWIFT_TMP"
  if [[ -n ${BENCH_KEEP:-} ]]; then
    say "kept $WORK"
  else
    rm -rf "$WORK" 2>/dev/null || { [[ $(id -u) -eq 0 ]] || sudo -n rm -rf "$WORK"; } 2>/dev/null || true
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Images -------------------------------------------------------------------------------------
"$BIN/image-fetch-bench" images "$WORK/www"
if command -v cjpeg >/dev/null 2>&1; then
  cjpeg -quality 92 "$WORK/www/noise.ppm" >"$WORK/www/bench.jpg"
fi
rm -f "$WORK/www/noise.ppm"
chmod -R a+rX "$WORK/www"

# --- nginx origin -------------------------------------------------------------------------------
mkdir -p "$WORK/nginx/tmp"
cat >"$WORK/nginx/nginx.conf" <<EOF
# Generated by scripts/bench.sh.
worker_processes 1;
pid $NGINX_PID_FILE;
error_log $WORK/nginx/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    open_file_cache max=16 inactive=300s;
    types { image/png png; image/jpeg jpg; }
    default_type application/octet-stream;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$HTTP_PORT backlog=4096;
        root $WORK/www;
    }
}
EOF
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" ||
  die "nginx did not start (port $HTTP_PORT taken? set BENCH_HTTP_PORT)"
for _ in $(seq 1 50); do [[ -s $NGINX_PID_FILE ]] && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_PORT/bench.png" || die "nginx does not serve the PNG"
nginx_pids="$(cat "$NGINX_PID_FILE")"
for p in $(pgrep -P "$(cat "$NGINX_PID_FILE")" || true); do nginx_pids+=",$p"; done

# --- OTLP sink (BENCH_OTLP=1) ------------------------------------------------------------------------
OTLP_STATS=""
if [[ -n ${BENCH_OTLP:-} ]]; then
  OTLP_PORT="${BENCH_OTLP_PORT:-14318}"
  python3 scripts/otlp-sink.py "$OTLP_PORT" &
  echo $! >"$WORK/otlp-sink.pid"
  OTLP_STATS="http://127.0.0.1:$OTLP_PORT/stats"
  for _ in $(seq 1 50); do curl -fsS -o /dev/null "$OTLP_STATS" 2>/dev/null && break; sleep 0.1; done
  curl -fsS -o /dev/null "$OTLP_STATS" || die "the OTLP sink did not start (port $OTLP_PORT taken? set BENCH_OTLP_PORT)"
  export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_PORT"
  COMMAND="BENCH_OTLP=1 $COMMAND"
fi
otlp_row() { # scenario, the sink's counts before its runs
  [[ -n $OTLP_STATS ]] || return 0
  curl -fsS "$OTLP_STATS" | python3 -c 'import json, sys
a, b = json.loads(sys.argv[2]), json.loads(sys.stdin.read())
d = {k: b[k] - a[k] for k in b}
print("%s\tOTLP sink\t%d spans in %d requests, %d bytes, %d rejected\t—\t—"
      % (sys.argv[1], d["spans"], d["requests"], d["bytes"], d["rejected"]))' "$1" "$2" >>"$ROWS" ||
    say "could not read the OTLP sink's counts"
}

# --- RabbitMQ -----------------------------------------------------------------------------------
rabbit start
rabbit_pid="$(rabbit pid)"
AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2F"

# --- The internet scenarios' origins (scripts/bench-internet/origins.sh) ---------------------------
# One job list for all of them: as long as the longest run asks (job i is the same in every list).
internet_jobs=0
for spec in "${requested[@]}"; do
  name="${spec%%:*}"
  [[ $name == internet* ]] || continue
  n=20000
  [[ $name == internet-img2dataset ]] && n=5000
  [[ -n ${BENCH_JOBS:-} ]] && n=$BENCH_JOBS
  [[ $spec == *:* ]] && n="${spec#*:}"
  ((n > internet_jobs)) && internet_jobs=$n
done
if ((internet_jobs > 0)); then
  # shellcheck source=scripts/bench-internet/origins.sh
  source scripts/bench-internet/origins.sh
  internet_start "$WORK/internet" "$internet_jobs"
fi

# --- What this run is made of --------------------------------------------------------------------
cores="$(nproc)"
v_swift="$(swift --version 2>&1 | grep -m1 -o 'Swift version [^ ]*' || echo '?')"
v_rabbit="RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?'), Erlang $(dpkg-query -W -f='${Version}' erlang-base 2>/dev/null || echo '?')"
v_amqp="rabbitmq-c $(pkg-config --modversion librabbitmq 2>/dev/null || echo '?')"
v_curl="libcurl $(pkg-config --modversion libcurl 2>/dev/null || echo '?')"
v_nginx="$("$NGINX" -v 2>&1 | sed 's/^nginx version: //')"
v_wrk="wrk: none"
command -v wrk >/dev/null && v_wrk="$({ wrk -v 2>&1 || true; } | grep -m1 -o 'wrk [^ ]*' || echo 'wrk ?')"
VERSIONS="$v_swift; $v_rabbit; $v_amqp; $v_curl; $v_nginx; $v_wrk; $(uname -sr)"
echo "machine: $cores cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: $VERSIONS"
echo "origin: http://127.0.0.1:$HTTP_PORT/bench.png ($(stat -c %s "$WORK/www/bench.png") bytes)$([[ -f $WORK/www/bench.jpg ]] && echo ", /bench.jpg ($(stat -c %s "$WORK/www/bench.jpg") bytes)"); broker $AMQP_URL"

# The JPEG origin's own throughput at concurrency 16, measured alone (before the worker runs).
if command -v wrk >/dev/null 2>&1; then
  ORIGIN_TOOL="wrk -t1 -c16 -d5s"
else
  ORIGIN_TOOL="curl --parallel-max 16, 800 requests"
fi
origin_rate() {
  local url="http://127.0.0.1:$HTTP_PORT/bench.jpg"
  if command -v wrk >/dev/null 2>&1; then
    wrk -t 1 -c 16 -d 5s "$url" 2>/dev/null | awk '/^Requests\/sec:/ {print $2}'
  else
    local n=800 t0 t1
    t0="$(date +%s.%N)"
    yes "url = \"$url\"
output = \"/dev/null\"" | head -n $((2 * n)) | curl -s --parallel --parallel-max 16 -K - || true
    t1="$(date +%s.%N)"
    awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f\n", n / (b - a)}'
  fi
}

# --- Scenarios ----------------------------------------------------------------------------------
ROWS="$WORK/rows.tsv"
: >"$ROWS"
REPEAT="${BENCH_REPEAT:-1}"
# The first number in each value of figure $2 in the rows file $1, without thousands separators
# ("7,044" -> 7044); only scenario $3's rows if given; only the first value if $4 is set.
numbers() {
  awk -F'\t' -v f="$2" -v s="${3:-}" -v first="${4:-}" '$2 == f && (s == "" || $1 == s) && match($3, /[0-9][0-9,]*(\.[0-9]+)?/) {
    v = substr($3, RSTART, RLENGTH); gsub(/,/, "", v); print v; if (first != "") exit }' "$1"
}
figure() { numbers "$1" "$2" "" first; }
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT must be a positive number, not '$REPEAT'"
failed=()
ran=()
for spec in "${requested[@]}"; do
  name="${spec%%:*}"
  jobs_args=()
  if [[ $spec == *:* ]]; then
    jobs_args=(--jobs "${spec#*:}")
  elif [[ -n ${BENCH_JOBS:-} ]]; then
    jobs_args=(--jobs "$BENCH_JOBS")
  fi
  extra=()
  watch_nginx="$nginx_pids"
  worker="${BENCH_WORKER:-$BIN/image-fetch-worker}"
  if [[ $name == internet* ]]; then
    if [[ $name == internet-img2dataset ]]; then
      internet_img2dataset "$spec"
      continue
    fi
    if [[ $name == *-python && -z $INTERNET_HOSTS_OK ]]; then
      say "$name skipped: the origins' names are not in /etc/hosts"
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" skipped "no /etc/hosts entries" "—" "?" >>"$ROWS"
      continue
    fi
    watch_nginx="$INTERNET_NGINX_PIDS"
    extra=(--jobs-file "$INTERNET_DIR/jobs.tsv" --env "FETCH_TLS_CA_FILE=$INTERNET_CA")
    if [[ ${BENCH_INTERNET_RESOLVE:-system} == pinned || -z $INTERNET_HOSTS_OK ]]; then
      extra+=(--env "FETCH_RESOLVE=$INTERNET_RESOLVE")
    fi
  fi
  if [[ $name == floor* ]]; then
    # The C floor, built here (it is not part of the Swift package): cc, or the toolchain's clang.
    worker="$WORK/ifw-floor"
    if [[ ! -x $worker ]]; then
      compiler="$(command -v cc || command -v clang || true)"
      if [[ -z $compiler ]] || ! "$compiler" -O2 -o "$worker" Benchmarks/Floor/floor.c -lrabbitmq -lcurl -lcrypto; then
        say "$name skipped: cannot build Benchmarks/Floor/floor.c (needs a C compiler and libssl-dev)"
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" skipped "no C floor build" "—" "?" >>"$ROWS"
        continue
      fi
    fi
  fi
  versions="$VERSIONS"
  if [[ $name == python* || $name == *-python ]]; then
    # The Python peer: its pinned libraries from PyPI, in a venv of its own (never installed globally).
    worker="$ROOT/Benchmarks/python-peer/ifw-python-peer"
    venv="$ROOT/.run/python-peer-venv"
    if ! { [[ -x $venv/bin/python ]] || python3 -m venv "$venv"; } ||
      ! "$venv/bin/pip" install -q --disable-pip-version-check -r Benchmarks/python-peer/requirements.txt; then
      say "$name skipped: cannot make the Python peer's venv in $venv (needs python3 with venv, and PyPI)"
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" skipped "no Python peer venv" "—" "?" >>"$ROWS"
      continue
    fi
    versions+="; $("$venv/bin/python" -c 'import sys, aio_pika, aiohttp; print(f"Python {sys.version.split()[0]}, aio-pika {aio_pika.__version__}, aiohttp {aiohttp.__version__}")')"
  fi
  if [[ -n ${BENCH_WRAP:-} ]]; then
    # exec: the wrapper keeps the pid the driver watches and signals.
    printf '#!/bin/sh\nexec %s %q "$@"\n' "$BENCH_WRAP" "$worker" >"$WORK/wrapped-$name"
    chmod +x "$WORK/wrapped-$name"
    worker="$WORK/wrapped-$name"
  fi
  if [[ $name == jpeg16 || $name == floor16 ]]; then
    if [[ ! -f $WORK/www/bench.jpg ]]; then
      say "$name skipped: no cjpeg to make the JPEG (apt-get install libjpeg-turbo-progs)"
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" skipped "no cjpeg" "—" "?" >>"$ROWS"
      continue
    fi
    rate="$(origin_rate)"
    say "the origin alone serves $rate JPEGs/s at concurrency 16 ($ORIGIN_TOOL)"
    extra=(--origin-rate "$rate" --origin-tool "$ORIGIN_TOOL")
  fi
  # BENCH_REPEAT runs: each writes rows and a section of its own; the median run (by messages/s) is
  # the one reported, with every run's messages/s and CPU per message listed under it.
  runs=()
  otlp_before="$([[ -z $OTLP_STATS ]] || curl -fsS "$OTLP_STATS")"
  for ((run = 1; run <= REPEAT; run++)); do
    say "scenario $spec$( ((REPEAT > 1)) && echo ", run $run of $REPEAT") (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    [[ $name == internet* ]] && internet_before="$(internet_mark)"
    if "$BIN/image-fetch-bench" run "$name" "${jobs_args[@]}" "${extra[@]}" \
      --worker "$worker" --amqp "$AMQP_URL" \
      --fast-origin "http://127.0.0.1:$HTTP_PORT" --png "$WORK/www/bench.png" --jpeg "$WORK/www/bench.jpg" \
      --http-port "$METRICS_PORT" --work-dir "$WORK" --rows "$WORK/rows-$name-$run.tsv" \
      --markdown "$WORK/section-$name-$run.md" \
      --watch "rabbitmq=$rabbit_pid" --watch "nginx=$watch_nginx" \
      --results "$RESULTS_MODE" --command "$COMMAND" --versions "$versions"; then
      [[ $name == internet* ]] &&
        internet_origin_rows "$name" "$internet_before" "$WORK/rows-$name-$run.tsv" "$WORK/section-$name-$run.md"
      [[ -f $WORK/section-$name-$run.md ]] && runs+=("$run")
    else
      # A failed run is reported as it is (its rows and section say what went wrong).
      failed+=("$name")
      cat "$WORK/rows-$name-$run.tsv" >>"$ROWS" 2>/dev/null || true
      if [[ -f $WORK/section-$name-$run.md ]]; then
        cp "$WORK/section-$name-$run.md" "$WORK/section-$name.md"
        ran+=("$name")
      fi
      runs=()
      break
    fi
  done
  otlp_row "$name" "$otlp_before"
  ((${#runs[@]} > 0)) || continue
  median_run="$(for run in "${runs[@]}"; do echo "$(figure "$WORK/rows-$name-$run.tsv" "messages/s") $run"; done |
    sort -n | awk '{ r[NR] = $2 } END { print r[int((NR + 1) / 2)] }')"
  cat "$WORK/rows-$name-$median_run.tsv" >>"$ROWS"
  cp "$WORK/section-$name-$median_run.md" "$WORK/section-$name.md"
  if ((${#runs[@]} > 1)); then
    rates="" cpus=""
    for run in "${runs[@]}"; do
      rates+="${rates:+, }$(figure "$WORK/rows-$name-$run.tsv" "messages/s")"
      cpus+="${cpus:+, }$(figure "$WORK/rows-$name-$run.tsv" "worker CPU µs/message")"
    done
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "runs: messages/s" "$rates (median run $median_run reported)" "—" "—" >>"$ROWS"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "runs: worker CPU µs/message" "$cpus" "—" "—" >>"$ROWS"
    printf '\n%s runs of this scenario, one after the other (`BENCH_REPEAT=%s`); this section is the median run by messages/s (run %s). messages/s: %s. Worker CPU µs/message: %s.\n' \
      "${#runs[@]}" "$REPEAT" "$median_run" "$rates" "$cpus" >>"$WORK/section-$name.md"
  fi
  ran+=("$name")
done

# Each scenario against a yardstick's run of the same job, when both ran in this invocation: the
# medians of their runs, as a share of the yardstick's messages/s and, for each further figure
# named, the scenario's value against the yardstick's. The C floor's figures are what rabbitmq-c and
# libcurl doing the job in one C thread take on the same machine in the same minutes; the Python
# peer's what the usual Python libraries take.
median_of() { numbers "$ROWS" "$2" "$1" | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'; }
against() {
  local scenario=$1 other=$2 label=$3 figure mine theirs unit text
  shift 3
  mine="$(median_of "$scenario" "messages/s")" theirs="$(median_of "$other" "messages/s")"
  [[ -n $mine && -n $theirs ]] || return 0
  text="$(awk -v a="$mine" -v b="$theirs" 'BEGIN { printf "%.0f %% of its messages/s", a / b * 100 }')"
  for figure in "$@"; do
    mine="$(median_of "$scenario" "$figure")" theirs="$(median_of "$other" "$figure")"
    [[ -n $mine && -n $theirs ]] || continue
    # The unit that follows the number in the value, if any ("MB" in "45.8 MB").
    unit="$(awk -F'\t' -v f="$figure" -v s="$scenario" '$1 == s && $2 == f && match($3, /[0-9][0-9,.]* [A-Za-z]+/) {
      v = substr($3, RSTART, RLENGTH); sub(/^[0-9,.]+/, "", v); print v; exit }' "$ROWS")"
    text+="$(awk -v a="$mine" -v b="$theirs" -v f="$figure" -v u="$unit" 'BEGIN { printf "; %s %s%s against its %s%s (%.2f ×)", f, a, u, b, u, a / b }')"
  done
  printf '%s\t%s\t%s\t%s\t%s\n' "$scenario" "against $label ($other, this run)" "$text" "—" "—" >>"$ROWS"
}
against png32 floor32 "the C floor" "worker CPU µs/message"
against png32 python32 "the Python peer" "worker CPU µs/message" "peak RSS (VmHWM)"
against slow1024 floor1024 "the C floor" "peak RSS (VmHWM)" "worker CPU µs/message"
against jpeg16 floor16 "the C floor" "worker CPU µs/message"
against internet internet-python "the Python peer" "worker CPU µs/message" "broker CPU µs/message" "peak RSS (VmHWM)"
against internet512 internet512-python "the Python peer" "worker CPU µs/message" "broker CPU µs/message" "peak RSS (VmHWM)"
against internet internet-img2dataset "img2dataset"

# --- Summary ------------------------------------------------------------------------------------
echo
echo "Summary ($cores cores, load average now $(cut -d' ' -f1-3 /proc/loadavg); $v_swift)"
{
  printf 'scenario\tfigure\tvalue\ttarget\tmet\n'
  cat "$ROWS"
} | column -t -s $'\t'

# --- docs/benchmark-runs.md -----------------------------------------------------------------------
DOC="$ROOT/docs/benchmark-runs.md"
if [[ -z ${BENCH_NO_DOCS:-} && ${#ran[@]} -gt 0 ]]; then
  [[ -f $DOC ]] || printf '# Benchmark runs: the latest of each scenario\n\n<!-- bench:end -->\n' >"$DOC"
  for name in "${ran[@]}"; do
    section="$WORK/section-$name.md"
    if grep -q "^<!-- bench:$name -->\$" "$DOC"; then
      # Replace what is between the scenario's markers.
      awk -v name="$name" -v file="$section" '
        $0 == "<!-- bench:" name " -->" { print; while ((getline line < file) > 0) print line; skip = 1; next }
        $0 == "<!-- /bench:" name " -->" { skip = 0 }
        !skip { print }' "$DOC" >"$DOC.tmp"
    else
      # A new scenario goes before <!-- bench:end -->, or at the end.
      awk -v name="$name" -v file="$section" '
        function emit() { print "<!-- bench:" name " -->"; while ((getline line < file) > 0) print line; print "<!-- /bench:" name " -->"; print ""; done = 1 }
        $0 == "<!-- bench:end -->" && !done { emit() }
        { print }
        END { if (!done) emit() }' "$DOC" >"$DOC.tmp"
    fi
    mv "$DOC.tmp" "$DOC"
  done
  say "updated docs/benchmark-runs.md (${ran[*]})"
fi

if ((${#failed[@]} > 0)); then
  say "failed: ${failed[*]} (see the lines above; BENCH_KEEP=1 keeps the worker logs)"
  exit 1
fi
