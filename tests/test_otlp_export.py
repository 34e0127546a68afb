"""The OTLP copy of spans (OpenInference, payload cap, content stripping) and a collector
that is down or hangs: the agent never sees it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
import sftrace
from otlp_fixtures import free_port
from otlp_sink import OtlpSink
from sftrace import load_bundle, record, trace_tool
from sftrace._export.enrich import CONTENT_ATTRIBUTES, SpanPreparer, truncate_utf8
from sftrace._export.otlp import EnrichingSpanExporter
from sftrace._record.config import get_state

HTTP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SFTRACE_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)


@trace_tool
def long_report(topic: str) -> str:
    return f"{topic}: " + "é" * 300  # 2-byte characters: cuts must respect them


def enriched(spans: Sequence[ReadableSpan], **options: Any) -> dict[str, ReadableSpan]:
    """The OTLP copies of ``spans`` keyed by span name, through an in-memory exporter."""
    memory = InMemorySpanExporter()
    exporter = EnrichingSpanExporter(memory, SpanPreparer(**options))
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    return {span.name: span for span in memory.get_finished_spans()}


def test_openinference_attributes_mark_agent_tool_and_llm_spans(
    spans: InMemorySpanExporter,
) -> None:
    """Run, tool and LLM spans get openinference.span.kind AGENT/TOOL/LLM, input/output
    values, the model and token counts; the recorded spans are not changed."""
    with record("oi-agent", run_input={"task": "fly"}) as session:
        session.set_output(agents.booking_agent())
    copies = enriched(spans.get_finished_spans())
    run = copies["invoke_agent oi-agent"].attributes or {}
    tool = copies["execute_tool flight_search"].attributes or {}
    llm = copies["chat fake-1"].attributes or {}
    assert run["openinference.span.kind"] == "AGENT"
    assert (run["input.value"], run["input.mime_type"]) == ('{"task":"fly"}', "application/json")
    assert run["output.value"] == run["sftrace.run.output"]
    assert tool["openinference.span.kind"] == "TOOL"
    assert tool["tool.name"] == "flight_search"
    assert tool["input.value"] == tool["sftrace.input"] == tool["gen_ai.tool.call.arguments"]
    assert tool["output.value"] == tool["sftrace.output"]
    assert llm["openinference.span.kind"] == "LLM"
    assert (llm["llm.model_name"], llm["llm.provider"]) == ("fake-1-2025", "fake")
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"]) == (7, 5)
    assert llm["llm.token_count.total"] == 12
    assert all(
        "openinference.span.kind" not in (span.attributes or {})
        for span in spans.get_finished_spans()
    )
    bundle_line = load_bundle(session.path or "").spans[1]
    assert "openinference.span.kind" not in {item["key"] for item in bundle_line["attributes"]}


def test_payloads_over_the_cap_are_cut_with_a_marker_and_kept_whole_in_the_bundle(
    spans: InMemorySpanExporter,
) -> None:
    """max_payload_bytes cuts long strings on a character boundary, marks them visibly and
    lists them in sftrace.truncated; the bundle still holds the whole value."""
    with record("big") as session:
        whole = long_report("news")
    copy = enriched(spans.get_finished_spans(), max_payload_bytes=101)["execute_tool long_report"]
    attributes = copy.attributes or {}
    output = attributes["sftrace.output"]
    assert isinstance(output, str)
    kept, marker = output.split("…[truncated by sftrace: ")
    assert len(kept.encode()) <= 101
    recorded = load_bundle(session.path or "").calls[0]
    assert recorded.output == whole
    assert marker == f"{len((recorded.output_json or '').encode())} bytes in full]"
    assert set(attributes["sftrace.truncated"]) >= {"sftrace.output", "output.value"}


def test_the_cap_never_cuts_names_and_ids(spans: InMemorySpanExporter) -> None:
    """Run ids, error types, tool and model names are never cut, however small the cap:
    a run or an error cut short could not be told from another."""

    def fails() -> None:
        agents.booking_agent()
        raise ValueError("x" * 100)

    with pytest.raises(ValueError, match="xxx"), record("a-rather-long-agent-name") as session:
        fails()
    copies = enriched(spans.get_finished_spans(), max_payload_bytes=8)
    run = copies["invoke_agent a-rather-long-agent-name"].attributes or {}
    assert run["sftrace.run_id"] == session.run_id
    assert run["sftrace.error.type"] == "ValueError"
    assert "truncated by sftrace" in str(run["sftrace.error.message"])
    tool = copies["execute_tool flight_search"].attributes or {}
    assert (tool["gen_ai.tool.name"], tool["tool.name"]) == ("flight_search", "flight_search")
    assert "sftrace.run_id" not in run["sftrace.truncated"]


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [("short", 5, None), ("ab", 1, "a…[truncated by sftrace: 2 bytes in full]")],
)
def test_truncate_utf8(value: str, limit: int, expected: str | None) -> None:
    """Values that fit are left alone (None); others keep ``limit`` bytes plus a marker."""
    assert truncate_utf8(value, limit) == expected


def test_capture_content_false_strips_inputs_and_outputs_from_otlp_only(
    spans: InMemorySpanExporter,
) -> None:
    """capture_content=False sends no inputs, outputs or state values over OTLP and says so;
    the bundle keeps them all."""
    with record("private", run_input="secret task") as session:
        session.record_state_change(key="cart", before=[], after=["secret item"])
        session.set_output(agents.booking_agent())
    copies = enriched(spans.get_finished_spans(), capture_content=False)
    content = {
        "sftrace.input",
        "sftrace.output",
        "sftrace.input.sha256",  # a digest of a short value confirms a guess of it
        "sftrace.output.sha256",
        "sftrace.run.input",
        "sftrace.run.output",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "input.value",
        "output.value",
    }
    for copy in copies.values():
        attributes = copy.attributes or {}
        assert not content & attributes.keys()
        assert attributes["sftrace.content_omitted"] is True
        for event in copy.events:
            assert (
                not {"sftrace.state.before", "sftrace.state.after"}
                & (event.attributes or {}).keys()
            )
    assert "secret" not in repr([dict(c.attributes or {}) for c in copies.values()])
    bundle = load_bundle(session.path or "")
    assert bundle.run_input == "secret task"
    assert bundle.state_changes[0].after == ["secret item"]


class OrderRefused(Exception):
    def __init__(self, order: str) -> None:
        super().__init__(f"refused {order}")
        self.order = order


def test_capture_content_false_strips_the_values_an_exception_carries(
    spans: InMemorySpanExporter,
) -> None:
    """An exception's args, attributes and causes hold values like an input does (here a
    private order id): left out of OTLP with the inputs and outputs; its type stays."""

    @trace_tool
    def refund(order: str) -> None:
        try:
            raise KeyError(order)
        except KeyError as exc:
            raise OrderRefused(order) from exc

    with record("private"), contextlib.suppress(OrderRefused):
        refund("order-PRIVATE-77")
    copies = enriched(spans.get_finished_spans(), capture_content=False)
    call = next(c for c in copies.values() if (c.attributes or {}).get("sftrace.kind") == "tool")
    attributes = dict(call.attributes or {})
    assert attributes["sftrace.error.type"].endswith("OrderRefused")
    for key in ("sftrace.error.args", "sftrace.error.fields", "sftrace.error.cause"):
        assert key not in attributes
    assert "order-PRIVATE-77" not in repr(
        {k: v for k, v in attributes.items() if k != "sftrace.error.message"}
    )
    assert {"sftrace.output.text", "sftrace.error.body"} <= CONTENT_ATTRIBUTES


class Exploding(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise RuntimeError("exporter bug")

    def shutdown(self) -> None:
        raise RuntimeError("shutdown bug")


def test_the_enriching_exporter_never_raises(spans: InMemorySpanExporter) -> None:
    """An inner exporter that raises gives FAILURE; shutdown is idempotent and safe; after
    it, exports fail without reaching the inner exporter."""
    with record("boom"):
        agents.booking_agent()
    inner = Exploding()
    exporter = EnrichingSpanExporter(inner)
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE
    exporter.shutdown()
    exporter.shutdown()
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE
    assert inner.calls == 1
    assert exporter.force_flush() is True


def test_a_failing_collector_is_logged_once_per_cause(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """Repeated failures of sftrace's export log once; the application's own exporter,
    on the same logger, still logs every failure."""
    with record("logged"):
        agents.booking_agent()
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    ours = EnrichingSpanExporter(OTLPSpanExporter(endpoint=url, timeout=0.3))
    theirs = OTLPSpanExporter(endpoint=url, timeout=0.3)
    finished = spans.get_finished_spans()
    with caplog.at_level(logging.WARNING, logger=HTTP_LOGGER):
        results = [ours.export(finished) for _ in range(3)]
        ours_logged = [r for r in caplog.records if r.name == HTTP_LOGGER]
        caplog.clear()
        for _ in range(2):
            theirs.export(finished)
        theirs_logged = [r for r in caplog.records if r.name == HTTP_LOGGER]
    ours.shutdown()
    theirs.shutdown()
    assert results == [SpanExportResult.FAILURE] * 3
    assert len(ours_logged) == 1
    assert "repeats are not logged" in ours_logged[0].getMessage()
    assert len(theirs_logged) == 2


def test_collector_down_recording_succeeds_and_the_bundle_is_complete(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Nothing listens at the endpoint: the agent sees no error, the bundle is complete,
    and shutting down gives up after the export timeout."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
    sftrace.configure(
        tracer_provider=provider,
        bundle_dir=tmp_path / "down",
        otlp_endpoint=f"http://127.0.0.1:{free_port()}",
    )
    with record("down-agent", run_input="go") as session:
        session.set_output(agents.booking_agent())
    bundle = load_bundle(session.path or "", verify_integrity=True)
    assert [call.name for call in bundle.calls] == ["flight_search", "fake-1", "book"]
    assert bundle.status == "completed"
    assert provider.force_flush(timeout_millis=100) in (True, False)  # returns, never raises
    started = time.monotonic()
    provider.shutdown()
    assert time.monotonic() - started < 0.5 + 3.0  # the timeout, plus slack for a busy CI


def test_a_hanging_collector_never_blocks_the_agent_and_shutdown_is_bounded(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While an export hangs, further runs record at once; shutdown returns after the
    export timeout, though many batches are still queued."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")  # each span its own request
    sink = OtlpSink()
    sink.hold.set()
    port = sink.start_http()
    try:
        sftrace.configure(tracer_provider=provider, otlp_endpoint=f"http://127.0.0.1:{port}")
        with record("first"):
            agents.booking_agent()
        assert sink.arrived.wait(10), "the first export never reached the collector"
        with record("second") as session:  # recorded while the collector holds the export
            agents.booking_agent()
        assert len(load_bundle(session.path or "", verify_integrity=True).calls) == 3
        assert sink.requests == []  # nothing was answered: the agent did not wait for it
        processor = get_state().otlp
        assert processor is not None
        started = time.monotonic()
        provider.shutdown()  # without a bound: ~1 s per queued span, 7 spans
        elapsed = time.monotonic() - started
    finally:
        sink.stop()
    assert elapsed < processor.settings.timeout_s + 3.0
    assert processor.exporter.export([]) is SpanExportResult.FAILURE  # closed, no network
