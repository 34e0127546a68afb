"""A stand-in for the OpenTelemetry Collector's ``file`` exporter, for this example only.

An OTLP/HTTP receiver on 127.0.0.1 that appends every request it gets to a file as one
line of OTLP/JSON with hex ids, the format the collector's ``file`` exporter writes and
``sftrace import`` reads. In production use ``collector-config/otelcol-contrib.yaml``.
"""

from __future__ import annotations

import base64
import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def to_json_line(request: ExportTraceServiceRequest) -> bytes:
    """The request as OTLP/JSON: protobuf's JSON mapping, but ids in hex, enums as numbers."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                for item in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if item.get(key):
                            item[key] = base64.b64decode(item[key]).hex()
    return orjson.dumps(data) + b"\n"


class FileExporterStandIn(ThreadingHTTPServer):
    """Serve with ``serve_forever()`` (in a thread); ``url`` is its OTLP/HTTP endpoint."""

    daemon_threads = True

    def __init__(self, path: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._runs: set[str] = set()  # trace ids whose run span arrived
        self._changed = threading.Condition()

    def write(self, request: ExportTraceServiceRequest) -> None:
        with self._changed:
            with open(self.path, "ab") as out:
                out.write(to_json_line(request))
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        if not span.parent_span_id:
                            self._runs.add(span.trace_id.hex())
            self._changed.notify_all()

    def wait_for_run(self, trace_id: str, timeout: float) -> bool:
        """Wait until the root span of ``trace_id`` (it ends last) has been written."""
        with self._changed:
            return self._changed.wait_for(lambda: trace_id in self._runs, timeout)


class _Handler(BaseHTTPRequestHandler):
    server: FileExporterStandIn

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.write(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        return None
