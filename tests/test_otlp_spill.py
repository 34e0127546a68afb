"""sftrace's OTLP/JSON encoder against the official one, and the export worker's spill:
a tiny queue or a collector that is down loses no span of a recorded run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
import sftrace
from otlp_fixtures import free_port, sink_url
from otlp_sink import OtlpSink
from sftrace import load_bundle, record, trace_tool
from sftrace._export.enrich import SpanPreparer
from sftrace._export.otlp import make_exporter
from sftrace._export.otlp_http import HttpSpanExporter, encode_spans_json
from sftrace._export.otlp_settings import OtlpSettings, official_exporter
from sftrace._export.push import push_bundles
from sftrace._export.unsent import read_unsent, unsent_path
from sftrace._record.config import get_state

pytestmark = pytest.mark.usefixtures("clean_otlp_env")


def url(sink: OtlpSink) -> str:
    return sink_url(sink, "/v1/traces")


@trace_tool
def step(number: int) -> dict[str, Any]:
    return {"step": number, "text": "ok " * 20}


def received(sink: OtlpSink) -> dict[str, dict[str, Any]]:
    return {span.span_id: span.attributes for span in sink.spans()}


@pytest.mark.parametrize("options", [{}, {"capture_content": False, "max_payload_bytes": 40}])
def test_both_encoders_deliver_the_same_otlp_copy(
    sink: OtlpSink, spans: InMemorySpanExporter, options: dict[str, Any]
) -> None:
    """sftrace's OTLP/JSON (from the spans, or spliced into their bundle lines) and the
    official protobuf exporter deliver the same spans with the same attributes
    (OpenInference, cap marker, content stripping) and resource."""
    with record("encoders") as session:
        agents.booking_agent()
    finished = spans.get_finished_spans()
    by_id = {line["spanId"]: orjson.dumps(line) for line in load_bundle(session.path or "").spans}
    lines = [by_id[f"{span.context.span_id:016x}"] for span in finished if span.context]
    results = {}
    for encoder in ("sftrace", "sftrace-lines", "official"):
        sink.clear()
        settings = OtlpSettings(
            endpoint=url(sink), protocol="http/protobuf", encoder=encoder.split("-")[0]
        )
        exporter = make_exporter(settings, SpanPreparer(**options))
        if encoder == "sftrace-lines":
            assert isinstance(exporter, HttpSpanExporter)
            result = exporter.export_items(list(zip(finished, lines, strict=True)))
        else:
            result = exporter.export(finished)
        assert result is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert sink.headers[0]["content-type"].startswith(
            "application/x-protobuf" if encoder == "official" else "application/json"
        )
        results[encoder] = ({s.span_id: s for s in sink.spans()}, received(sink))
    official = results.pop("official")
    assert len(official[1]) == len(finished) == 4
    for ours in results.values():
        assert ours[1] == official[1]
        for span_id, span in ours[0].items():
            theirs = official[0][span_id]
            assert _sorted_attributes(span.span) == _sorted_attributes(theirs.span)
            assert (span.resource, span.scope_name) == (theirs.resource, theirs.scope_name)
    if options:
        assert all("sftrace.input" not in attributes for attributes in official[1].values())


def _sorted_attributes(span: Any) -> Any:
    """A received span with its attributes in key order (a spliced line lists what export
    adds first) and an unset status absent (bundle lines leave it out)."""
    copy = type(span)()
    copy.CopyFrom(span)
    if copy.status == type(copy.status)():  # an empty status is the unset default
        copy.ClearField("status")
    ordered = sorted(copy.attributes, key=lambda kv: kv.key)
    del copy.attributes[:]
    copy.attributes.extend(ordered)
    return copy


def test_gzip_and_headers_reach_the_collector(
    sink: OtlpSink, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_EXPORTER_OTLP_COMPRESSION=gzip and the headers apply to sftrace's encoder."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    with record("gzip"):
        agents.booking_agent()
    settings = OtlpSettings(
        endpoint=url(sink),
        protocol="http/protobuf",
        headers=(("authorization", "Bearer t"),),
        compression="gzip",
    )
    exporter = make_exporter(settings, SpanPreparer())
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert sink.headers[0]["content-encoding"] == "gzip"
    assert sink.headers[0]["authorization"] == "Bearer t"
    assert len(sink.spans()) == 4


@pytest.mark.parametrize(
    ("encoder", "protocol", "delivered"),
    [("auto", "http/protobuf", 4), ("sftrace", "http/protobuf", 4), ("auto", "http/json", 0)],
)
def test_a_collector_without_otlp_json_gets_protobuf(
    sink: OtlpSink,
    spans: InMemorySpanExporter,
    encoder: str,
    protocol: str,
    delivered: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A collector answering 415 to OTLP/JSON (Phoenix) gets sftrace's OTLP/protobuf from
    then on; when OTLP/JSON was asked for (http/json), the export fails instead (logged)."""
    sink.accept_json = False
    with record("no-json"):
        agents.booking_agent()
    settings = OtlpSettings(endpoint=url(sink), protocol=protocol, encoder=encoder)
    exporter = make_exporter(settings, SpanPreparer(), log_once=False)
    finished = spans.get_finished_spans()
    results = [exporter.export(finished[:2]), exporter.export(finished[2:])]
    exporter.shutdown()
    assert len(sink.spans()) == delivered
    if delivered:
        assert results == [SpanExportResult.SUCCESS] * 2
        assert "does not accept OTLP/JSON" in caplog.text
        assert sink.headers[-1]["content-type"] == "application/x-protobuf"
        assert sink.headers[-1]["user-agent"].startswith("sftrace/")  # not the official one
    else:
        assert results == [SpanExportResult.FAILURE] * 2
        assert "HTTP 415" in caplog.text


