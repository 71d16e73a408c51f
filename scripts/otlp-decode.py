#!/usr/bin/env python3
"""Reads one OTLP ExportTraceServiceRequest in protobuf on stdin and prints it in OTLP's JSON
encoding (ids in hex, 64-bit integers as strings, enums as numbers), with opentelemetry-proto's
own generated decoder: the tests' independent reader of what the worker sends. Exit status 1 when
the bytes do not parse or an id has the wrong length."""
import json
import sys

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def any_value(value):
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": value.string_value}
    if kind == "bool_value":
        return {"boolValue": value.bool_value}
    if kind == "int_value":
        return {"intValue": str(value.int_value)}
    if kind == "double_value":
        return {"doubleValue": value.double_value}
    raise ValueError(f"unexpected AnyValue kind {kind}")


def attributes(pairs):
    return [{"key": pair.key, "value": any_value(pair.value)} for pair in pairs]


def main():
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(sys.stdin.buffer.read())
        out = {"resourceSpans": []}
        for resource_spans in request.resource_spans:
            scopes = []
            for scope_spans in resource_spans.scope_spans:
                spans = []
                for span in scope_spans.spans:
                    if len(span.trace_id) != 16 or len(span.span_id) != 8:
                        raise ValueError("trace_id must be 16 bytes and span_id 8")
                    if span.parent_span_id and len(span.parent_span_id) != 8:
                        raise ValueError("parent_span_id must be 8 bytes")
                    encoded = {
                        "traceId": span.trace_id.hex(), "spanId": span.span_id.hex(),
                        "traceState": span.trace_state, "name": span.name, "kind": span.kind,
                        "startTimeUnixNano": str(span.start_time_unix_nano),
                        "endTimeUnixNano": str(span.end_time_unix_nano),
                        "attributes": attributes(span.attributes), "flags": span.flags,
                        "events": [{"timeUnixNano": str(event.time_unix_nano), "name": event.name,
                                    "attributes": attributes(event.attributes)} for event in span.events],
                    }
                    if span.parent_span_id:
                        encoded["parentSpanId"] = span.parent_span_id.hex()
                    if span.HasField("status"):
                        encoded["status"] = {"code": span.status.code, "message": span.status.message}
                    spans.append(encoded)
                scopes.append({"scope": {"name": scope_spans.scope.name, "version": scope_spans.scope.version},
                               "spans": spans})
            out["resourceSpans"].append({"resource": {"attributes": attributes(resource_spans.resource.attributes)},
                                         "scopeSpans": scopes})
    except Exception as error:  # noqa: BLE001 - any failure means the bytes are not a valid request
        print(f"otlp-decode: {error}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
