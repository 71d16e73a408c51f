"""Publishes image-fetch jobs with publisher confirms (docs/schemas/job.schema.json).

    pip install pika
    python producer.py https://example.com/a.png https://example.com/b.jpg
    python producer.py --amqp-url amqp://user:pass@broker:5672/%2F --reply-to my.results URL...

Prints each job's id and URL once the broker has confirmed it.
"""
import argparse
import json
import os
import uuid

import pika

parser = argparse.ArgumentParser(description="Publish image-fetch jobs.")
parser.add_argument("urls", nargs="+", help="image URLs, one job each")
parser.add_argument("--amqp-url", default=os.environ.get("AMQP_URL", "amqp://guest:guest@localhost:5672/%2F"))
parser.add_argument("--queue", default="image-fetch.jobs", help="the worker's queue.jobs")
parser.add_argument("--reply-to", help="a queue for the results instead of queue.results")
args = parser.parse_args()

connection = pika.BlockingConnection(pika.URLParameters(args.amqp_url))
channel = connection.channel()
# With confirms on, basic_publish returns once the broker has the job, and raises if it
# refused it or (mandatory) no queue took it.
channel.confirm_delivery()
for url in args.urls:
    job_id = str(uuid.uuid4())
    channel.basic_publish(
        exchange="",
        routing_key=args.queue,
        body=json.dumps({"id": job_id, "url": url}),
        properties=pika.BasicProperties(
            content_type="application/json",
            delivery_mode=pika.DeliveryMode.Persistent,
            reply_to=args.reply_to,
            correlation_id=job_id,
        ),
        mandatory=True,
    )
    print(job_id, url, flush=True)
connection.close()
