#!/usr/bin/env bash
# The allocation gate: the malloc counts of the hot path's pieces (Job.decode, JobResult.encoded,
# the publish arena, an admission round of the origin scheduler) against the thresholds committed
# in Benchmarks/Thresholds/. scripts/test.sh runs it, so `make test` fails when a change adds an
# allocation to one of them.
#
#   scripts/benchmark-gate.sh            build Benchmarks/ (release) and check
#   scripts/benchmark-gate.sh build      only build what the check runs (scripts/test.sh runs this in
#                                        the background while swift test runs; the check's build is
#                                        then a no-op)
#   scripts/benchmark-gate.sh update     write today's counts as the thresholds (then commit them)
#
# Only malloc counts are gated: they are the same on every run of a build, where time on this
# shared machine drifts by a third between minutes. Each figure is the allocations of 1,000 calls
# (the benchmarks' scaling factor), so one allocation more per call is 1,000 more; the tolerance is
# 0 (Benchmarks/Benchmarks/WorkerBenchmarks/WorkerBenchmarks.swift, `gated`). Fewer allocations than
# the thresholds pass, with a note to update them, so that an improvement is kept by the ratchet.
set -euo pipefail

cd "$(dirname "$0")/../Benchmarks"
say() { echo "benchmark-gate.sh: $*" >&2; }

gated=(Job.decode JobResult.encoded PublishArena.result PublishArena.retryCopy OriginScheduler.round)
pattern="$(printf '%s|' "${gated[@]//./\\.}")"
filter="^(${pattern%|})\$"
arguments=(--target WorkerBenchmarks --filter "$filter" --metric mallocCountTotal --no-progress)

case ${1:-check} in
build)
  # `list` builds the plugin's tool, BenchmarkTool and WorkerBenchmarks exactly as `thresholds check`
  # does (release, the same parameters), then only lists the benchmarks: nothing is measured.
  swift package benchmark list --target WorkerBenchmarks --no-progress
  ;;
update)
  swift package --allow-writing-to-package-directory benchmark thresholds update "${arguments[@]}"
  ;;
check)
  # The plugin finds a threshold file by the benchmark's name and skips a benchmark without one,
  # so a missing file would leave that benchmark unchecked.
  for name in "${gated[@]}"; do
    [[ -f Thresholds/WorkerBenchmarks.$name.p90.json ]] ||
      { say "no Benchmarks/Thresholds/WorkerBenchmarks.$name.p90.json; run scripts/benchmark-gate.sh update"; exit 1; }
  done
  log="$(mktemp "${TMPDIR:-/tmp}/ifw-benchmark-gate.XXXXXX")"
  trap 'rm -f "$log"' EXIT
  rc=0
  swift package benchmark thresholds check "${arguments[@]}" 2>&1 | tee "$log" || rc=$?
  # `swift package` turns every failure of the plugin into exit status 1; its text tells them apart.
  if grep -q "is EQUAL to the defined thresholds" "$log"; then
    say "allocations as in Benchmarks/Thresholds/"
  elif grep -q "is BETTER than the defined thresholds" "$log" && ! grep -q "is WORSE than" "$log"; then
    say "fewer allocations than Benchmarks/Thresholds/ allows: run scripts/benchmark-gate.sh update and commit the files"
  elif grep -q "is WORSE than the defined thresholds" "$log"; then
    say "more allocations than Benchmarks/Thresholds/ allows (the table above); find them with" \
      "'cd Benchmarks && swift package benchmark --filter NAME --allocation-stacks'"
    exit 1
  else
    say "the benchmarks did not run to a verdict (exit $rc)"
    exit 1
  fi
  ;;
*)
  say "usage: scripts/benchmark-gate.sh [check|build|update]"
  exit 64
  ;;
esac