@pytest.mark.parametrize(("asked", "content_type"), [(True, "x-protobuf"), (False, "json")])
def test_http_protobuf_asked_for_is_sent_by_sftrace_from_the_start(
    sink: OtlpSink, spans: InMemorySpanExporter, asked: bool, content_type: str
) -> None:
    """otlp_protocol='http/protobuf' (or the variable) set: sftrace's OTLP/protobuf from
    the first request; the default protocol: OTLP/JSON (cheaper for the agent)."""
    with record("protobuf"):
        agents.booking_agent()
    settings = OtlpSettings(endpoint=url(sink), protocol="http/protobuf", protocol_asked=asked)
    exporter = make_exporter(settings, SpanPreparer(), log_once=False)
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert [headers["content-type"] for headers in sink.headers] == [f"application/{content_type}"]
    assert len(sink.spans()) == 4


def test_a_batch_encoded_before_the_first_415_goes_through_the_same_fallback(
    sink: OtlpSink, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker encodes a batch before the answer to the one sent (post, encode,
    answer): when that answer is a 415, the next batch, already OTLP/JSON, is sent
    through the fallback made for the first, which is made (and logged) once."""
    sink.accept_json = False
    with record("no-json"):
        agents.booking_agent()
    settings = OtlpSettings(endpoint=url(sink), protocol="http/protobuf", encoder="auto")
    made: list[SpanExporter] = []

    def fallback() -> SpanExporter:
        made.append(official_exporter(settings))
        return made[-1]

    exporter = HttpSpanExporter(settings, SpanPreparer(), log_once=False, fallback=fallback)
    finished = spans.get_finished_spans()
    first, second = [(span, None) for span in finished[:2]], [(span, None) for span in finished[2:]]
    first_body = exporter.encode_items(first)
    assert isinstance(first_body, bytes)
    exporter.post(first_body)
    second_body = exporter.encode_items(second)
    assert isinstance(second_body, bytes)
    results = [exporter.answer(first_body, first)]
    exporter.post(second_body)
    results.append(exporter.answer(second_body, second))
    exporter.shutdown()
    assert results == [SpanExportResult.SUCCESS] * 2
    assert len(sink.spans()) == len(finished)
    assert len(made) == 1
    assert caplog.text.count("does not accept OTLP/JSON") == 1


def test_the_request_is_the_bundle_mapping_of_the_otlp_copy(
    spans: InMemorySpanExporter,
) -> None:
    """Each encoded span is the OTLP/JSON mapping of its OTLP copy (hex ids, the
    enrichment), grouped under its resource and scope."""
    with record("mapping"):
        agents.booking_agent()
    finished = spans.get_finished_spans()
    request = orjson.loads(encode_spans_json(finished, SpanPreparer()))
    (resource_spans,) = request["resourceSpans"]
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"]["name"] == "sftrace"
    encoded = scope_spans["spans"]
    assert [s["spanId"] for s in encoded] == [f"{s.context.span_id:016x}" for s in finished]
    kinds = {
        a["value"]["stringValue"]
        for s in encoded
        for a in s["attributes"]
        if a["key"] == "openinference.span.kind"
    }
    assert kinds == {"AGENT", "TOOL", "LLM"}


def configure_export(
    provider: TracerProvider, endpoint: str, monkeypatch: pytest.MonkeyPatch, **limits: str
) -> None:
    for name, value in limits.items():
        monkeypatch.setenv(name, value)
    sftrace.configure(tracer_provider=provider, otlp_endpoint=endpoint)


def test_a_tiny_queue_spills_to_the_journal_and_drops_nothing(
    provider: TracerProvider, sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for 2 spans, a 200-call run overflows the queue: the overflow is read
    back from the journal and every span arrives once."""
    configure_export(
        provider,
        url(sink),
        monkeypatch,
        OTEL_BSP_MAX_QUEUE_SIZE="2",
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE="2",
        OTEL_BSP_SCHEDULE_DELAY="5",
    )
    with record("tiny-queue") as session:
        for number in range(200):
            step(number)
    processor = get_state().otlp
    assert processor is not None
    assert processor.force_flush(20_000)
    ids = [s.span_id for s in sink.spans() if s.trace_id == session.trace_id]
    assert len(ids) == len(set(ids)) == 201
    assert processor.worker.spilled > 0
    assert processor.worker.dropped == 0


def test_a_collector_that_comes_up_later_gets_every_span(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Spans recorded while nothing listens are kept (spilled) and sent once the
    collector is up."""
    port = free_port()
    configure_export(
        provider,
        f"http://127.0.0.1:{port}",
        monkeypatch,
        # Long enough for a busy machine's sink to answer (a refused connection fails
        # at once, whatever the timeout).
        OTEL_EXPORTER_OTLP_TIMEOUT="5",
        OTEL_BSP_SCHEDULE_DELAY="5",
    )
    with record("down-then-up", output=tmp_path / "run.sftrace") as session:
        for number in range(30):
            step(number)
    processor = get_state().otlp
    assert processor is not None
    assert not processor.force_flush(500)  # nothing listens yet
    late = OtlpSink()
    late.start_http(port)
    try:
        assert processor.force_flush(20_000)
        ids = {s.span_id for s in late.spans() if s.trace_id == session.trace_id}
    finally:
        late.stop()
    assert len(ids) == 31
    assert processor.worker.dropped == 0


def test_unsent_spans_at_shutdown_stay_for_push_which_sends_only_them(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sink: OtlpSink
) -> None:
    """Shutdown with the collector down notes the unsent spans beside the bundle; push
    sends exactly those (and removes the note); the bundle itself is unchanged."""
    configure_export(
        provider,
        f"http://127.0.0.1:{free_port()}",
        monkeypatch,
        OTEL_EXPORTER_OTLP_TIMEOUT="0.3",
        OTEL_BSP_SCHEDULE_DELAY="5",
    )
    path = tmp_path / "run.sftrace"
    with record("unsent", output=path):
        for number in range(5):
            step(number)
    provider.shutdown()
    unsent = read_unsent(path)
    bundle = load_bundle(path, verify_integrity=True)
    assert unsent == {line["spanId"] for line in bundle.spans}
    # Pretend two spans had been sent: push sends the other four.
    kept = sorted(unsent)[2:]
    note = orjson.loads(unsent_path(path).read_bytes())
    unsent_path(path).write_bytes(orjson.dumps({**note, "span_ids": kept}))
    (result,) = push_bundles([path], endpoint=url(sink))
    assert result.ok
    assert result.spans == 4
    assert {s.span_id for s in sink.spans()} == set(kept)
    assert not unsent_path(path).exists()


def test_spans_of_no_recorded_run_are_counted_when_dropped(
    sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A span with no journal to read back from, over a full queue, is counted as
    dropped (never raised to the host)."""
    from sftrace._export.otlp import OtlpSpanProcessor

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    settings = OtlpSettings(endpoint=url(sink), protocol="http/protobuf")
    processor = OtlpSpanProcessor(settings)
    own = TracerProvider()
    own.add_span_processor(processor)
    tracer = own.get_tracer("app")
    worker = processor.worker
    # The worker takes spans off the queue under its lock: holding it keeps the queue full
    # whatever the thread scheduling (a running worker could otherwise take the first span
    # before the next one ends). Started first: starting it takes the same lock.
    worker._start()
    with worker._lock:
        for _ in range(3):
            with tracer.start_as_current_span("app-span"):
                pass
        assert worker.dropped == 2
    own.shutdown()
    assert [s.span.name for s in sink.spans()] == ["app-span"]
