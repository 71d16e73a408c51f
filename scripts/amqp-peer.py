#!/usr/bin/env python3
"""An AMQP client independent of the worker's own code (pika), for the integration tests.

It moves header tables as raw wire bytes, so the tests compare bytes, not what a decoder made of
them (pika's own decoder turns floats into integers, for one).

  amqp-peer.py publish URL QUEUE BODY_FILE HEADERS_HEX   publish the file's bytes persistent, with the raw header table
                                                     (its 4-byte length included), wait for the confirm
  amqp-peer.py get URL QUEUE                        take one message (acked); print JSON
                                                     {"headers_hex": ..., "body_hex": ...}, or {} if empty
"""
import json
import sys

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


def main(argv):
    command, url, queue = argv[1], argv[2], argv[3]
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    if command == "publish":
        with open(argv[4], "rb") as file:
            body = file.read()
        headers = bytes.fromhex(argv[5])
        pika.data.encode_table = _encode_raw_table
        pika.spec.data.encode_table = _encode_raw_table
        channel.confirm_delivery()
        channel.basic_publish("", queue, body, pika.BasicProperties(
            content_type="application/json", delivery_mode=2, headers=RawTable(headers)), mandatory=True)
    elif command == "get":
        pika.spec.data.decode_table = _capture_decode_table
        _raw_tables.clear()
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            print("{}")
        else:
            # The last table decoded for the header frame is the properties' headers.
            print(json.dumps({"headers_hex": _raw_tables[0].hex() if properties.headers is not None else "",
                              "body_hex": body.hex()}))
    else:
        sys.exit("unknown command " + command)
    connection.close()


if __name__ == "__main__":
    main(sys.argv)
