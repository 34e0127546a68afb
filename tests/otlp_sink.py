"""A small OTLP trace receiver for tests: OTLP/HTTP and OTLP/gRPC on 127.0.0.1.

It keeps every ``ExportTraceServiceRequest`` it receives, lets a test wait until some
spans arrived (no sleeps), can hold requests unanswered (a collector that hangs), and
writes what it received the way the OpenTelemetry Collector's ``file`` exporter does
(one OTLP/JSON request per line, hex ids), which is what ``sftrace import`` reads.
"""

from __future__ import annotations

import base64
import gzip
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span

Request = trace_service_pb2.ExportTraceServiceRequest


@dataclass(frozen=True)
class ReceivedSpan:
    """One received span with the resource and scope it came with."""

    span: Span
    resource: dict[str, Any]
    scope_name: str
    scope_version: str

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_span_id(self) -> str:
        return self.span.parent_span_id.hex()

    @property
    def attributes(self) -> dict[str, Any]:
        return {kv.key: any_value(kv.value) for kv in self.span.attributes}


def any_value(value: Any) -> Any:
    """A protobuf ``AnyValue`` as a Python value."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)


def request_to_file_line(request: Request) -> bytes:
    """One request as the collector's ``file`` exporter writes it (hex ids, int enums)."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return orjson.dumps(data)


def _base64_ids(request: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON request with its hex ids as the protobuf JSON mapping's base64."""
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                for item in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if item.get(key):
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return request


def _hex_ids(item: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if item.get(key):
            item[key] = base64.b64decode(item[key]).hex()


class OtlpSink:
    """Receives OTLP traces; start with ``start_http()`` and/or ``start_grpc()``."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.headers: list[dict[str, str]] = []
        self._changed = threading.Condition()
        self.hold = threading.Event()  # set: requests wait until ``release`` is set
        self.release = threading.Event()
        self.arrived = threading.Event()  # set when any request arrived
        self.accept_json = True  # False: answer OTLP/JSON with 415, as Phoenix does
        self._http: ThreadingHTTPServer | None = None
        self._grpc: grpc.Server | None = None

    # -- receiving -----------------------------------------------------------------
    def _receive(self, body: bytes, headers: dict[str, str]) -> None:
        request = Request()
        if headers.get("content-type", "").startswith("application/json"):
            json_format.ParseDict(_base64_ids(orjson.loads(body)), request)
        else:
            request.ParseFromString(body)
        self.arrived.set()
        if self.hold.is_set():
            self.release.wait(30)
        with self._changed:
            self.requests.append(request)
            self.headers.append(headers)
            self._changed.notify_all()

    def start_http(self, port: int = 0) -> int:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                is_json = (self.headers.get("Content-Type") or "").startswith("application/json")
                if is_json and not sink.accept_json:
                    self.send_response(415)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                sink._receive(body, {k.lower(): v for k, v in self.headers.items()})
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._http = server
        return int(server.server_address[1])

    def start_grpc(self) -> int:
        sink = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Request, context: Any) -> Any:
                metadata = {key: value for key, value in context.invocation_metadata()}
                sink._receive(request.SerializeToString(), metadata)
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server
        return port

    def stop(self) -> None:
        self.release.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace=None)

    # -- reading -------------------------------------------------------------------
    def spans(self) -> list[ReceivedSpan]:
        with self._changed:
            requests = list(self.requests)
        return list(_iter_spans(requests))

    def wait_for(self, ready: Callable[[list[ReceivedSpan]], bool], timeout: float = 20) -> None:
        """Wait until ``ready(spans)`` holds; fail with what arrived after ``timeout``."""
        with self._changed:
            ok = self._changed.wait_for(lambda: ready(list(_iter_spans(self.requests))), timeout)
        if not ok:
            names = [(s.trace_id, s.span.name) for s in self.spans()]
            raise AssertionError(f"spans did not arrive within {timeout}s; got {names}")

    def wait_for_trace(self, trace_id: str, count: int, timeout: float = 20) -> list[ReceivedSpan]:
        self.wait_for(lambda spans: sum(s.trace_id == trace_id for s in spans) >= count, timeout)
        return [s for s in self.spans() if s.trace_id == trace_id]

    def file_lines(self) -> list[bytes]:
        with self._changed:
            return [request_to_file_line(request) for request in self.requests]

    def clear(self) -> None:
        with self._changed:
            self.requests.clear()
            self.headers.clear()


def _iter_spans(requests: list[Request]) -> Iterator[ReceivedSpan]:
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    yield ReceivedSpan(
                        span, resource, scope_spans.scope.name, scope_spans.scope.version
                    )
