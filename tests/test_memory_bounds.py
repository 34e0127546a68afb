"""What stays in memory while and after recording: nothing per span or per finished run."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import sftrace
from sftrace import BundleSpanExporter, record, trace_tool


@trace_tool
def lookup(city: str) -> dict[str, str]:
    return {"city": city}


def test_exporter_keeps_nothing_for_runs_it_finished_on_its_own(tmp_path: Path) -> None:
    """Runs the exporter writes by itself (directory mode) leave no state once written."""
    provider = TracerProvider()
    exporter = BundleSpanExporter(tmp_path / "direct")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sftrace.configure(tracer_provider=provider, bundle_dir=tmp_path / "managed")
    for number in range(3):
        with record("agent"):
            lookup(f"city {number}")
    assert len(list((tmp_path / "direct").iterdir())) == 3
    assert exporter._runs == {}
    assert exporter._outcomes == {}
    provider.shutdown()


def test_recorded_spans_are_on_disk_before_the_run_ends(tmp_path: Path) -> None:
    """Each span is in the run's journal as soon as it ends, not held until the run ends."""
    with record("agent", output=tmp_path / "run.sftrace"):
        lookup("Lisbon")
        lookup("Porto")
        (journal,) = tmp_path.glob(".run.sftrace.*.partial/journal.jsonl")
        assert len(journal.read_bytes().splitlines()) == 2
