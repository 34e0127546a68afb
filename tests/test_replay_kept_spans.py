"""The spans a replay keeps (session.spans) are exactly the spans the SDK finished."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link

from sftrace import record, replay, trace_tool
from sftrace._record import config as _config


@trace_tool
def fetch(city: str) -> dict[str, Any]:
    return {"city": city, "temperature": 21}


@trace_tool
def book(city: str) -> str:
    raise ValueError(f"no rooms in {city}")


def agent() -> None:
    fetch("Lisbon")
    tracer = _config.get_state().provider.get_tracer("app")
    with tracer.start_as_current_span("app work", attributes={"app.n": 3}) as span:
        span.add_event("app event", {"app.ok": True})
        span.add_link(span.get_span_context(), {"app.self": "yes"})
        limited = tracer.start_span("app overflow", attributes={f"k{i}": i for i in range(130)})
        limited.end()
    with contextlib.suppress(ValueError):
        book("Lisbon")


def described(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "kind": span.kind,
        "status": (span.status.status_code, span.status.description),
        "times": (span.start_time, span.end_time),
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
        "links": [(link.context, dict(link.attributes or {})) for link in span.links],
        "resource": span.resource,
        "scope": span.instrumentation_scope,
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
    }


def test_replay_keeps_what_the_sdk_finished(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """Every kept span has the name, ids, times, attributes, events, links and drop
    counts the SDK reported for it."""
    with record("agent", output=tmp_path / "run.sftrace"):
        agent()
    spans.clear()
    with replay(tmp_path / "run.sftrace") as session:
        agent()
    finished = {s.context.span_id: s for s in spans.get_finished_spans() if s.context}
    assert len(session.spans) == len(finished) == 5  # run, fetch, app work, overflow, book
    for kept in session.spans:
        assert kept.context is not None
        assert described(kept) == described(finished[kept.context.span_id])
    overflow = next(s for s in session.spans if s.name == "app overflow")
    assert overflow.dropped_attributes == 2
    work = next(s for s in session.spans if s.name == "app work")
    assert isinstance(work.links[0], Link)
    assert [e.name for e in work.events] == ["app event"]


def test_kept_spans_hold_no_bounded_containers(tmp_path: Path) -> None:
    """A replay keeps every span it makes: those whose limits dropped nothing hold plain
    containers only, which the garbage collector walks at no extra cost."""
    with record("agent", output=tmp_path / "run.sftrace"):
        agent()
    with replay(tmp_path / "run.sftrace") as session:
        agent()
    plain = [s for s in session.spans if s.name != "app overflow"]
    assert len(plain) == 4
    for kept in plain:
        held = gc.get_referents(kept)  # its fields' values
        assert not [x for x in held if isinstance(x, BoundedAttributes | BoundedList)]
