"""Item 8: recording with OTLP export on, to a real local collector.

A Rotel collector (``pip install rotel``; its wheel ships the ``rotel-agent`` binary)
listens on free 127.0.0.1 ports and forwards everything it receives to ``otlp_sink.py``,
which counts spans, so "none dropped" is checked against what really arrived. Both are
processes of their own, started and stopped here.

Measured, side by side in the benchmark's process:

- agent-visible cost per call of a recording with export on against the same recording
  with the exporting processor switched off (``active = False``), with sftrace's own
  OTLP/JSON encoder (the default for HTTP) and with the official protobuf exporter;
- spans per second delivered to the sink and spans dropped, for those recordings (from
  the start of the run until the sink has counted every span of it: bounded by how fast
  the agent makes spans), and for the export pipeline alone (the spans of a replay fed
  to the same processor in bursts that fit its queue), against the collector's own
  intake (a request body encoded beforehand, POSTed in a loop): the floor of any exporter.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sftrace
from sftrace._record import config as _config

if TYPE_CHECKING:
    from bench import Bench, Timing

HERE = Path(__file__).resolve().parent
WAIT_S = 60.0
STALL_S = 3.0


def rotel_binary() -> Path | None:
    spec = importlib.util.find_spec("rotel")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "rotel-agent"
    return binary if binary.exists() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"collector exited early with status {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after 10 s")


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Sink:
    def __init__(self, port: int) -> None:
        self.port = port

    def count(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/count", timeout=5) as reply:
            spans: int = json.loads(reply.read())["spans"]
            return spans

    def wait_for(self, expected: int) -> int:
        """Poll until ``expected`` spans arrived; return the count.

        Gives up when the count has not moved for ``STALL_S`` (the rest was dropped) or
        after ``WAIT_S`` in all.
        """
        deadline = time.monotonic() + WAIT_S
        last, moved = -1, time.monotonic()
        while True:
            got = self.count()
            now = time.monotonic()
            if got >= expected or now > deadline or now - moved > STALL_S:
                return got
            if got != last:
                last, moved = got, now
            time.sleep(0.002)


@contextlib.contextmanager
def collector(binary: Path) -> Iterator[tuple[int, Sink]]:
    """Start the sink and a Rotel collector forwarding to it; yield (OTLP/HTTP port, sink)."""
    sink_process = subprocess.Popen(
        [sys.executable, str(HERE / "otlp_sink.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    rotel: subprocess.Popen[Any] | None = None
    try:
        assert sink_process.stdout is not None
        sink_port = int(sink_process.stdout.readline().split()[1])
        http_port, grpc_port = free_port(), free_port()
        with tempfile.TemporaryDirectory(prefix="sftrace-bench-rotel-") as tmp:
            rotel = subprocess.Popen(
                [
                    str(binary),
                    "start",
                    "--otlp-http-endpoint",
                    f"127.0.0.1:{http_port}",
                    "--otlp-grpc-endpoint",
                    f"127.0.0.1:{grpc_port}",
                    "--exporter",
                    "otlp",
                    "--otlp-exporter-protocol",
                    "http",
                    "--otlp-exporter-endpoint",
                    f"http://127.0.0.1:{sink_port}",
                    "--batch-timeout",
                    "50ms",
                    "--pid-file",
                    str(Path(tmp) / "rotel.pid"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            wait_for_port(http_port, rotel)
            yield http_port, Sink(sink_port)
    finally:
        if rotel is not None:
            stop(rotel)
        stop(sink_process)


def measure(bench: Bench, repeats: int) -> dict[str, Any]:
    from bench import call_tool, timed, traced_search, us

    binary = rotel_binary()
    if binary is None:
        return {"error": "rotel is not installed: .venv/bin/pip install rotel"}
    n = bench.lengths[-1]
    arguments = bench.tool_args[n]
    off: list[Timing] = []
    on: list[Timing] = []
    official_on: list[Timing] = []
    delivered: list[float] = []
    expected = 0  # spans the recordings with export on made
    received = 0  # of those, spans the sink counted
    with collector(binary) as (http_port, sink):
        sftrace.configure(
            tracer_provider=bench.provider,
            bundle_dir=bench.workdir / "traces",
            otlp_endpoint=f"http://127.0.0.1:{http_port}",
        )
        processor = _config.get_state().otlp
        assert processor is not None
        official = _twin(bench, processor, encoder="official")
        protobuf = _twin(bench, processor, protocol_asked=True)  # sftrace's OTLP/protobuf
        try:
            for number in range(repeats):
                print(f"OTLP round {number + 1}/{repeats}...", file=sys.stderr, flush=True)
                path = bench.workdir / f"otlp-off-{number}.sftrace"

                def run(path: Path) -> None:
                    with sftrace.record("bench", output=path):
                        call_tool(traced_search, arguments)

                processor.active = False
                off.append(timed(lambda path=path: run(path)) / n)
                official.active = True
                path = bench.workdir / f"otlp-official-{number}.sftrace"
                base = sink.count()
                official_on.append(timed(lambda path=path: run(path)) / n)
                official.force_flush()
                got = sink.wait_for(base + n + 1) - base
                expected += n + 1
                received += got
                official.active = False
                processor.active = True
                path = bench.workdir / f"otlp-on-{number}.sftrace"
                base = sink.count()
                start = time.perf_counter_ns()
                on.append(timed(lambda path=path: run(path)) / n)
                processor.force_flush()
                got = sink.wait_for(base + n + 1) - base
                delivered.append(got / ((time.perf_counter_ns() - start) / 1e9))
                expected += n + 1
                received += got
            capacity, pipeline_cpu, burst_expected, burst_received, spans = _pipeline_capacity(
                bench, processor, sink, sink.count()
            )
            processor.active = False
            proto_capacity, proto_cpu, proto_expected, proto_received, _ = _pipeline_capacity(
                bench, protobuf, sink, sink.count()
            )
            protobuf.active = False
            floor = _collector_floor(http_port, sink, *_prebuilt_body(processor, spans))
            proto_floor = _collector_floor(
                http_port, sink, *_prebuilt_body(processor, spans, protobuf=True)
            )
            encoding = _encoding_costs(processor, spans, bench.bundles[max(bench.bundles)])
        finally:
            processor.active = False
            official.shutdown()
            protobuf.shutdown()
            sftrace.configure(tracer_provider=bench.provider, bundle_dir=bench.workdir / "traces")
    dropped_recording = expected - received
    dropped_pipeline = burst_expected - burst_received
    dropped_protobuf = proto_expected - proto_received
    dropped = dropped_recording + dropped_pipeline + dropped_protobuf
    import statistics

    off_ns = statistics.median(t.wall for t in off)
    on_ns = statistics.median(t.wall for t in on)
    off_cpu = statistics.median(t.cpu for t in off)
    on_cpu = statistics.median(t.cpu for t in on)
    ratio = on_ns / off_ns
    official_ns = statistics.median(t.wall for t in official_on)
    official_cpu = statistics.median(t.cpu for t in official_on)
    rows = [
        {
            "name": f"8. recording with OTLP on, per call @ {n:,}",
            "value": us(on_ns),
            "ratio": f"{ratio:.2f}x OTLP off ({us(off_ns)})",
            "cpu": f"{us(on_cpu)} = {on_cpu / off_cpu:.2f}x",
            "target": "<= 1.15x",
            "ok": ratio <= 1.15,
        },
        {
            "name": "   ... with the official protobuf exporter",
            "value": us(official_ns),
            "ratio": f"{official_ns / off_ns:.2f}x OTLP off",
            "cpu": f"{us(official_cpu)} = {official_cpu / off_cpu:.2f}x",
        },
        {
            "name": "   spans/s delivered during those recordings",
            "value": f"{statistics.median(delivered):,.0f}/s",
            "ratio": f"{dropped_recording:,} dropped of {expected:,}",
            "target": "0 dropped",
            "ok": dropped_recording == 0,
        },
        {
            "name": "   spans/s the export pipeline delivers",
            "value": f"{capacity:,.0f}/s",
            "ratio": f"{dropped_pipeline:,} dropped of {burst_expected:,}",
            "cpu": f"{us(pipeline_cpu)}/span",
            "target": ">= 20,000/s, 0 dropped",
            "ok": capacity >= 20_000 and dropped_pipeline == 0,
        },
        {
            "name": "   ... the collector's own intake (prebuilt body)",
            "value": f"{floor:,.0f}/s",
            "ratio": f"pipeline: {capacity / floor:.0%} of it",
        },
        {
            "name": "   spans/s the pipeline delivers, sftrace's OTLP/protobuf",
            "value": f"{proto_capacity:,.0f}/s",
            "ratio": f"{dropped_protobuf:,} dropped of {proto_expected:,}",
            "cpu": f"{us(proto_cpu)}/span",
        },
        {
            "name": "   ... the collector's own intake (prebuilt protobuf body)",
            "value": f"{proto_floor:,.0f}/s",
            "ratio": f"pipeline: {proto_capacity / proto_floor:.0%} of it",
        },
        *encoding,
    ]
    return {
        "per_call_on_ns": on_ns,
        "per_call_off_ns": off_ns,
        "samples_on_ns": [t.wall for t in on],
        "samples_off_ns": [t.wall for t in off],
        "samples_official_on_ns": [t.wall for t in official_on],
        "cpu_samples_on_ns": [t.cpu for t in on],
        "cpu_samples_off_ns": [t.cpu for t in off],
        "delivered_per_s_during_recording": delivered,
        "pipeline_spans_per_s": capacity,
        "pipeline_cpu_per_span_ns": pipeline_cpu,
        "collector_floor_spans_per_s": floor,
        "pipeline_protobuf_spans_per_s": proto_capacity,
        "pipeline_protobuf_cpu_per_span_ns": proto_cpu,
        "collector_floor_protobuf_spans_per_s": proto_floor,
        "spans_expected": expected + burst_expected + proto_expected,
        "spans_received": received + burst_received + proto_received,
        "dropped": dropped,
        "dropped_during_recordings": dropped_recording,
        "dropped_in_pipeline_bursts": dropped_pipeline,
        "rows": rows,
        "checks": {
            "otlp_on_vs_off": {"value": ratio, "limit": 1.15, "ok": ratio <= 1.15},
            "otlp_spans_per_s": {"value": capacity, "limit": 20_000, "ok": capacity >= 20_000},
            "otlp_dropped": {"value": dropped, "limit": 0, "ok": dropped == 0},
        },
    }


def _twin(bench: Bench, processor: Any, **changes: Any) -> Any:
    """A second exporting processor, switched off, sending to the same collector with
    other settings (the official exporter, or sftrace's OTLP/protobuf: to compare the
    encoders in the same rounds)."""
    import dataclasses

    from sftrace._export.otlp import OtlpSpanProcessor

    settings = dataclasses.replace(processor.settings, **changes)
    twin = OtlpSpanProcessor(settings, source=_config.get_state().bundle_exporter)
    twin.active = False
    bench.provider.add_span_processor(twin)
    return twin


def _pipeline_capacity(
    bench: Bench, processor: Any, sink: Sink, already: int
) -> tuple[float, float, int, int, list[Any]]:
    """Spans/s through the export pipeline alone: replay spans fed in queue-sized bursts.

    Timed from the first span fed until the sink has counted the last; each burst waits
    until the exporter has sent the one before (``force_flush``), not until the sink
    has it (Rotel holds a batch for up to its batch timeout, which would be counted
    once per burst). Also returns the CPU time of this process per span.
    """
    from bench import call_tool, traced_search

    n = 2000 if 2000 in bench.bundles else min(bench.bundles)
    processor.active = False
    with sftrace.replay(bench.bundles[n]) as session:
        call_tool(traced_search, bench.tool_args[n])
    spans = session.spans
    processor.active = True
    burst = 2000  # the export queue holds 2,048 spans
    total = 0
    cpu = time.process_time_ns()
    start = time.perf_counter_ns()
    while total < 20_000 and total < 50 * len(spans):  # tiny runs (--lengths): 50 bursts
        batch = spans[:burst]
        for span in batch:
            processor.on_end(span)
        processor.force_flush()
        total += len(batch)
    cpu = time.process_time_ns() - cpu
    received = sink.wait_for(already + total) - already
    elapsed = time.perf_counter_ns() - start
    return total / (elapsed / 1e9), cpu / total, total, received, spans


def _collector_floor(
    port: int, sink: Sink, body: bytes, count: int, content_type: str = "application/json"
) -> float:
    """Spans/s the collector and sink take in alone: ``body`` (a request of ``count``
    spans, encoded beforehand) POSTed in a loop on one connection, until the sink has
    counted them all; the most any exporter gets through this collector on this
    machine with requests of this size."""
    import http.client

    already = sink.count()
    rounds = max(1, 20_000 // count)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    start = time.perf_counter_ns()
    try:
        for _ in range(rounds):
            connection.request("POST", "/v1/traces", body, {"Content-Type": content_type})
            reply = connection.getresponse()
            reply.read()
            if reply.status != 200:
                raise RuntimeError(f"the collector answered {reply.status} to a prebuilt body")
    finally:
        connection.close()
    received = sink.wait_for(already + rounds * count) - already
    return received / ((time.perf_counter_ns() - start) / 1e9)


def _prebuilt_body(
    processor: Any, spans: list[Any], *, protobuf: bool = False
) -> tuple[bytes, int, str]:
    """A request of the export's batch size (512) made of ``spans``, as the pipeline
    sends them (sftrace's OTLP/JSON, or its OTLP/protobuf), with its content type."""
    from sftrace._export.otlp_http import encode_spans_json
    from sftrace._export.otlp_proto import encode_spans_proto

    batch, preparer = spans[:512], processor.exporter.preparer
    if protobuf:
        return encode_spans_proto(batch, preparer), len(batch), "application/x-protobuf"
    return encode_spans_json(batch, preparer), len(batch), "application/json"


def _encoding_costs(processor: Any, spans: list[Any], bundle: Any) -> list[dict[str, Any]]:
    """What the export pipeline spends per span before the network, measured alone.

    sftrace's preparation of the OTLP copy, the official OTLP/protobuf encoder (in the
    exporter's batches of 512), and sftrace's own OTLP/JSON encoder (the request body,
    preparation included): from the spans alone, and from the spans with their bundle
    lines (what live export of a recording does: the additions spliced into the line).
    """
    import orjson
    from bench import timed, us
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from sftrace._export.otlp_http import encode_spans_json
    from sftrace._export.otlp_proto import encode_spans_proto
    from sftrace._export.push import spans_of_bundle

    preparer = getattr(getattr(processor, "exporter", None), "preparer", None)
    if preparer is None:
        return []
    count = len(spans)
    prepare = timed(lambda: [preparer.prepare(span) for span in spans]) / count
    prepared = [preparer.prepare(span) for span in spans]
    batches = [prepared[k : k + 512] for k in range(0, count, 512)]
    protobuf = timed(lambda: [encode_spans(b).SerializePartialToString() for b in batches]) / count
    raw = [spans[k : k + 512] for k in range(0, count, 512)]
    as_json = timed(lambda: [encode_spans_json(b, preparer) for b in raw]) / count
    as_proto = timed(lambda: [encode_spans_proto(b, preparer) for b in raw]) / count
    recorded = spans_of_bundle(bundle)
    lines = [orjson.dumps(line) for line in bundle.spans]
    pairs = [(recorded[k : k + 512], lines[k : k + 512]) for k in range(0, len(recorded), 512)]
    spliced = timed(lambda: [encode_spans_json(s, preparer, ls) for s, ls in pairs]) / len(lines)
    return [
        {
            "name": "   8b. preparing the OTLP copy of a span (sftrace)",
            "value": us(prepare.wall),
            "cpu": us(prepare.cpu),
        },
        {
            "name": "   8c. official OTLP/protobuf encoding, per span",
            "value": us(protobuf.wall),
            "ratio": "+ 8b: the official exporter's work",
            "cpu": us(protobuf.cpu),
        },
        {
            "name": "   8d. sftrace's OTLP/JSON encoder, per span (with 8b)",
            "value": us(as_json.wall),
            "ratio": f"{(prepare.cpu + protobuf.cpu) / as_json.cpu:.1f}x less CPU than 8b+8c",
            "cpu": us(as_json.cpu),
        },
        {
            "name": "   8e. ... from the span's bundle line (live export)",
            "value": us(spliced.wall),
            "ratio": f"{(prepare.cpu + protobuf.cpu) / spliced.cpu:.1f}x less CPU than 8b+8c",
            "cpu": us(spliced.cpu),
        },
        {
            "name": "   8f. sftrace's OTLP/protobuf encoder, per span (with 8b)",
            "value": us(as_proto.wall),
            "ratio": f"{(prepare.cpu + protobuf.cpu) / as_proto.cpu:.1f}x less CPU than 8b+8c",
            "cpu": us(as_proto.cpu),
        },
    ]
