#!/usr/bin/env bash
# Makes the image corpus of the differential test and the reference's answers:
#   scripts/image-corpus.sh OUTDIR
# installs the encoders and the reference decoder (scripts/image-tools.sh), encodes the corpus with
# real encoders into OUTDIR (scripts/image-corpus.py), copies the committed conformance files
# (Tests/Fixtures/images/), and writes OUTDIR/expected.json: for every file what Pillow (with
# pillow-heif) says of it. Any missing tool or failing encoder makes it exit non-zero.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 64; }
"$ROOT/scripts/image-tools.sh"
VENV="${IFW_IMAGE_VENV:-$ROOT/.run/image-venv}"
SDISTS="${IFW_IMAGE_SDISTS:-$ROOT/.run/image-sdists}"
PILLOW_VERSION="$("$VENV/bin/python" -c 'import PIL; print(PIL.__version__)')"
HEIF_VERSION="$("$VENV/bin/python" -c 'import pillow_heif; print(pillow_heif.__version__)')"
exec "$VENV/bin/python" "$ROOT/scripts/image-corpus.py" "$1" "$ROOT/Tests/Fixtures/images" \
  "$SDISTS/pillow-$PILLOW_VERSION.tar.gz" "$SDISTS/pillow_heif-$HEIF_VERSION.tar.gz"
