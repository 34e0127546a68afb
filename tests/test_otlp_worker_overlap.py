"""The export worker encodes its next batch while the collector reads the one it sent
(exporters with ``encode_items`` / ``post`` / ``answer``, as ``HttpSpanExporter``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sftrace._export.otlp_worker import ExportWorker, Pipelined, WorkerLimits

Items = Sequence[tuple[ReadableSpan, bytes | None]]


def finished_spans(count: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("overlap")
    for number in range(count):
        with tracer.start_as_current_span(f"span {number}"):
            pass
    return list(memory.get_finished_spans())


class StepExporter(SpanExporter):
    """Records each step; ``first_encode`` holds the first encoding until it is set;
    ``fail_first`` answers the first request with a failure."""

    def __init__(self, *, fail_first: bool = False) -> None:
        self.events: list[tuple[str, tuple[str, ...]]] = []
        self.first_encode = threading.Event()
        self.fail_first = fail_first
        self.sent: list[str] = []

    def encode_items(self, items: Items) -> bytes | SpanExportResult:
        if not self.events:
            self.first_encode.wait(10)
        names = tuple(span.name for span, _ in items)
        self.events.append(("encode", names))
        return "\n".join(names).encode()

    def post(self, body: bytes) -> None:
        self.events.append(("post", tuple(body.decode().split("\n"))))

    def answer(self, body: bytes, items: Items) -> SpanExportResult:
        names = tuple(body.decode().split("\n"))
        self.events.append(("answer", names))
        if self.fail_first and len([e for e in self.events if e[0] == "answer"]) == 1:
            return SpanExportResult.FAILURE
        self.sent.extend(names)
        return SpanExportResult.SUCCESS

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise AssertionError("a pipelined exporter is driven step by step")

    def shutdown(self) -> None:
        return None


def test_the_next_batch_is_encoded_before_the_answer_to_the_one_sent() -> None:
    exporter = StepExporter()
    assert isinstance(exporter, Pipelined)
    worker = ExportWorker(exporter, limits=WorkerLimits(max_queue=16, batch_size=4))
    spans = finished_spans(8)
    for span in spans:
        worker.put(span)
    exporter.first_encode.set()
    assert worker.flush(10)
    first = tuple(span.name for span in spans[:4])
    second = tuple(span.name for span in spans[4:])
    assert exporter.events == [
        ("encode", first),
        ("post", first),
        ("encode", second),
        ("answer", first),
        ("post", second),
        ("answer", second),
    ]
    assert worker.dropped == 0


def test_after_a_failed_answer_the_encoded_batch_waits_in_the_queue_for_the_retry() -> None:
    """The first batch fails (spans of no recorded run: counted lost); the second,
    encoded meanwhile, is not posted then but sent after the backoff."""
    exporter = StepExporter(fail_first=True)
    worker = ExportWorker(exporter, limits=WorkerLimits(max_queue=16, batch_size=4))
    spans = finished_spans(8)
    for span in spans:
        worker.put(span)
    exporter.first_encode.set()
    assert worker.flush(10)
    second = [span.name for span in spans[4:]]
    assert exporter.sent == second
    assert [e[0] for e in exporter.events].count("post") == 2
    assert worker.dropped == 4
