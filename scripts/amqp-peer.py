#!/usr/bin/env python3
"""An AMQP client independent of the worker's own code (pika), for the integration tests.

It moves header tables as raw wire bytes, so the tests compare bytes, not what a decoder made of
them (pika's own decoder turns floats into integers, for one).

  amqp-peer.py publish URL QUEUE BODY_FILE HEADERS_HEX [TTL [PROPERTIES_JSON]]
                                                     publish the file's bytes persistent, with the raw header table
                                                     (its 4-byte length included; "@FILE": the hex is in
                                                     FILE), wait for the confirm; TTL ("" for none) is the
                                                     expiration, PROPERTIES_JSON more of pika's
                                                     BasicProperties by name (type, app_id, ...; "hex:…"
                                                     for raw bytes)
  amqp-peer.py get URL QUEUE                        take one message (acked); print JSON
                                                     {"headers_hex": ..., "body_hex": ..., "properties": {...}},
                                                     or {} if empty; "properties" holds the string-valued
                                                     basic properties that are set ("hex:…" when not UTF-8)
  amqp-peer.py depth URL QUEUE                      print the queue's ready count (passive declare), or
                                                     -1 when the queue does not exist
  amqp-peer.py collect URLS QUEUE OUT_FILE          consume QUEUE until SIGTERM, appending each body to
                                                     OUT_FILE as one base64 line (flushed before the ack);
                                                     URLS is comma-separated, tried in turn, and the
                                                     consumer reconnects after a lost connection
  amqp-peer.py proxy PORT UPSTREAM_HOST:PORT NTH [MODE]
                                                     a TCP proxy on 127.0.0.1:PORT to the broker that
                                                     breaks the protocol once: on the first connection
                                                     that gets that far, the NTH basic.deliver gets the tag of the one
                                                     before (MODE "tag", the default: a tag that does not increase),
                                                     or arrives without its content (MODE "cut": the next
                                                     basic.deliver comes before its header and body); later
                                                     connections pass
                                                     untouched. Prints "ready" when it listens.
"""
import base64
import json
import signal
import socket
import struct
import sys
import threading
import time

import pika
import pika.data
import pika.spec

_raw_tables = []
_decode_table = pika.data.decode_table


def _capture_decode_table(encoded, offset):
    # The properties' header table is the one decoded at the top level: keep its bytes.
    length = int.from_bytes(encoded[offset:offset + 4], "big")
    _raw_tables.append(bytes(encoded[offset:offset + 4 + length]))
    return _decode_table(encoded, offset)


def _text(value):
    # pika gives a short string that is not UTF-8 as bytes: "hex:…", as publish takes it.
    return "hex:" + value.hex() if isinstance(value, bytes) else value


class RawTable(dict):
    """A header table given as wire bytes; encoded as they are."""

    def __init__(self, raw):
        super().__init__({"raw": True})
        self.raw = raw


_encode_table = pika.data.encode_table


def _encode_raw_table(pieces, table):
    if isinstance(table, RawTable):
        pieces.append(table.raw)
        return len(table.raw)
    return _encode_table(pieces, table)


def collect(urls, queue, out_path):
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    parameters = [pika.URLParameters(url) for url in urls.split(",")]
    with open(out_path, "ab") as out:
        while not stopping:
            try:
                connection = pika.BlockingConnection(parameters)
                channel = connection.channel()
                channel.basic_qos(prefetch_count=500)
                for method, _, body in channel.consume(queue, inactivity_timeout=0.2):
                    if stopping:
                        break
                    if method is None:
                        continue
                    out.write(base64.b64encode(body) + b"\n")
                    out.flush()
                    channel.basic_ack(method.delivery_tag)
                try:
                    connection.close()
                except pika.exceptions.AMQPError:
                    pass
            except pika.exceptions.AMQPError:
                # A lost node, a restart, or a queue not declared yet: try again.
                time.sleep(0.2)


def _pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    _shut_down(source, sink)


def _shut_down(*ends):
    """Ends both directions of each socket, so that the other copier's recv returns too."""
    for end in ends:
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


_tampered = []


