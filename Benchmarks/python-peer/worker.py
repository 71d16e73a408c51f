"""The Python peer of the benchmarks: the worker a user would write with aio-pika and aiohttp.

The job the worker and the C floor (Benchmarks/Floor/floor.c) do for png32: consume a job
({"id", "url"}), fetch the URL under a semaphore of WORKER_CONCURRENCY, check the PNG or JPEG
header and read its size, SHA-256, store under the digest (write only a new file), publish the
result (persistent, publisher confirm), ack the job once the result is confirmed; prefetch is
2 x concurrency. A yardstick: no retries, SSRF guard, metrics or reconnects. Started by
scripts/bench.sh as `ifw-python-peer run`, configured like the worker and the floor by
AMQP_URL QUEUE_JOBS QUEUE_RESULTS WORKER_CONCURRENCY STORAGE_PATH, and FETCH_TLS_CA_FILE (the CA
that signs the HTTPS origins, as the worker's key of that name; unset: the system's CAs). Host
names resolve through the system (getaddrinfo, cached by aiohttp for 10 s); aiohttp's connector
keeps connections alive and reuses them per host, HTTP/1.1 only. For the internet scenario it
also reads GIF and WebP headers, and names its failures with the worker's codes (http_error,
not_an_image, truncated, or fetch_failed for the rest).
"""

import asyncio
import hashlib
import json
import os
import signal
import socket
import ssl
import sys
import time

import aio_pika
import aiohttp


def image_size(body):
    """(format, extension, width, height) from the PNG IHDR or the JPEG frame header, else None."""
    if len(body) >= 24 and body[:8] == b"\x89PNG\r\n\x1a\n" and body[12:16] == b"IHDR":
        return "png", "png", int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")
    if len(body) >= 10 and body[:6] in (b"GIF87a", b"GIF89a"):
        return "gif", "gif", int.from_bytes(body[6:8], "little"), int.from_bytes(body[8:10], "little")
    if len(body) >= 30 and body[:4] == b"RIFF" and body[8:12] == b"WEBP":
        return webp_size(body)
    if len(body) < 4 or body[0] != 0xFF or body[1] != 0xD8:
        return None
    i = 2
    while i + 4 <= len(body):
        if body[i] != 0xFF:
            return None
        marker = body[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = int.from_bytes(body[i + 2:i + 4], "big")
        if length < 2:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn
            if i + 9 > len(body):
                return None
            height = int.from_bytes(body[i + 5:i + 7], "big")
            return "jpeg", "jpg", int.from_bytes(body[i + 7:i + 9], "big"), height
        i += 2 + length
    return None


def webp_size(body):
    """(format, extension, width, height) from the first chunk of a WebP (VP8, VP8L or VP8X), else None."""
    chunk = body[12:16]
    if chunk == b"VP8 " and body[23:26] == b"\x9d\x01\x2a":
        return "webp", "webp", int.from_bytes(body[26:28], "little") & 0x3FFF, int.from_bytes(body[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and body[20] == 0x2F:
        bits = int.from_bytes(body[21:25], "little")
        return "webp", "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return "webp", "webp", int.from_bytes(body[24:27], "little") + 1, int.from_bytes(body[27:30], "little") + 1
    return None


class Failure(Exception):
    """A failed job, with the worker's error code for it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def store(root, digest, extension, body):
    """Writes the body under its digest unless a file of its size is already there."""
    folder = os.path.join(root, digest[:2])
    path = os.path.join(folder, f"{digest}.{extension}")
    try:
        if os.stat(path).st_size == len(body):
            return path
    except FileNotFoundError:
        pass
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"  # no await in here: one store at a time
    with open(temporary, "wb") as file:
        file.write(body)
    os.rename(temporary, path)
    return path


async def main():
    concurrency = int(os.environ.get("WORKER_CONCURRENCY", "32"))
    storage = os.environ["STORAGE_PATH"]
    results_queue = os.environ.get("QUEUE_RESULTS", "image-fetch.results")
    os.makedirs(storage, exist_ok=True)
    hostname = socket.gethostname()

    connection = await aio_pika.connect(os.environ["AMQP_URL"].split(",")[0])
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    await channel.set_qos(prefetch_count=2 * concurrency)
    jobs = await channel.get_queue(os.environ.get("QUEUE_JOBS", "image-fetch.jobs"), ensure=False)
    ca_file = os.environ.get("FETCH_TLS_CA_FILE")
    tls = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    http = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency, ssl=tls),
        timeout=aiohttp.ClientTimeout(total=30),
    )
    fetches = asyncio.Semaphore(concurrency)
    in_flight = set()

    async def handle(message):
        admitted = time.monotonic()
        try:
            job = json.loads(message.body)
            job_id, url = job["id"], job["url"]
        except (ValueError, KeyError, TypeError):
            await message.reject(requeue=False)
            return
        result = {"id": job_id, "url": url}
        try:
            async with fetches:
                async with http.get(url) as response:
                    status, content_type = response.status, response.content_type
                    body = await response.read()
            if status != 200:
                raise Failure("http_error", f"HTTP {status}")
            image = image_size(body)
            if image is None:
                raise Failure("not_an_image", "not a PNG, JPEG, GIF or WebP")
            image_format, extension, width, height = image
            digest = hashlib.sha256(body).hexdigest()
            path = store(storage, digest, extension, body)
            result.update(status="ok", attempt=1, redelivered=message.redelivered, http_status=status,
                          content_type=content_type, format=image_format, width=width, height=height,
                          bytes=len(body), sha256=digest, location=f"file://{path}", final_url=url)
        except (aiohttp.ClientError, asyncio.TimeoutError, Failure, OSError) as error:
            code = error.code if isinstance(error, Failure) else \
                "truncated" if isinstance(error, aiohttp.ClientPayloadError) else "fetch_failed"
            result.update(status="failed", attempt=1, redelivered=message.redelivered,
                          error={"code": code, "retryable": False,
                                 "message": str(error) if isinstance(error, Failure) else type(error).__name__})
        result.update(duration_ms=(time.monotonic() - admitted) * 1e3, worker=hostname,
                      finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        payload = json.dumps(result, separators=(",", ":")).encode()  # compact, as the worker writes it
        await channel.default_exchange.publish(
            aio_pika.Message(payload, content_type="application/json",
                             delivery_mode=aio_pika.DeliveryMode.PERSISTENT, correlation_id=job_id),
            routing_key=results_queue,
        )  # returns once the broker confirmed the result
        await message.ack()

    async def consume(message):  # aio-pika runs each delivery in a task of its own
        task = asyncio.current_task()
        in_flight.add(task)
        try:
            await handle(message)
        finally:
            in_flight.discard(task)

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signo in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signo, stopping.set)
    tag = await jobs.consume(consume)
    await stopping.wait()
    # Stop taking jobs, finish those in flight (their results and acks), then close.
    await jobs.cancel(tag)
    if in_flight:
        await asyncio.wait(set(in_flight), timeout=30)
    await http.close()
    await connection.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["run"]:
        sys.exit("usage: ifw-python-peer run (configured by the environment)")
    asyncio.run(main())
