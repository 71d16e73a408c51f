#!/usr/bin/env python3
"""A stand-in OTLP/HTTP trace collector for scripts/bench.sh (BENCH_OTLP=1): answers every
POST /v1/traces with 200 and an empty ExportTraceServiceResponse, and counts requests, bytes and
spans, so that a benchmark with tracing on measures the worker's exporting, not a collector's.
GET /stats prints the counts as one JSON line. Spans are counted by walking the protobuf's outer
messages only (resource_spans 1 > scope_spans 2 > spans 2), or with json for http/json.

    otlp-sink.py PORT        listens on 127.0.0.1:PORT until killed
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {"requests": 0, "bytes": 0, "spans": 0, "rejected": 0}
lock = threading.Lock()


def fields(data, start=0, end=None):
    """(field number, bytes) of each length-delimited field; other wire types are skipped."""
    end = len(data) if end is None else end
    i = start
    while i < end:
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = varint(data, i)
            yield number, i, i + length
            i += length
        else:
            raise ValueError(f"wire type {wire}")
    if i != end:
        raise ValueError("truncated")


def varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def count_protobuf(body):
    spans = 0
    for number, a, b in fields(body):
        if number != 1:
            continue
        for number, c, d in fields(body, a, b):
            if number == 2:
                spans += sum(1 for number, _, _ in fields(body, c, d) if number == 2)
    return spans


def count_json(body):
    request = json.loads(body)
    return sum(len(s.get("spans", [])) for r in request.get("resourceSpans", []) for s in r.get("scopeSpans", []))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind = self.headers.get("Content-Type", "")
        try:
            if self.path != "/v1/traces":
                raise ValueError(self.path)
            spans = count_json(body) if kind.startswith("application/json") else count_protobuf(body)
        except (ValueError, IndexError, AttributeError):
            with lock:
                counts["rejected"] += 1
            self.answer(400, b"", "text/plain")
            return
        with lock:
            counts["requests"] += 1
            counts["bytes"] += len(body)
            counts["spans"] += spans
        if kind.startswith("application/json"):
            self.answer(200, b"{}", "application/json")
        else:
            self.answer(200, b"", "application/x-protobuf")

    def do_GET(self):
        with lock:
            text = json.dumps(counts)
        self.answer(200, (text + "\n").encode(), "application/json")

    def answer(self, status, body, kind):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
