"""Reads image-fetch results (docs/schemas/result.schema.json) and prints one line per job.

    pip install pika
    python consumer.py                      # until interrupted
    python consumer.py --count 10 --timeout 60

Delivery is at-least-once, so a job can have two results: this keeps the first per id.
Exits 1 if --count results did not arrive within --timeout seconds of silence.
"""
import argparse
import json
import os

import pika

parser = argparse.ArgumentParser(description="Print image-fetch results.")
parser.add_argument("--amqp-url", default=os.environ.get("AMQP_URL", "amqp://guest:guest@localhost:5672/%2F"))
parser.add_argument("--queue", default="image-fetch.results", help="queue.results, or a producer's reply_to")
parser.add_argument("--count", type=int, default=0, help="stop after this many jobs (0: never)")
parser.add_argument("--timeout", type=float, default=None, help="give up after this many seconds of silence")
args = parser.parse_args()

connection = pika.BlockingConnection(pika.URLParameters(args.amqp_url))
channel = connection.channel()
channel.basic_qos(prefetch_count=100)
seen = set()
for method, properties, body in channel.consume(args.queue, inactivity_timeout=args.timeout):
    if method is None:
        break  # --timeout seconds without a result
    result = json.loads(body)
    if result["id"] not in seen:
        seen.add(result["id"])
        if result["status"] == "ok":
            print("ok", result["id"], result["format"], f"{result['width']}x{result['height']}",
                  result.get("location", "-"), flush=True)
        elif "error" in result:  # failed: the only status with an error
            error = result["error"]
            print("failed", result["id"], error["code"], "retryable" if error["retryable"] else "final", flush=True)
        else:  # not_modified (a refetch found the image unchanged; nothing stored), or a status added later
            print(result["status"], result["id"], result.get("http_status", "-"), flush=True)
    channel.basic_ack(method.delivery_tag)  # after printing: a crash before here re-reads it
    if args.count and len(seen) >= args.count:
        break
channel.cancel()
connection.close()
raise SystemExit(0 if not args.count or len(seen) >= args.count else 1)
