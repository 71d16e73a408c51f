#!/usr/bin/env bash
# Instructions per message, counted by valgrind's callgrind: the figure that stays put on this
# noisy virtual machine, where messages/s and CPU µs/message move by a third between minutes
# (issue 6, "profile before you optimise").
#
#   scripts/callgrind.sh                  png32 (the worker)
#   scripts/callgrind.sh png32 floor32    the worker, then the C floor, on the same job
#   CALLGRIND_JOBS="1000 3000" scripts/callgrind.sh png32   quicker (the default is "2000 6000")
#
# Each scenario runs twice through scripts/bench.sh (same broker, origin, job and concurrency as the
# benchmark), with the worker under `valgrind --tool=callgrind`: once with the smaller and once with
# the larger job count of CALLGRIND_JOBS. Start-up, warm-up and shutdown cost the same in both, so
# (instructions of the larger run - instructions of the smaller) / (difference in jobs) is what one
# message costs in user space, the worker's threads together. The kernel's share (system calls,
# wake-ups, the loopback TCP work) is not counted: read it from `perf` or the benchmark's CPU
# figure. Valgrind runs the threads one at a time, so batch sizes (acks, completions) differ from a
# real run; the count moves by about 1 % between runs of the same build.
#
# Output: per scenario the instructions per message, with and without SHA-256, split by object (the
# worker, libcurl, libc, the Swift runtime, …) and by function (the 30 largest); the callgrind
# files, the per-message table of every function (SCENARIO.per-message) and the runs' logs stay in
# CALLGRIND_OUT (default: a new folder under /tmp) for callgrind_annotate or kcachegrind.
#
# The worker is run from a copy without debug information: valgrind 3.19 cannot read the DWARF 5
# that Swift 6.3 writes. Function names come from the symbol table, so nothing is lost here. A
# small preloaded library works around a valgrind 3.19 fault in sigsuspend (see
# Benchmarks/Callgrind/sigsuspend_copy.c); it needs a C compiler.
#
# Environment: CALLGRIND_JOBS (default "2000 6000"), CALLGRIND_OUT, BENCH_NO_BUILD=1 (use the
# existing release build), CALLGRIND_WORKER=PATH (count this worker binary instead, e.g. an older
# build's, through the same driver), and the BENCH_* ports of scripts/bench.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
say() { echo "callgrind.sh: $*" >&2; }
die() { say "$*"; exit 1; }

read -r SMALL LARGE <<<"${CALLGRIND_JOBS:-2000 6000}"
[[ $SMALL =~ ^[1-9][0-9]*$ && $LARGE =~ ^[1-9][0-9]*$ && $LARGE -gt $SMALL ]] ||
  die "CALLGRIND_JOBS must be two job counts, the second larger, not '${CALLGRIND_JOBS:-}'"
