"""Makes the differential test's corpus with real encoders, and records what Pillow says of each file.

    python image-corpus.py OUTDIR FIXTURES PILLOW_SDIST PILLOW_HEIF_SDIST

Encoders: ImageMagick, cjpeg, cwebp/img2webp/webpmux, gifsicle, tiffcp, pngcrush, heif-enc (Debian
packages), and Pillow's own APNG, AVIF and EXIF writers. Some files are then altered the way odd
real-world files are (stray bytes between JPEG segments, a GIF frame beyond its screen, a HEIF grid
built around an encoded tile, truncation). OUTDIR/expected.json lists, for every file, Pillow's
format, size, frame count and EXIF orientation and whether it decodes every frame (`decoded`), or
the error it gave. The file names say how each
file was made.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile

from PIL import Image
import pillow_heif

pillow_heif.register_heif_opener()

OUT = sys.argv[1]
FIXTURES = sys.argv[2]
PILLOW_SDIST = sys.argv[3]
PILLOW_HEIF_SDIST = sys.argv[4]
TMP = os.path.join(OUT, "_work")
IM = "convert-im6.q16"
MAGICK = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "BMP3": "bmp", "BMP2": "bmp",
          "TIFF": "tiff", "TIFF64": "tiff", "HEIC": "heic", "AVIF": "avif"}
FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "TIFF": "tiff",
           "HEIF": "heic", "AVIF": "avif"}


def run(*cmd, stdout=None):
    result = subprocess.run(cmd, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)
    if result.returncode != 0:
        sys.exit(f"image-corpus: {' '.join(cmd)} failed ({result.returncode}): {result.stderr.decode()[:400]}")
    return result


def path(name):
    return os.path.join(OUT, name)


def tmp(name):
    return os.path.join(TMP, name)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def exif_with_orientation(value):
    exif = Image.Exif()
    exif[274] = value
    return exif.tobytes()


# MARK: sources

def sources():
    os.makedirs(TMP, exist_ok=True)
    for name, size, pattern in [("grad", "97x61", "gradient:red-blue"), ("tiny", "1x1", "xc:orange"),
                                ("wide", "640x17", "gradient:green-yellow"), ("tall", "64x300", "gradient:white-black"),
                                ("even", "64x48", "gradient:blue-white"), ("big", "96x64", "gradient:red-white")]:
        run(IM, "-size", size, pattern, "-swirl", "30", tmp(name + ".png"))
        run(IM, tmp(name + ".png"), tmp(name + ".ppm"))
    run(IM, "-size", "40x30", "gradient:none-red", tmp("alpha.png"))


SOURCES = ["grad", "tiny", "wide", "tall", "even"]


# MARK: encoders

def png():
    for s in SOURCES:
        run(IM, tmp(s + ".png"), "PNG24:" + path(f"png-im-rgb8-{s}.png"))
        run(IM, tmp(s + ".png"), "PNG8:" + path(f"png-im-palette-{s}.png"))
    run(IM, tmp("grad.png"), "-depth", "16", "PNG48:" + path("png-im-rgb16.png"))
    run(IM, tmp("grad.png"), "-colorspace", "gray", "-depth", "1", path("png-im-gray1.png"))
    run(IM, tmp("grad.png"), "-colorspace", "gray", "-depth", "4", path("png-im-gray4.png"))
    run(IM, tmp("grad.png"), "-interlace", "PNG", path("png-im-interlaced.png"))
    run(IM, tmp("alpha.png"), "PNG32:" + path("png-im-rgba.png"))
    run("pngcrush", "-q", "-rem", "alla", "-reduce", path("png-im-rgb8-grad.png"), path("png-pngcrush-reduced.png"))
    run("pngcrush", "-q", "-c", "0", path("png-im-rgb8-even.png"), path("png-pngcrush-gray.png"))
    frames = [Image.open(tmp("even.png")).convert("RGB").rotate(a) for a in (0, 90, 180)]
    frames[0].save(path("apng-pillow-3frames.png"), save_all=True, append_images=frames[1:], duration=100)
    frames[0].save(path("apng-pillow-1frame.png"), save_all=True, duration=100)
    Image.open(tmp("grad.png")).save(path("png-pillow-exif-orientation6.png"), exif=exif_with_orientation(6))


def jpeg():
    for s in SOURCES:
        run("cjpeg", "-outfile", path(f"jpeg-cjpeg-baseline-{s}.jpg"), tmp(s + ".ppm"))
    g = tmp("grad.ppm")
    run("cjpeg", "-progressive", "-outfile", path("jpeg-cjpeg-progressive.jpg"), g)
    run("cjpeg", "-grayscale", "-outfile", path("jpeg-cjpeg-gray.jpg"), g)
    run("cjpeg", "-restart", "1", "-outfile", path("jpeg-cjpeg-restart.jpg"), g)
    run("cjpeg", "-arithmetic", "-outfile", path("jpeg-cjpeg-arithmetic.jpg"), g)
    run("cjpeg", "-optimize", "-sample", "1x1", "-outfile", path("jpeg-cjpeg-444.jpg"), g)
    run(IM, tmp("grad.png"), "-colorspace", "CMYK", path("jpeg-im-cmyk.jpg"))
    for o in (3, 6, 8):
        Image.open(tmp("grad.png")).save(path(f"jpeg-pillow-exif-orientation{o}.jpg"), exif=exif_with_orientation(o))
    Image.open(tmp("grad.png")).save(path("jpeg-pillow-progressive-exif5.jpg"), progressive=True,
                                     exif=exif_with_orientation(5))
    # Stray bytes between segments: after APP0, and a few `FF 00` pairs before the frame header.
    base = read(path("jpeg-cjpeg-baseline-grad.jpg"))
    app0_end = 4 + struct.unpack(">H", base[4:6])[0]
    write("jpeg-odd-stray-bytes.jpg", base[:app0_end] + b"\x00\x12junk\x0d\x0a" + base[app0_end:])
    write("jpeg-odd-stuffed-ff00.jpg", base[:app0_end] + b"\xff\x00\xff\x00" + base[app0_end:])
    write("jpeg-odd-fill-ff.jpg", base[:app0_end] + b"\xff\xff\xff" + base[app0_end:])


def gif():
    for s in SOURCES:
        run(IM, tmp(s + ".png"), path(f"gif-im-{s}.gif"))
    frames = []
    for i, color in enumerate(["red", "green", "blue"]):
        f = tmp(f"frame{i}.gif")
        run(IM, "-size", "48x32", "xc:" + color, f)
        frames.append(f)
    with open(path("gif-gifsicle-anim3.gif"), "wb") as out:
        run("gifsicle", "--delay", "10", "--loop", *frames, stdout=out)
    with open(path("gif-gifsicle-optimized.gif"), "wb") as out:
        run("gifsicle", "-O3", "--colors", "16", path("gif-im-grad.gif"), stdout=out)
    with open(path("gif-gifsicle-offset-frames.gif"), "wb") as out:
        run("gifsicle", "--logical-screen", "100x80", "--position", "10,10", frames[0], "--position", "52,48",
            frames[1], stdout=out)
    # A frame beyond its logical screen: a 32x32 screen holding the 48x32 frame at row 20.
    data = bytearray(read(frames[0]))
    data[6:10] = struct.pack("<HH", 32, 32)
    i = data.index(b"\x2c", 13)
    data[i + 3:i + 5] = struct.pack("<H", 20)
    write("gif-odd-frame-beyond-screen.gif", bytes(data))


def webp():
    for s in SOURCES:
        run("cwebp", "-quiet", "-q", "80", tmp(s + ".png"), "-o", path(f"webp-cwebp-lossy-{s}.webp"))
    run("cwebp", "-quiet", "-lossless", tmp("grad.png"), "-o", path("webp-cwebp-lossless.webp"))
    run("cwebp", "-quiet", "-q", "70", tmp("alpha.png"), "-o", path("webp-cwebp-alpha.webp"))
    run("cwebp", "-quiet", "-lossless", tmp("alpha.png"), "-o", path("webp-cwebp-lossless-alpha.webp"))
    run("img2webp", "-loop", "0", "-d", "100", "-lossy", tmp("even.png"), tmp("grad.png").replace("grad", "even"), tmp("even.png"),
        "-o", path("webp-img2webp-anim3.webp"))
    with open(tmp("orientation6.exif"), "wb") as f:
        f.write(exif_with_orientation(6)[6:] if exif_with_orientation(6).startswith(b"Exif") else exif_with_orientation(6))
    run("webpmux", "-set", "exif", tmp("orientation6.exif"), path("webp-cwebp-lossy-grad.webp"),
        "-o", path("webp-webpmux-exif-orientation6.webp"))


def bmp():
    run(IM, tmp("grad.png"), "BMP3:" + path("bmp-im-v3.bmp"))
    run(IM, tmp("grad.png"), "BMP:" + path("bmp-im-v5.bmp"))
    run(IM, tmp("grad.png"), "BMP2:" + path("bmp-im-os2.bmp"))
    run(IM, tmp("tiny.png"), "BMP3:" + path("bmp-im-1x1.bmp"))


def tiff():
    run(IM, tmp("grad.png"), path("tiff-im-le.tif"))
    run(IM, tmp("grad.png"), "-endian", "MSB", path("tiff-im-be.tif"))
    run(IM, tmp("wide.png"), "-compress", "lzw", path("tiff-im-lzw.tif"))
    run(IM, tmp("grad.png"), "-orient", "right-top", path("tiff-im-orientation6.tif"))
    run("tiffcp", "-8", path("tiff-im-le.tif"), path("bigtiff-tiffcp-le.tif"))
    run("tiffcp", "-8", "-B", path("tiff-im-le.tif"), path("bigtiff-tiffcp-be.tif"))
    run("tiffcp", "-8", "-c", "zip", path("tiff-im-lzw.tif"), path("bigtiff-tiffcp-zip.tif"))
    run("tiffcp", "-8", path("tiff-im-orientation6.tif"), path("bigtiff-tiffcp-orientation6.tif"))


def heif():
    run("heif-enc", "-q", "50", tmp("even.png"), "-o", path("heic-heifenc-even.heic"))
    run("heif-enc", "-q", "50", tmp("grad.png"), "-o", path("heic-heifenc-odd-clap.heic"))
    run("heif-enc", "-q", "50", "-t", "32", tmp("tall.png"), "-o", path("heic-heifenc-thumbnail.heic"))
    # The primary (first) image is smaller than the second: the largest ispe is not the answer.
    run("heif-enc", "-q", "50", tmp("even.png"), tmp("big.png"), "-o", path("heic-heifenc-two-images.heic"))
    im = Image.open(tmp("grad.png")).convert("RGB")
    for o in (3, 6, 7):
        im.save(path(f"heic-pillowheif-orientation{o}.heic"), exif=exif_with_orientation(o), quality=50)
    im.save(path("avif-pillow-odd.avif"), quality=50)
    Image.open(tmp("even.png")).convert("RGB").save(path("avif-pillow-even.avif"), quality=50)
    for o in (6, 2):
        im.save(path(f"avif-pillow-orientation{o}.avif"), exif=exif_with_orientation(o), quality=50)
    frames = [Image.open(tmp("even.png")).convert("RGB").rotate(a) for a in (0, 180)]
    frames[0].save(path("avif-pillow-sequence.avif"), save_all=True, append_images=frames[1:], quality=50)
    tile = read(path("heic-heifenc-even.heic"))
    write("heic-odd-grid-2x3.heic", make_grid(tile, rows=2, cols=3, out=(3 * 64 - 5, 2 * 48), brand=b"heic"))
    write("heic-odd-grid-clap-irot.heic", make_grid(tile, rows=3, cols=1, out=(64, 3 * 48), brand=b"heic",
                                                    clap=(50, 100), irot=1))
    write("heic-odd-grid-narrow.heic", make_grid(tile, rows=1, cols=1, out=(29, 40), brand=b"heic"))
    atile = read(path("avif-pillow-even.avif"))
    write("avif-odd-grid-2x2.avif", make_grid(atile, rows=2, cols=2, out=(128, 90), brand=b"avif", imir=0))


# MARK: a HEIF grid around an encoded tile

def boxes(data, start=0, end=None):
    end = len(data) if end is None else end
    while start + 8 <= end:
        size, kind = struct.unpack(">I4s", data[start:start + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[start + 8:start + 16])[0], 16
        elif size == 0:
            size = end - start
        yield kind, start + header, start + size
        start += size


def child(data, start, end, kind, skip=0):
    for k, s, e in boxes(data, start + skip, end):
        if k == kind:
            return s, e
    raise ValueError(kind)


def box(kind, payload):
    return struct.pack(">I", len(payload) + 8) + kind + payload


def fullbox(kind, payload, version=0, flags=0):
    return box(kind, struct.pack(">I", version << 24 | flags) + payload)


def make_grid(single, rows, cols, out, brand, clap=None, irot=None, imir=None):
    """A grid item of rows x cols references to the coded image of `single` (a one-item file)."""
    ms, me = child(single, 0, len(single), b"meta")
    ps, pe = child(single, ms, me, b"iprp", skip=4)
    cs, ce = child(single, ps, pe, b"ipco")
    codec = next(single[s - 8:e] for k, s, e in boxes(single, cs, ce) if k in (b"hvcC", b"av1C"))
    ispe = next(single[s - 8:e] for k, s, e in boxes(single, cs, ce) if k == b"ispe")
    # libavif (strict) wants a pixi on every image item; copy it for the tiles and the grid.
    pixi = next((single[s - 8:e] for k, s, e in boxes(single, cs, ce) if k == b"pixi"), None)
    ls, le = child(single, ms, me, b"iloc", skip=4)
    # heif-enc and libavif write iloc version 0 or 1 with 4-byte offsets and lengths; take the
    # primary's single extent.
    version = single[ls]
    offset_size, length_size = single[ls + 4] >> 4, single[ls + 4] & 15
    base_size = single[ls + 5] >> 4
    pos, count = ls + 8, struct.unpack(">H", single[ls + 6:ls + 8])[0]
    extent = None
    for _ in range(count):
        pos += 2 + (2 if version >= 1 else 0) + 2
        base = int.from_bytes(single[pos:pos + base_size], "big"); pos += base_size
        n = struct.unpack(">H", single[pos:pos + 2])[0]; pos += 2
        off = int.from_bytes(single[pos:pos + offset_size], "big")
        length = int.from_bytes(single[pos + offset_size:pos + offset_size + length_size], "big")
        pos += n * (offset_size + length_size)
        if extent is None:
            extent = single[base + off:base + off + length]
    codec_type = b"hvc1" if codec[4:8] == b"hvcC" else b"av01"
    tiles = rows * cols
    grid_id = tiles + 1
    wide = max(out) > 65535
    grid = struct.pack(">BBBB", 0, 1 if wide else 0, rows - 1, cols - 1) + \
        (struct.pack(">II", *out) if wide else struct.pack(">HH", *out))
    hdlr = fullbox(b"hdlr", b"\0\0\0\0pict" + b"\0" * 12 + b"\0")
    pitm = fullbox(b"pitm", struct.pack(">H", grid_id))
    infes = b"".join(fullbox(b"infe", struct.pack(">HH", i, 0) + codec_type + b"\0", version=2, flags=1)
                     for i in range(1, tiles + 1))
    infes += fullbox(b"infe", struct.pack(">HH", grid_id, 0) + b"grid\0", version=2)
    iinf = fullbox(b"iinf", struct.pack(">H", tiles + 1) + infes)
    iref = fullbox(b"iref", box(b"dimg", struct.pack(">HH", grid_id, tiles)
                                + b"".join(struct.pack(">H", i) for i in range(1, tiles + 1))))
    props = [codec, ispe, fullbox(b"ispe", struct.pack(">II", *out))]
    tile_props = [0x81, 0x02]
    grid_props = [3]
    if pixi:
        props.append(pixi)
        tile_props.append(len(props))
        grid_props.append(len(props))
    if clap:
        props.append(box(b"clap", struct.pack(">IIIIiIiI", clap[0], 1, clap[1], 1, 0, 1, 0, 1)))
        grid_props.append(len(props))
    if irot is not None:
        props.append(box(b"irot", bytes([irot])))
        grid_props.append(len(props))
    if imir is not None:
        props.append(box(b"imir", bytes([imir])))
        grid_props.append(len(props))
    ipco = box(b"ipco", b"".join(props))
    entries = b"".join(struct.pack(">HB", i, len(tile_props)) + bytes(tile_props) for i in range(1, tiles + 1))
    entries += struct.pack(">HB", grid_id, len(grid_props)) + bytes(grid_props)
    ipma = fullbox(b"ipma", struct.pack(">I", tiles + 1) + entries)
    iprp = box(b"iprp", ipco + ipma)
    idat = box(b"idat", grid)
    ftyp = box(b"ftyp", brand + b"\0\0\0\0" + b"mif1" + brand + b"miaf")

    def iloc(mdat_data_start):
        items = b""
        for i in range(1, tiles + 1):
            items += struct.pack(">HHHHII", i, 0, 0, 1, mdat_data_start, len(extent))
        items += struct.pack(">HHHHII", grid_id, 1, 0, 1, 0, len(grid))
        return fullbox(b"iloc", bytes([0x44, 0x00]) + struct.pack(">H", tiles + 1) + items, version=1)

    def assemble(start):
        meta = fullbox(b"meta", hdlr + pitm + iinf + iref + iloc(start) + iprp + idat)
        return ftyp + meta

    head = assemble(0)
    head = assemble(len(head) + 8)
    return head + box(b"mdat", extent)


# MARK: formats the worker does not claim, conformance files, truncation

def unclaimed():
    for fmt, ext in [("PPM", "ppm"), ("PGM", "pgm"), ("ICO", "ico"), ("TGA", "tga"), ("PSD", "psd"),
                     ("PCX", "pcx"), ("SGI", "sgi"), ("XPM", "xpm"), ("JP2", "jp2")]:
        try:
            run(IM, tmp("even.png"), f"{fmt}:" + path(f"unclaimed-im.{ext}"))
        except SystemExit:
            pass  # a delegate this ImageMagick lacks; the others still test the refusal
    write("unclaimed-svg.svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')
    write("unclaimed-html.html", b"<!DOCTYPE html><html><body>404</body></html>")
    Image.open(tmp("even.png")).convert("RGB").save(path("unclaimed-pillow.pcx"))


def conformance():
    if not os.path.isdir(FIXTURES):
        sys.exit(f"image-corpus: {FIXTURES} is missing")
    for name in sorted(os.listdir(FIXTURES)):
        if not name.lower().endswith((".txt", ".md")):
            shutil.copy(os.path.join(FIXTURES, name), path("conformance-" + name))


# Pillow's own test images (Tests/images/ of its source distribution), in the formats the worker
# claims: real files from many encoders, and the broken ones Pillow's tests refuse. Files over 2 MB
# are left out to keep the test quick.
PILLOW_EXTENSIONS = {"png": "png", "apng": "png", "jpg": "jpeg", "jpeg": "jpeg", "mpo": "jpeg", "gif": "gif",
                     "webp": "webp", "bmp": "bmp", "dib": "bmp", "tif": "tiff", "tiff": "tiff", "avif": "avif",
                     "heic": "heic", "heif": "heic"}


def pillow_tests():
    if not os.path.isfile(PILLOW_SDIST):
        sys.exit(f"image-corpus: {PILLOW_SDIST} is missing")
    with tarfile.open(PILLOW_SDIST) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or "/Tests/images/" not in member.name or member.size > 2_000_000:
                continue
            extension = parts[-1].rsplit(".", 1)[-1].lower()
            if extension not in PILLOW_EXTENSIONS:
                continue
            inside = "_".join(parts[parts.index("images") + 1:])
            write(f"pillow.{PILLOW_EXTENSIONS[extension]}-{inside}", archive.extractfile(member).read())


def pillow_heif_tests():
    """pillow-heif's sample files (tests/images/heif*/: valid, special, corrupted, truncated)."""
    if not os.path.isfile(PILLOW_HEIF_SDIST):
        sys.exit(f"image-corpus: {PILLOW_HEIF_SDIST} is missing")
    with tarfile.open(PILLOW_HEIF_SDIST) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or "/tests/images/" not in member.name or member.size > 2_000_000:
                continue
            extension = parts[-1].rsplit(".", 1)[-1].lower()
            if not parts[-2].startswith("heif") or extension not in ("heic", "heif", "hif", "avif"):
                continue
            kind = "avif" if extension == "avif" else "heic"
            inside = "_".join(parts[parts.index("images") + 1:])
            write(f"pillowheif.{kind}-{inside}", archive.extractfile(member).read())


