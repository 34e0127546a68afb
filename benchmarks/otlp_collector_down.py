"""What a collector that is down or hangs costs the agent (and the process at exit).

Run from the repository root::

    .venv/bin/python benchmarks/otlp_collector_down.py [--runs 300]

Records the same small run (3 tool calls and 1 LLM call) many times with OTLP export
off, to a collector that answers, to a port where nothing listens, and to a collector
that accepts requests and never answers. Prints the median wall time and CPU time (of
the agent's thread) of one recorded run, what the agent sees, and how long the
provider's shutdown took, what the process sees at exit: bounded by the export timeout,
here ``OTEL_EXPORTER_OTLP_TIMEOUT=2``. Cases take turns (``--rounds``) to share noise.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import sftrace

RELEASE = threading.Event()


@sftrace.trace_tool
def lookup(key: str) -> dict[str, Any]:
    return {"key": key, "value": key.upper() * 20}


def agent() -> str:
    for key in ("a", "b", "c"):
        lookup(key)
    reply = sftrace.llm_request(
        provider="fake",
        model="m-1",
        input={"prompt": "summarise"},
        call=lambda: {"text": "ok", "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
    )
    return str(reply["text"])


class Handler(BaseHTTPRequestHandler):
    answer = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.answer:
            RELEASE.wait(60)  # a collector that hangs
            return
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def server(answer: bool) -> str:
    handler = type("H", (Handler,), {"answer": answer})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def measure(endpoint: str | None, runs: int, workdir: Path) -> tuple[float, float, float]:
    """Median wall time and CPU time (of the agent's thread) per run, and shutdown time."""
    provider = TracerProvider()
    sftrace.configure(tracer_provider=provider, bundle_dir=workdir, otlp_endpoint=endpoint)
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.thread_time()
        with sftrace.record("bench") as session:
            session.set_output(agent())
        walls.append(time.perf_counter() - start)
        cpus.append(time.thread_time() - cpu)
    start = time.perf_counter()
    provider.shutdown()
    return statistics.median(walls), statistics.median(cpus), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300, help="recorded runs per case")
    parser.add_argument("--rounds", type=int, default=10, help="cases alternate this often")
    args = parser.parse_args()
    os.environ["OTEL_EXPORTER_OTLP_TIMEOUT"] = "2"  # read by configure()
    cases = {
        "OTLP off": None,
        "collector up": server(answer=True),
        "collector down (nothing listens)": closed_port(),
        "collector hangs (never answers)": server(answer=False),
    }
    medians: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    shutdowns: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    with tempfile.TemporaryDirectory(prefix="sftrace-bench-down-") as tmp:
        # The machine is shared: cases take turns, so background load hits them all alike.
        for number in range(args.rounds):
            for name in names[number % len(names) :] + names[: number % len(names)]:
                workdir = Path(tmp) / f"{name.split()[1]}-{number}"
                median, cpu_median, shutdown = measure(
                    cases[name], args.runs // args.rounds, workdir
                )
                medians[name].append(median)
                cpu[name].append(cpu_median)
                shutdowns[name].append(shutdown)
    RELEASE.set()
    print(f"{'case':<36} {'run (wall)':>12} {'run (CPU)':>11} {'max shutdown':>13}")
    for name in names:
        wall, used = statistics.median(medians[name]), statistics.median(cpu[name])
        print(
            f"{name:<36} {wall * 1e3:>10.3f}ms {used * 1e3:>9.3f}ms {max(shutdowns[name]):>12.2f}s"
        )


if __name__ == "__main__":
    main()
