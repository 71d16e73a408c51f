"""The internet-like benchmark's origins, files and jobs (scripts/bench.sh internet…), made from fixed seeds.

    python corpus.py images DIR           DIR/www: 400 images, cut JPEGs and HTML pages (skipped when
                                          DIR/www/.done says this version made them)
    python corpus.py plan DIR JOBS PORT   DIR/origins.tsv and DIR/jobs.tsv for JOBS jobs

The same arguments give the same bytes and the same jobs every time (Pillow pinned in
requirements.txt). Job i is the same for every job count: a longer list only adds jobs at its end.

Origins: 100 host names oNNN.bench.test on 127.0.1.N, each with its own fixed delay of 20–80 ms,
spread evenly and shuffled so that the delay averages 50 ms both over the origins and weighted by
their popularity. Popularity is Zipf-like (weight 1/rank^1.12): the busiest origin gets ~24 % of
the jobs, the top five ~51 %.

Files: 400 images of 20–400 KB (median ~82 KB): 80 % JPEG, 8 % PNG, 8 % WebP, 4 % GIF, drawn
as smooth colour fields with shapes and a little grain (photographic enough that the encoders
compress them like photos: noise would make a 1 MP JPEG weigh 500 KB). Sizes are log-normal
around 82 KB; each image is scaled until its encoding is within 8 % of its target.

Jobs: 1.5 % ask for an image that does not exist (404), 1 % for an HTML page (text/html), 0.5 %
for a JPEG cut short (served whole, with its own Content-Length); the rest for one of the 400
images, uniformly. Each URL carries ?j=INDEX, so every job has its own URL.

jobs.tsv: url, kind (image, missing, html, cut), delay_ms of its origin, host. origins.tsv: host,
address, delay_ms, weight, share of the jobs in jobs.tsv.
"""
import io
import math
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter

VERSION = "1"  # bump when the images change, so that cached copies are made again
ORIGINS = 100
IMAGES = 400
CUT = 16
PAGES = 16
ZIPF = 1.12
SEED = 31


def origins():
    """[(host, address, delay_ms, weight)], rank 1 first."""
    weights = [1 / (rank ** ZIPF) for rank in range(1, ORIGINS + 1)]
    total = sum(weights)
    weights = [w / total for w in weights]
    delays = [round(20 + 60 * i / (ORIGINS - 1)) for i in range(ORIGINS)]
    # The first shuffle whose popularity-weighted mean is within 0.5 ms of 50: the ideal rate
    # (Little's law) then does not depend on which delays the busiest origins happened to get.
    for seed in range(SEED, SEED + 10_000):
        shuffled = delays[:]
        random.Random(seed).shuffle(shuffled)
        if abs(sum(d * w for d, w in zip(shuffled, weights)) - 50) < 0.5:
            break
    return [(f"o{n:03d}.bench.test", f"127.0.1.{n}", shuffled[n - 1], weights[n - 1]) for n in range(1, ORIGINS + 1)]


def formats():
    rng = random.Random(SEED + 1)
    return [rng.choices(["jpg", "png", "webp", "gif"], [80, 8, 8, 4])[0] for _ in range(IMAGES)]


def photo(rng, width, height, grain):
    """A smooth colour field, some soft shapes and grain: compresses like a photo, not like noise."""
    small = Image.frombytes("RGB", (6, 5), rng.randbytes(6 * 5 * 3))
    image = small.resize((width, height), Image.BICUBIC)
    detail = Image.frombytes("RGB", (24, 18), rng.randbytes(24 * 18 * 3)).resize((width, height), Image.BICUBIC)
    image = Image.blend(image, detail, 0.3)
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(4, 14)):
        x, y = rng.randrange(width), rng.randrange(height)
        rx, ry = rng.randint(width // 20 + 1, width // 3 + 2), rng.randint(height // 20 + 1, height // 3 + 2)
        colour = tuple(rng.randrange(256) for _ in range(3))
        if rng.random() < 0.5:
            draw.ellipse((x - rx, y - ry, x + rx, y + ry), fill=colour)
        else:
            draw.polygon([(x + rng.randint(-rx, rx), y + rng.randint(-ry, ry)) for _ in range(rng.randint(3, 6))],
                         fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(rng.uniform(1.0, 3.0)))
    if grain:
        noise = Image.frombytes("L", (width, height), rng.randbytes(width * height)).convert("RGB")
        image = Image.blend(image, noise, grain)
    return image


def encode(image, fmt):
    out = io.BytesIO()
    if fmt == "jpg":
        image.save(out, "JPEG", quality=85)
    elif fmt == "png":
        image.save(out, "PNG", optimize=False, compress_level=6)
    elif fmt == "webp":
        image.save(out, "WEBP", quality=80, method=4)
    else:
        image.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "GIF")
    return out.getvalue()


