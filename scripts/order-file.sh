#!/usr/bin/env bash
# Writes Linker/image-fetch-worker.order, the layout scripts/release-build.sh links the worker with:
# every function of the binary that the benchmark's png32 and slow1024 runs execute (start-up,
# consuming, fetching, hashing, storing, publishing, acking, shutdown), hottest first. lld places
# them, in that order, at the front of the code, so that the pages the worker touches sit together
# (issue 6, peak RSS; docs/benchmarks.md, "Memory at concurrency 1,024").
#
#   scripts/order-file.sh                  build, profile, write the file
#   BENCH_NO_BUILD=1 scripts/order-file.sh profile the existing release build
#
# Run it again after changes that move much code (a new dependency, a new stage in the pipeline); a
# stale file costs memory, not correctness: names it lists that the code no longer has are skipped,
# and functions it does not list are laid out after the listed ones, as before. scripts/release-build.sh
# fails when more than 5 % of the names are missing from the worker ("order file stale: ..."); the
# build here only warns, since it is the one that makes the file anew.
#
# How: scripts/callgrind.sh runs both scenarios under callgrind, which records every function
# executed, however rarely. Callgrind writes C++ names demangled; they are mapped back to the
# symbols of the profiled binary with nm. Functions without a name of their own (callgrind shows an
# address) are named by the symbol that contains them. A name defined more than once (helpers the
# compiler makes per file, such as objectdestroyTm) is listed only when no copy comes from the Swift
# toolchain's prebuilt libraries, which keep most of their functions in one section each: ordering
# one such copy would pull its whole section, up to 1.5 MB, to the front. Functions that only have a
# local assembler label (.L…) cannot be named, so they stay where they are.
#
# Environment: BENCH_NO_BUILD, CALLGRIND_JOBS (default "1000 2000"), CALLGRIND_OUT (default: a new
# folder under /tmp, kept).
set -euo pipefail

cd "$(dirname "$0")/.."
say() { echo "order-file.sh: $*" >&2; }

out="${CALLGRIND_OUT:-$(mktemp -d /tmp/ifw-order.XXXXXX)}"
mkdir -p "$out"
say "profiling png32 and slow1024 under callgrind (files in $out)"
IFW_ORDER_FILE_CHECK=warn CALLGRIND_OUT="$out" CALLGRIND_JOBS="${CALLGRIND_JOBS:-1000 2000}" scripts/callgrind.sh png32 slow1024 >"$out/callgrind.txt"

resource="$(swiftc -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["paths"]["runtimeResourcePath"])')"
target=Linker/image-fetch-worker.order
# Only this run's two scenarios, should CALLGRIND_OUT hold profiles of others.
python3 - "$out/image-fetch-worker" "${resource}_static" "$out"/png32-*.functions "$out"/slow1024-*.functions >"$target.new" <<'EOF'
import bisect, collections, glob, os, re, subprocess, sys

binary, static_dir, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]

def defined_symbols(path, *options):
    result = subprocess.run(["nm", "--defined-only", *options, path], capture_output=True, text=True, check=True)
    return result.stdout.splitlines()

# The profiled binary's symbols: how often each name is defined, the demangled name of each
# function, and the functions by address.
raw, demangled = defined_symbols(binary), defined_symbols(binary, "-C")
assert len(raw) == len(demangled), "nm and nm -C disagree on the symbol count"
definitions = collections.Counter()
by_demangled = collections.defaultdict(list)
functions = []
for plain, readable in zip(raw, demangled):
    fields, readable_fields = plain.split(" ", 2), readable.split(" ", 2)
    if len(fields) < 3:
        continue
    definitions[fields[2]] += 1
    if fields[1] in "tTwW":
        by_demangled[readable_fields[2]].append(fields[2])
        functions.append((int(fields[0], 16), fields[2]))
functions.sort()
addresses = [address for address, _ in functions]

# Names the toolchain's prebuilt static libraries define.
prebuilt = set()
for archive in glob.glob(os.path.join(static_dir, "**", "*.a"), recursive=True):
    listing = subprocess.run(["nm", "--defined-only", "-j", archive], capture_output=True, text=True).stdout
    prebuilt.update(line.strip() for line in listing.splitlines() if line.strip() and not line.endswith(":"))

# Instructions per function, the largest over the profiles; hottest first.
cost = collections.Counter()
unresolved = skipped = 0
for profile in profiles:
    for line in open(profile):
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3 or fields[2] != "image-fetch-worker" or not fields[0].isdigit():
            continue
        name = re.sub(r"'\d+$", "", fields[1])  # callgrind marks recursion levels with 'N
        if name.startswith("0x"):
            index = bisect.bisect_right(addresses, int(name, 16)) - 1
            candidates = [functions[index][1]] if index >= 0 else []
        else:
            candidates = by_demangled.get(name, [])
        if not candidates:
            unresolved += 1
        for symbol in candidates:
            if definitions[symbol] > 1 and symbol in prebuilt:
                skipped += 1
                continue
            cost[symbol] = max(cost[symbol], int(fields[0]))

print("# Linker/image-fetch-worker.order: the worker's functions, hottest first, for lld's")
print("# --symbol-ordering-file (scripts/release-build.sh). Written by scripts/order-file.sh; do not edit.")
for symbol, _ in sorted(cost.items(), key=lambda item: (-item[1], item[0])):
    print(symbol)
print(f"order-file.sh: {len(cost)} functions; {unresolved} names not found, "
      f"{skipped} copies of repeated names left out", file=sys.stderr)
EOF
mv "$target.new" "$target"
say "wrote $target"
