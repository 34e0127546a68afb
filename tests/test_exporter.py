"""BundleSpanExporter as a plain OpenTelemetry SpanExporter."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

import sample_agents as agents
import sftrace
from sftrace import BundleSpanExporter, load_bundle, record
from sftrace.testing import SequentialIdGenerator


def test_exporter_on_a_plain_provider_writes_one_bundle_per_run(tmp_path: Path) -> None:
    """Used directly on any provider, the exporter writes a bundle for each sftrace run."""
    provider = TracerProvider(id_generator=SequentialIdGenerator())
    exporter = BundleSpanExporter(tmp_path / "direct")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    other = provider.get_tracer("app")
    sftrace.configure(tracer_provider=provider, bundle_dir=tmp_path / "managed")
    with other.start_as_current_span("unrelated"):
        pass
    with record("direct-agent") as session:
        agents.booking_agent()
    written = sorted((tmp_path / "direct").iterdir())
    assert [p.name for p in written] == [f"direct-agent-{session.run_id}.sftrace"]
    direct = load_bundle(written[0], verify_integrity=True)
    managed = load_bundle(session.path or "", verify_integrity=True)
    assert [c.name for c in direct.calls] == [c.name for c in managed.calls]
    assert direct.manifest.trace_id == managed.manifest.trace_id
    provider.shutdown()


def test_export_never_raises_and_reports_failure(tmp_path: Path) -> None:
    """A broken destination yields SpanExportResult.FAILURE, not an exception."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    provider = TracerProvider()
    exporter = BundleSpanExporter(blocker)
    tracer = provider.get_tracer("t")
    span = tracer.start_span("s", attributes={"sftrace.kind": "tool", "sftrace.seq": 1})
    span.end()
    assert exporter.export([span]) is SpanExportResult.FAILURE  # type: ignore[list-item]


def test_shutdown_is_idempotent_and_export_after_shutdown_fails(tmp_path: Path) -> None:
    """shutdown() twice is fine; exporting afterwards reports FAILURE."""
    exporter = BundleSpanExporter(tmp_path)
    exporter.shutdown()
    exporter.shutdown()
    assert exporter.force_flush() is True
    assert exporter.export([]) is SpanExportResult.FAILURE