def _tamper(source, sink, nth, mode):
    """Copies the broker's frames, giving the NTH basic.deliver the tag of the one before ("tag"),
    dropping its content frames ("cut"), or dropping every publisher confirm from then on
    ("noconfirm": a broker that stays alive but confirms nothing). "noconfirm-dead" drops, on the
    first connection that gets one, every publisher confirm on channel 3, where the worker
    publishes the dead copies of too-large jobs. "closedepth" answers the first passive declare on
    channel 2 (the worker's depth sample) with connection.close, and drops everything the broker
    sends on that connection after it, as a broker waiting for close-ok sends nothing more."""
    buffer = b""
    delivers = 0
    dropping_confirms = False
    dropping_dead_confirms = False
    previous = b"\x00" * 7 + b"\x01"
    cutting = None  # the channel whose content frames are being dropped
    closed = False  # "closedepth": the connection.close was sent
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            buffer += data
            out = b""
            while len(buffer) >= 7:
                frame_type, _, size = struct.unpack(">BHI", buffer[:7])
                if len(buffer) < 8 + size:
                    break
                frame = bytearray(buffer[:8 + size])
                buffer = buffer[8 + size:]
                channel = struct.unpack(">H", frame[1:3])[0]
                if closed:
                    continue
                if mode == "closedepth" and channel == 2 and frame[7:11] == b"\x00\x32\x00\x0b":
                    if not _tampered:  # queue.declare-ok
                        _tampered.append(True)
                        closed = True
                        text = b"CONNECTION_FORCED - closed by the test proxy"
                        payload = struct.pack(">HHHB", 10, 50, 320, len(text)) + text + struct.pack(">HH", 0, 0)
                        out += struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce"
                        continue
                if frame_type == 1 and channel == cutting:
                    cutting = None
                if frame_type in (2, 3) and channel == cutting:
                    continue  # the cut delivery's header and body
                confirm = frame_type == 1 and frame[7:11] in (b"\x00\x3c\x00\x50", b"\x00\x3c\x00\x78")
                if dropping_confirms and confirm:
                    continue  # basic.ack, basic.nack: from the broker, only publisher confirms
                if mode == "noconfirm-dead" and confirm and channel == 3:
                    if not _tampered:
                        _tampered.append(True)
                        dropping_dead_confirms = True
                    if dropping_dead_confirms:
                        continue
                if frame_type == 1 and frame[7:11] == b"\x00\x3c\x00\x3c":  # basic.deliver
                    delivers += 1
                    tag_at = 11 + 1 + frame[11]  # after the consumer tag (a short string)
                    if delivers == nth and not _tampered and mode in ("tag", "cut", "noconfirm"):
                        _tampered.append(True)
                        if mode == "cut":
                            cutting = channel
                        elif mode == "noconfirm":
                            dropping_confirms = True
                        elif mode == "tag":
                            frame[tag_at:tag_at + 8] = previous
                    previous = bytes(frame[tag_at:tag_at + 8])
                out += bytes(frame)
            if out:
                sink.sendall(out)
    except OSError:
        pass
    _shut_down(source, sink)


def proxy(port, upstream, nth, mode):
    host, upstream_port = upstream.rsplit(":", 1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, int(upstream_port)))
        # Every connection is watched until one delivery has been tampered with (a probe that
        # only checks the port is a connection too); the later ones pass untouched.
        inbound = threading.Thread(target=_tamper, args=(server, client, nth, mode), daemon=True)
        inbound.start()
        threading.Thread(target=_pipe, args=(client, server), daemon=True).start()


def main(argv):
    # A child of the test process inherits its blocked signals: without this, SIGTERM stays pending.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    command, url, queue = argv[1], argv[2], argv[3]
    if command == "proxy":
        proxy(int(url), queue, int(argv[4]), argv[5] if len(argv) > 5 else "tag")
        return
    if command == "collect":
        collect(url, queue, argv[4])
        return
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    if command == "publish":
        with open(argv[4], "rb") as file:
            body = file.read()
        # "@FILE": the hex is in FILE (a table near frame_max is over the argument limit).
        if argv[5].startswith("@"):
            with open(argv[5][1:]) as file:
                headers = bytes.fromhex(file.read().strip())
        else:
            headers = bytes.fromhex(argv[5])
        pika.data.encode_table = _encode_raw_table
        pika.spec.data.encode_table = _encode_raw_table
        channel.confirm_delivery()
        # An optional sixth argument: the message's TTL in milliseconds (`expiration`); a seventh,
        # more properties as JSON.
        extra = json.loads(argv[7]) if len(argv) > 7 else {}
        # "hex:…" gives a short-string property as raw bytes (pika sends bytes as they are).
        extra = {name: bytes.fromhex(value[4:]) if isinstance(value, str) and value.startswith("hex:") else value
                 for name, value in extra.items()}
        channel.basic_publish("", queue, body, pika.BasicProperties(
            content_type="application/json", delivery_mode=2, headers=RawTable(headers),
            expiration=argv[6] if len(argv) > 6 and argv[6] else None, **extra), mandatory=True)
    elif command == "get":
        pika.spec.data.decode_table = _capture_decode_table
        _raw_tables.clear()
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            print("{}")
        else:
            # The last table decoded for the header frame is the properties' headers.
            names = ("content_type", "content_encoding", "correlation_id", "reply_to", "expiration",
                     "message_id", "type", "user_id", "app_id", "cluster_id")
            print(json.dumps({"headers_hex": _raw_tables[0].hex() if properties.headers is not None else "",
                              "body_hex": body.hex(),
                              "properties": {name: _text(getattr(properties, name)) for name in names
                                             if getattr(properties, name) is not None}}))
    elif command == "depth":
        try:
            print(channel.queue_declare(queue, passive=True).method.message_count)
        except pika.exceptions.ChannelClosedByBroker:
            print(-1)
            return
    else:
        sys.exit("unknown command " + command)
    connection.close()


if __name__ == "__main__":
    # pika decodes a nested header a level at a time, and a frame holds 26,000 levels (Python 3.11
    # keeps Python-to-Python calls off the C stack).
    sys.setrecursionlimit(400_000)
    main(sys.argv)
