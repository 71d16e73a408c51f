#!/usr/bin/env bash
# The CPU cost of image.verify=decode per image, by format and size (docs/image-formats.md, "Cost
# of a decode"): instructions counted by callgrind, which do not depend on the machine's load.
#
#   scripts/decode-cost.sh [OUTDIR]
#
# Makes a small (64 x 64) and a large (1920 x 1080) photo-like image in each decoded format with
# the corpus's encoders (scripts/image-tools.sh), builds Benchmarks/DecodeCost/decode_cost.c (the
# worker's libvips calls, Sources/CShims/vips_loader.c) with -O2, and runs it under callgrind for 1 and
# for 1 + N decodes of each file: (instructions of the second - of the first) / N is one decode,
# start-up excluded. Also prints user CPU per decode from a timed loop, which a loaded machine
# inflates. N: DECODE_COST_N (default 10 for large files, 100 for small).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$(mktemp -d /tmp/ifw-decode-cost.XXXXXX)}"
mkdir -p "$OUT"
"$ROOT/scripts/image-tools.sh"
command -v valgrind >/dev/null || { echo "decode-cost.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
IM=convert-im6.q16
VENV="${IFW_IMAGE_VENV:-$ROOT/.run/image-venv}"
cc -O2 -o "$OUT/decode_cost" "$ROOT/Benchmarks/DecodeCost/decode_cost.c" "$ROOT/Sources/CShims/vips_loader.c" \
  -I"$ROOT/Sources/CShims/include" $(pkg-config --cflags --libs glib-2.0) -lpthread -ldl

for size in 64x64 1920x1080; do
  src="$OUT/src-$size.png"
  # A photo-like picture: fractal plasma, smoothed, so that every codec has real work.
  $IM -size "$size" plasma:fractal -seed 11 -blur 0x2 "$src"
  $IM "$src" -quality 85 "$OUT/$size.jpg"
  cp "$src" "$OUT/$size.png"
  $IM "$src" "$OUT/$size.gif"
  cwebp -quiet -q 80 "$src" -o "$OUT/$size.webp"
  $IM "$src" -compress lzw "$OUT/$size.tif"
  heif-enc -q 50 "$src" -o "$OUT/$size.heic" >/dev/null
  # heif-enc's AV1 path asserts on some inputs; Pillow's AVIF writer (libavif) is the corpus's too.
  "$VENV/bin/python" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).save(sys.argv[2], quality=50)' \
    "$src" "$OUT/$size.avif"
done

count() {  # LOADER ITERATIONS FILE -> instructions
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "$OUT/decode_cost" "$1" "$2" "$3" 2>&1 |
    awk '/Collected :/ { print $4 }'
}

printf '| image | bytes | instructions per decode | user CPU per decode (ms) |\n|---|---|---|---|\n'
for size in 64x64 1920x1080; do
  n=${DECODE_COST_N:-$([[ $size == 64x64 ]] && echo 100 || echo 10)}
  for ext in jpg png gif webp tif heic avif; do
    file="$OUT/$size.$ext"
    case $ext in jpg) l=0 ;; png) l=1 ;; gif) l=2 ;; webp) l=3 ;; tif) l=4 ;; *) l=5 ;; esac
    one=$(count $l 1 "$file")
    many=$(count $l $((1 + n)) "$file")
    per=$(((many - one) / n))
    reps=$((n * 5))
    user=$( { /usr/bin/time -f '%U' "$OUT/decode_cost" $l $reps "$file"; } 2>&1 | tail -n1)
    printf '| %s %s | %s | %s | %s |\n' "$ext" "$size" "$(stat -c %s "$file")" "$per" \
      "$(awk -v u="$user" -v r="$reps" 'BEGIN { printf "%.3f", u * 1000 / r }')"
  done
done
