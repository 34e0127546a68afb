"""Through a real collector (Rotel): live export over HTTP and gRPC, and the round trip
bundle -> collector -> file -> import that must replay like the original."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_components import Rotel

import sample_agents as agents
import sftrace
from interchange_helpers import (
    failing_agent,
    lines,
    record_completed,
    record_failing,
    replay_summary,
)
from sftrace import load_bundle, record
from sftrace._cli.main import cli
from sftrace._cli.otlp import register
from sftrace._record.config import get_state

pytestmark = pytest.mark.otlp
register(cli)
PROTOCOLS = ["http/protobuf", "grpc"]
# (protocol, encoder): sftrace's OTLP/JSON and OTLP/protobuf and the official protobuf
# over HTTP, and gRPC (always the official exporter).
EXPORTS = [
    ("http/json", "sftrace"),
    ("http/protobuf", "sftrace"),
    ("http/protobuf", "official"),
    ("grpc", "auto"),
]


@pytest.mark.parametrize(("protocol", "encoder"), EXPORTS)
def test_every_recorded_span_reaches_the_collector_whole(
    rotel: Rotel, spans: InMemorySpanExporter, protocol: str, encoder: str
) -> None:
    """Each span of a recorded run arrives through Rotel with its ids, parent, name, kind,
    times, events and every attribute it was recorded with."""
    provider = get_state().provider
    sftrace.configure(
        tracer_provider=provider,
        otlp_endpoint=rotel.endpoint(protocol),
        otlp_protocol=protocol,
        otlp_encoder=encoder,
        service_name="rotel-test",
    )
    with record("collected", run_input="Lisbon") as session:
        session.set_output(agents.booking_agent("Lisbon"))
    assert provider.force_flush(10_000)
    finished = spans.get_finished_spans()
    received = {
        s.span_id: s for s in rotel.sink.wait_for_trace(session.trace_id or "", len(finished))
    }
    assert len(finished) == len(received) == 4
    for span in finished:
        assert span.context is not None
        got = received[f"{span.context.span_id:016x}"]
        assert got.trace_id == f"{span.context.trace_id:032x}" == session.trace_id
        assert got.parent_span_id == (f"{span.parent.span_id:016x}" if span.parent else "")
        assert (got.span.name, got.span.kind) == (span.name, span.kind.value + 1)
        assert got.span.start_time_unix_nano == span.start_time
        assert got.span.end_time_unix_nano == span.end_time
        assert len(got.span.events) == len(span.events)
        for key, value in (span.attributes or {}).items():
            assert got.attributes[key] == value, key
        assert got.resource["service.name"] == "rotel-test"
    kinds = {s.span.name: s.attributes["openinference.span.kind"] for s in received.values()}
    assert kinds == {
        "invoke_agent collected": "AGENT",
        "execute_tool flight_search": "TOOL",
        "chat fake-1": "LLM",
        "execute_tool book": "TOOL",
    }


@pytest.mark.parametrize(("protocol", "encoder"), EXPORTS)
def test_bundles_pushed_through_the_collector_import_back_identical(
    rotel: Rotel, tmp_path: Path, protocol: str, encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """push -> Rotel -> the file exporter's lines -> import: the same span lines and the
    same replay, for a failed and a completed run sent together."""
    monkeypatch.setenv("SFTRACE_OTLP_ENCODER", encoder)
    failed = record_failing(tmp_path / "orig" / "failed.sftrace")
    completed = record_completed(tmp_path / "orig" / "completed.sftrace")
    pushed = CliRunner().invoke(
        cli,
        [
            "push",
            *(str(failed), str(completed)),
            *("--endpoint", rotel.endpoint(protocol), "--protocol", protocol),
        ],
        catch_exceptions=False,
    )
    assert pushed.exit_code == 0, pushed.output
    for bundle in (failed, completed):
        manifest = load_bundle(bundle).manifest
        rotel.sink.wait_for_trace(manifest.trace_id, manifest.totals.spans)
    collector_file = tmp_path / "collector" / "traces.jsonl"
    collector_file.parent.mkdir()
    collector_file.write_bytes(b"".join(line + b"\n" for line in rotel.sink.file_lines()))
    imported = CliRunner().invoke(
        cli, ["import", str(collector_file), "--output", str(tmp_path / "imported")]
    )
    assert imported.exit_code == 0, imported.output
    for original, entrypoint in ((failed, failing_agent), (completed, agents.booking_agent)):
        manifest = load_bundle(original).manifest
        copy = tmp_path / "imported" / f"{manifest.agent_name}-{manifest.run_id}.sftrace"
        assert f"imported {copy}" in imported.output
        assert lines(copy) == lines(original)
        assert load_bundle(copy, verify_integrity=True).manifest.totals == manifest.totals
        assert replay_summary(copy, entrypoint) == replay_summary(original, entrypoint)


@pytest.mark.parametrize("encoder", ["sftrace", "official"])
def test_a_tight_loop_over_a_tiny_queue_loses_no_span_through_rotel(
    rotel: Rotel, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    """500 calls recorded as fast as they go, with room for 8 spans in the export queue:
    the overflow is sent from the journal and Rotel receives every span once."""
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "5")
    provider = get_state().provider
    sftrace.configure(
        tracer_provider=provider,
        otlp_endpoint=rotel.endpoint("http/protobuf"),
        otlp_encoder=encoder,
    )
    with record("tight-loop") as session:
        for number in range(500):
            agents.search_flights("Lisbon", max_results=number % 3 + 1)
    processor = get_state().otlp
    assert processor is not None
    assert processor.force_flush(30_000)
    arrived = rotel.sink.wait_for_trace(session.trace_id or "", 501)
    assert len({span.span_id for span in arrived}) == len(arrived) == 501
    assert processor.worker.spilled > 0
    assert processor.worker.dropped == 0