def make_image(index, fmt):
    rng = random.Random(f"{SEED}-image-{index}")
    target = min(400_000, max(20_000, int(82_000 * math.exp(rng.gauss(0, 0.6)))))
    aspect = rng.choice([4 / 3, 3 / 2, 1.0, 16 / 9, 3 / 4, 2 / 3])
    grain = {"jpg": 0.06, "webp": 0.06, "png": 0.02, "gif": 0.0}[fmt]
    state = rng.getstate()
    pixels = target * {"jpg": 6, "webp": 8, "png": 0.6, "gif": 1.2}[fmt]
    best = None
    for _ in range(6):
        width = max(32, int(math.sqrt(pixels * aspect)))
        height = max(32, int(width / aspect))
        rng.setstate(state)  # the same picture at each scale
        body = encode(photo(rng, width, height, grain), fmt)
        if best is None or abs(len(body) - target) < abs(len(best) - target):
            best = body
        if abs(len(body) - target) <= 0.08 * target:
            break
        pixels *= target / len(body)
    return best


def images(root):
    www = os.path.join(root, "www")
    done = os.path.join(www, ".done")
    if os.path.exists(done) and open(done).read() == VERSION:
        return
    os.makedirs(os.path.join(www, "img"), exist_ok=True)
    os.makedirs(os.path.join(www, "p"), exist_ok=True)
    jpegs = []
    for index, fmt in enumerate(formats()):
        body = make_image(index, fmt)
        with open(os.path.join(www, "img", f"{index:03d}.{fmt}"), "wb") as file:
            file.write(body)
        if fmt == "jpg":
            jpegs.append(body)
    rng = random.Random(SEED + 2)
    for n in range(CUT):
        body = jpegs[n * 7 % len(jpegs)]
        with open(os.path.join(www, "img", f"cut-{n:02d}.jpg"), "wb") as file:
            file.write(body[:int(len(body) * rng.uniform(0.3, 0.7))])
    for n in range(PAGES):
        items = "".join(f"<li><a href=\"/p/{(n + k) % PAGES:02d}.html\">Item {k}</a></li>\n"
                        for k in range(rng.randint(20, 200)))
        page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Page {n}</title></head>\n"
                f"<body><h1>Not the image you asked for</h1>\n<ul>\n{items}</ul></body></html>\n")
        with open(os.path.join(www, "p", f"{n:02d}.html"), "w") as file:
            file.write(page)
    with open(done, "w") as file:
        file.write(VERSION)


def plan(root, jobs, port):
    hosts = origins()
    names = [f"{i:03d}.{fmt}" for i, fmt in enumerate(formats())]
    suffix = "" if port == 443 else f":{port}"
    rng = random.Random(SEED + 3)
    counts = [0] * ORIGINS
    weights = [h[3] for h in hosts]
    with open(os.path.join(root, "jobs.tsv"), "w") as out:
        for j in range(jobs):
            # Four draws per job whatever its kind, so that job j never depends on the job count.
            origin = rng.choices(range(ORIGINS), weights)[0]
            roll, pick, other = rng.random(), rng.randrange(IMAGES), rng.randrange(1000)
            if roll < 0.015:
                kind, path = "missing", f"/img/{IMAGES + other:04d}.jpg"
            elif roll < 0.025:
                kind, path = "html", f"/p/{other % PAGES:02d}.html"
            elif roll < 0.030:
                kind, path = "cut", f"/img/cut-{other % CUT:02d}.jpg"
            else:
                kind, path = "image", f"/img/{names[pick]}"
            host, _, delay, _ = hosts[origin]
            counts[origin] += 1
            out.write(f"https://{host}{suffix}{path}?j={j}\t{kind}\t{delay}\t{host}\n")
    with open(os.path.join(root, "origins.tsv"), "w") as out:
        for (host, address, delay, weight), count in zip(hosts, counts):
            out.write(f"{host}\t{address}\t{delay}\t{weight:.5f}\t{count / max(jobs, 1):.5f}\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "images":
        images(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "plan":
        plan(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
