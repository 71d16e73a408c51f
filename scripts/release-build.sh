#!/usr/bin/env bash
# The release build, in one place: `make release`, `make run`, scripts/bench.sh, scripts/callgrind.sh
# and the Dockerfile all build through this script, so the binary measured is the binary shipped.
#
#   scripts/release-build.sh                               every product (the benchmark needs its driver)
#   scripts/release-build.sh --product image-fetch-worker  the worker alone
#
# Options after the script's name go to `swift build`. On top of `swift build -c release`:
#
# - `--static-swift-stdlib`: the Swift runtime and Foundation are linked in, so nothing of Swift has
#   to be installed where the binary runs (only librabbitmq, libcurl and glibc).
# - Linked by lld, which the Swift toolchain ships, with the functions the worker runs laid out
#   together at the front of the code, in the order of Linker/image-fetch-worker.order (written by
#   scripts/order-file.sh). The kernel maps a binary's code in 64 KiB blocks around each page first
#   touched, so the few thousand functions the worker runs, spread over 20 MB of code, made about
#   11 MB of it resident; packed together they make about 5 MB (docs/benchmarks.md, "Memory at
#   concurrency 1,024"). A name the file lists that the code no longer has is skipped; the order
#   changes the layout only, never the behaviour. But a file gone stale lays out nothing much, and
#   silently: after the build, the worker's symbols (nm) are compared with the file's names, and
#   the build fails with "order file stale: N of M symbols missing; run scripts/order-file.sh" when
#   more than 5 % are missing (IFW_ORDER_FILE_CHECK=warn only prints that line; order-file.sh
#   itself builds that way). The binary rather than lld's warnings: a build that links nothing anew
#   prints none.
# - `--no-export-dynamic`: the Swift toolchain exports every symbol of the package's own objects
#   (about 20,000) in the dynamic symbol table, which nothing here looks up; without them the binary
#   is smaller and the dynamic linker reads less at start.
# - `-z pack-relative-relocs` where this machine's glibc is 2.36 or newer (Debian 12, Ubuntu 24.04,
#   the Dockerfile's images): the 2.4 MB table of relative relocations, read once at start and then
#   resident, becomes 38 KB. Such a binary needs glibc 2.36 where it runs, hence the condition: a
#   build on an older glibc still runs where it was built.
# - The source revision and Swift version for image_fetch_build_info (scripts/build-info.sh writes
#   them; -DIFW_GENERATED_BUILD_INFO compiles them in).
set -euo pipefail

cd "$(dirname "$0")/.."

flags=(
  -c release --static-swift-stdlib
  -Xswiftc -use-ld=lld
  -Xlinker "--symbol-ordering-file=$PWD/Linker/image-fetch-worker.order"
  -Xlinker --no-warn-symbol-ordering
  -Xlinker --no-export-dynamic
  -Xswiftc -DIFW_GENERATED_BUILD_INFO
)
scripts/build-info.sh
# `getconf GNU_LIBC_VERSION` prints "glibc 2.36"; compare major and minor as numbers.
read -r _ glibc < <(getconf GNU_LIBC_VERSION 2>/dev/null || echo "unknown 0.0")
IFS=. read -r major minor _ <<<"$glibc"
if ((${major:-0} > 2 || (${major:-0} == 2 && ${minor:-0} >= 36))); then
  flags+=(-Xlinker -z -Xlinker pack-relative-relocs)
fi

echo "release-build.sh: swift build ${flags[*]} $*" >&2
swift build "${flags[@]}" "$@"

# The order file's staleness: its names that the worker binary no longer defines.
order=Linker/image-fetch-worker.order
worker="$(swift build "${flags[@]}" "$@" --show-bin-path)/image-fetch-worker"
if [[ -x $worker ]]; then
  nm="$(command -v nm || echo "$(dirname "$(readlink -f "$(command -v swift)")")/llvm-nm")"
  counts="$("$nm" --defined-only "$worker" |
    awk 'NR == FNR { if ($0 !~ /^#/ && $0 != "" && !($0 in listed)) { listed[$0] = 1; total++ } next }
      NF >= 3 && ($3 in listed) { delete listed[$3] }
      END { missing = 0; for (name in listed) missing++; print missing, total + 0 }' "$order" -)"
  read -r missing total <<<"$counts"
  if ((total == 0)); then
    echo "release-build.sh: $order lists no symbols" >&2
    exit 1
  fi
  echo "release-build.sh: $order: $missing of $total symbols missing from the worker" >&2
  if ((missing * 100 > total * 5)); then
    echo "order file stale: $missing of $total symbols missing; run scripts/order-file.sh" >&2
    [[ ${IFW_ORDER_FILE_CHECK:-fail} == warn ]] || exit 1
  fi
fi
