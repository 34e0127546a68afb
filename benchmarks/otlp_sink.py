"""A tiny OTLP/HTTP trace receiver that only counts spans, for the OTLP benchmark.

Run as its own process (so it takes no time from the process being measured)::

    python benchmarks/otlp_sink.py --port 0

It prints ``ready <port>`` once it listens on 127.0.0.1, accepts ``POST /v1/traces``
(protobuf, gzip or not) and answers ``GET /count`` with ``{"spans": n, "requests": m}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_lock = threading.Lock()
_counts = {"spans": 0, "requests": 0}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding", "") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        spans = sum(
            len(scope.spans)
            for resource in request.resource_spans
            for scope in resource.scope_spans
        )
        with _lock:
            _counts["spans"] += spans
            _counts["requests"] += 1
        self._reply(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self) -> None:
        with _lock:
            payload = json.dumps(_counts).encode()
        self._reply(payload, "application/json")

    def _reply(self, payload: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
