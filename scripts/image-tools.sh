#!/usr/bin/env bash
# Installs what the image-format differential test needs, and prints nothing when all is there:
#   - real encoders from Debian (libheif's heif-enc, ImageMagick, cwebp/webpmux/img2webp, cjpeg,
#     gifsicle, libtiff's tiffcp, pngcrush), which make the corpus at test time;
#   - the reference decoder: Pillow with pillow-heif, in a virtual environment under .run/
#     (override with IFW_IMAGE_VENV);
#   - Pillow's source distribution from PyPI, for the public test images it ships (Tests/images/),
#     kept in .run/image-sdists (override with IFW_IMAGE_SDISTS).
# Exits non-zero, naming what is missing, when something cannot be installed: the test then fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "image-tools.sh: $*" >&2; exit 1; }

# command -> Debian package
declare -A tools=(
  [heif-enc]=libheif-examples [convert-im6.q16]=imagemagick-6.q16 [cwebp]=webp [webpmux]=webp
  [img2webp]=webp [cjpeg]=libjpeg-turbo-progs [gifsicle]=gifsicle [tiffcp]=libtiff-tools
  [pngcrush]=pngcrush
)
missing=()
for t in "${!tools[@]}"; do
  command -v "$t" >/dev/null 2>&1 || missing+=("${tools[$t]}")
done
if ((${#missing[@]} > 0)); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || die "missing: ${missing[*]} (run as root)"
    sudo=(sudo -n)
  fi
  echo "image-tools.sh: installing ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || die "apt-get install failed for: ${missing[*]}"
  for t in "${!tools[@]}"; do command -v "$t" >/dev/null 2>&1 || die "$t is still missing"; done
fi

VENV="${IFW_IMAGE_VENV:-$ROOT/.run/image-venv}"
if ! "$VENV/bin/python" -c 'import PIL, pillow_heif' >/dev/null 2>&1; then
  echo "image-tools.sh: installing Pillow and pillow-heif into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >/dev/null || die "python3 -m venv failed"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'Pillow>=11.3,<13' 'pillow-heif>=1.0,<2' >/dev/null ||
    die "pip could not install Pillow and pillow-heif"
  "$VENV/bin/python" -c 'import PIL, pillow_heif' || die "Pillow or pillow-heif does not import"
fi

# Pillow's test images: the source distribution of the Pillow installed. pip prepares its metadata
# even to download it, which needs setuptools >= 77 and pybind11 in the environment.
SDISTS="${IFW_IMAGE_SDISTS:-$ROOT/.run/image-sdists}"
PILLOW_VERSION="$("$VENV/bin/python" -c 'import PIL; print(PIL.__version__)')"
if [[ ! -f "$SDISTS/pillow-$PILLOW_VERSION.tar.gz" ]]; then
  echo "image-tools.sh: downloading Pillow $PILLOW_VERSION's source distribution (its test images)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'setuptools>=77' pybind11 >/dev/null ||
    die "pip could not install setuptools and pybind11"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation "pillow==$PILLOW_VERSION" -d "$SDISTS" >/dev/null 2>&1 ||
    die "pip could not download pillow==$PILLOW_VERSION's source distribution"
fi
# pillow-heif's sample HEIF and AVIF files (tests/images/heif*/ of its source distribution).
HEIF_VERSION="$("$VENV/bin/python" -c 'import pillow_heif; print(pillow_heif.__version__)')"
if [[ ! -f "$SDISTS/pillow_heif-$HEIF_VERSION.tar.gz" ]]; then
  echo "image-tools.sh: downloading pillow-heif $HEIF_VERSION's source distribution (its sample images)" >&2
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation "pillow_heif==$HEIF_VERSION" -d "$SDISTS" >/dev/null 2>&1 ||
    die "pip could not download pillow_heif==$HEIF_VERSION's source distribution"
fi