scenarios=("$@")
((${#scenarios[@]} > 0)) || scenarios=(png32)

if ! command -v valgrind >/dev/null 2>&1; then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
  say "installing valgrind"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null 2>&1 ||
    { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null 2>&1; } ||
    die "valgrind is missing and could not be installed"
fi

# The Swift driver leaves an empty TemporaryDirectory.* in TMPDIR at every call: its calls get a
# folder of their own, removed on exit (scripts/bench.sh does the same for its own).
SWIFT_TMP="$(mktemp -d "${TMPDIR:-/tmp}/ifw-callgrind-swift.XXXXXX")"
trap 'rm -rf "$SWIFT_TMP"' EXIT

if [[ -z ${BENCH_NO_BUILD:-} ]]; then
  TMPDIR="$SWIFT_TMP" scripts/deps.sh
  say "building the release binaries (scripts/release-build.sh)"
  TMPDIR="$SWIFT_TMP" scripts/release-build.sh
fi
BIN="$(TMPDIR="$SWIFT_TMP" swift build -c release --show-bin-path)"
WORKER="${CALLGRIND_WORKER:-$BIN/image-fetch-worker}"
[[ -x $WORKER ]] || die "no worker binary at $WORKER"

OUT="${CALLGRIND_OUT:-$(mktemp -d /tmp/ifw-callgrind.XXXXXX)}"
mkdir -p "$OUT"
objcopy --strip-debug "$WORKER" "$OUT/image-fetch-worker" 2>/dev/null ||
  { cp "$WORKER" "$OUT/image-fetch-worker" && strip --strip-debug "$OUT/image-fetch-worker"; } ||
  die "cannot make a copy of the worker without debug information (objcopy or strip, from binutils)"

# valgrind 3.19 faults on the read-only mask libdispatch's main thread hands to sigsuspend; the
# preloaded shim hands it a copy (Benchmarks/Callgrind/sigsuspend_copy.c says why).
compiler="$(command -v cc || command -v clang || true)"
[[ -n $compiler ]] && "$compiler" -O2 -shared -fPIC -o "$OUT/sigsuspend_copy.so" Benchmarks/Callgrind/sigsuspend_copy.c -ldl ||
  die "cannot build Benchmarks/Callgrind/sigsuspend_copy.c (needs a C compiler)"

# The total instructions of one callgrind file.
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
# "instructions<TAB>function<TAB>object" for every function of one callgrind file (self cost).
functions() {
  callgrind_annotate --threshold=100 --inclusive=no "$1" 2>/dev/null |
    awk 'match($0, /^ *[0-9][0-9,]* /) {
      n = substr($0, RSTART, RLENGTH); gsub(/[ ,]/, "", n)
      rest = substr($0, RSTART + RLENGTH); sub(/^\([ 0-9.]+%\) +/, "", rest)
      obj = "?"; if (match(rest, / \[[^]]*\]$/)) { obj = substr(rest, RSTART + 2, RLENGTH - 3); rest = substr(rest, 1, RSTART - 1) }
      sub(/^[^:]*:/, "", rest); n1 = split(obj, parts, "/"); print n "\t" rest "\t" parts[n1] }'
}

for scenario in "${scenarios[@]}"; do
  [[ $scenario != *:* ]] || die "give scenario names without a job count (CALLGRIND_JOBS sets them): $scenario"
  worker=()
  [[ $scenario == floor* ]] || worker=(BENCH_WORKER="$OUT/image-fetch-worker")
  for jobs in "$SMALL" "$LARGE"; do
    rm -f "$OUT/$scenario-$jobs".*
    say "$scenario, $jobs jobs, under callgrind"
    env "${worker[@]}" BENCH_NO_BUILD=1 BENCH_NO_DOCS=1 \
      BENCH_WRAP="env LD_PRELOAD=$OUT/sigsuspend_copy.so valgrind --tool=callgrind --dump-instr=no --callgrind-out-file=$OUT/$scenario-$jobs.%p" \
      scripts/bench.sh "$scenario:$jobs" >"$OUT/$scenario-$jobs.log" 2>&1 ||
      die "the $scenario run with $jobs jobs failed; see $OUT/$scenario-$jobs.log"
    files=("$OUT/$scenario-$jobs".[0-9]*)
    [[ -f ${files[0]} ]] || die "callgrind wrote no file for $scenario ($jobs jobs)"
    mv "${files[0]}" "$OUT/$scenario-$jobs.callgrind"
    functions "$OUT/$scenario-$jobs.callgrind" >"$OUT/$scenario-$jobs.functions"
  done
  a="$(total "$OUT/$scenario-$SMALL.callgrind")" b="$(total "$OUT/$scenario-$LARGE.callgrind")"
  n=$((LARGE - SMALL))
  # Per function: "instructions per message<TAB>function<TAB>object", the larger run minus the smaller.
  awk -F'\t' -v n=$n '$2 == "PROGRAM TOTALS" { next } FNR == NR { s[$2 "\t" $3] -= $1; next } { s[$2 "\t" $3] += $1 }
    END { for (f in s) printf "%.1f\t%s\n", s[f] / n, f }' \
    "$OUT/$scenario-$SMALL.functions" "$OUT/$scenario-$LARGE.functions" | sort -t$'\t' -k1,1 -rn >"$OUT/$scenario.per-message"
  # SHA-256: BoringSSL's block function in the worker; in the C floor, OpenSSL's libcrypto, which
  # it uses for nothing else per message (its symbols are not exported, so it counts as a whole).
  sha="$(awk -F'\t' '$2 ~ /sha256_block/ || $3 ~ /^libcrypto/ { s += $1 } END { printf "%.0f", s }' "$OUT/$scenario.per-message")"
  echo
  echo "$scenario: $(awk -v a="$a" -v b="$b" -v n=$n 'BEGIN { printf "%.0f", (b - a) / n }') instructions per message in user space" \
    "(($b - $a) / $n jobs; valgrind $(valgrind --version | sed 's/valgrind-//'), $(date -u +%Y-%m-%dT%H:%MZ))"
  echo "  of them SHA-256 $sha (valgrind hides the SHA extensions, so the hashing runs its AVX code here);" \
    "without it $(awk -v a="$a" -v b="$b" -v n=$n -v h="$sha" 'BEGIN { printf "%.0f", (b - a) / n - h }')"
  echo "  by object:"
  awk -F'\t' '{ s[$3] += $1 } END { for (o in s) if (s[o] >= 50) printf "%10.0f  %s\n", s[o], o }' "$OUT/$scenario.per-message" |
    sort -rn | awk 'NR <= 12'
  echo "  by function (the 30 largest):"
  awk -F'\t' 'NR <= 30 { printf "%10.0f  %s  (%s)\n", $1, substr($2, 1, 110), $3 }' "$OUT/$scenario.per-message"
done
echo
say "callgrind files and logs in $OUT"