def truncations():
    for name in sorted(os.listdir(OUT)):
        p = path(name)
        # Pillow's test images are cut by the Swift test itself (mutatedCorpusFilesStaySafe).
        if not os.path.isfile(p) or name.startswith(("unclaimed", "truncated", "pillow.", "pillowheif.")) \
                or name == "expected.json":
            continue
        data = read(p)
        for fraction in (0.3, 0.7):
            write(f"truncated{int(fraction * 100)}-{name}", data[:max(1, int(len(data) * fraction))])


def reference():
    answers = {}
    for name in sorted(os.listdir(OUT)):
        p = path(name)
        if not os.path.isfile(p) or name == "expected.json":
            continue
        answer = {}
        try:
            with Image.open(p) as im:
                answer["pillow_format"] = im.format
                answer["format"] = FORMATS.get(im.format)
                answer["width"], answer["height"] = im.size
                answer["frames"] = getattr(im, "n_frames", 1)
                # Pillow keeps EXIF orientation as a tag, and turns AVIF's irot/imir into one;
                # pillow-heif applies irot/imir and tells the equivalent code apart.
                if im.format in ("JPEG", "PNG", "WEBP", "TIFF", "AVIF"):
                    orientation = im.getexif().get(274)
                elif im.format == "HEIF":
                    orientation = im.info.get("original_orientation")
                else:
                    orientation = None
                if orientation is not None and int(orientation) != 1:
                    answer["orientation"] = int(orientation)
                # Decoded in full: every frame's pixels (Image.load()), or the error it gave.
                try:
                    # A decompression bomb (thousands of large frames) would take minutes here.
                    if answer["frames"] * im.width * im.height > 50_000_000:
                        raise ValueError("not decoded by the test: over 50 MP in all frames")
                    for frame in range(answer["frames"]):
                        im.seek(frame)
                        im.load()
                    answer["decoded"] = True
                except Exception as error:
                    answer["decoded"] = False
                    answer["decode_error"] = f"{type(error).__name__}: {str(error)[:120]}"
        except Exception as error:  # the reference refuses the file
            answer = {"error": f"{type(error).__name__}: {str(error)[:120]}"}
            # A second opinion for the files Pillow refuses: ImageMagick's first frame.
            magick = subprocess.run(["identify-im6.q16", "-format", "%m %w %h\\n", p + "[0]"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            words = magick.stdout.decode(errors="replace").split()
            if magick.returncode == 0 and len(words) >= 3:
                answer["identify"] = {"format": MAGICK.get(words[0]), "magick_format": words[0],
                                      "width": int(words[1]), "height": int(words[2])}
        answers[name] = answer
    with open(path("expected.json"), "w") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
    return answers


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    sources()
    for make in (png, jpeg, gif, webp, bmp, tiff, heif, unclaimed, conformance, pillow_tests, pillow_heif_tests):
        make()
    truncations()
    shutil.rmtree(TMP)
    answers = reference()
    opened = sum(1 for a in answers.values() if "error" not in a)
    print(f"image-corpus: {len(answers)} files, {opened} opened by Pillow {Image.__version__} "
          f"with pillow-heif {pillow_heif.__version__}")


main()
