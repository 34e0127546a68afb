"""Rebuilding a run from the journal a dead process left (see ``recover``).

- every span in the journal is kept; a last line cut off mid-write is dropped (and
  said so), as is any line that is not a valid span of the run (``SpanChecker``);
- the run span, which only ends when the run does, is rebuilt from the header with
  status ``interrupted`` and the run's own trace and span ids;
- a span whose parent never finished is attached to the run span;
- the manifest's ``notes`` say what was lost.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sftrace._bundle.checks import SpanChecker
from sftrace._bundle.files import bounded_lines, open_bundle_file
from sftrace._bundle.format import (
    JOURNAL_FILE,
    MAX_SPANS_BYTES,
    STATUS_INTERRUPTED,
)
from sftrace._bundle.manifest import Manifest, RunTotals, manifest_from_parts
from sftrace._bundle.names import bundle_name, is_plain_name
from sftrace._bundle.reader import Bundle, spans_from_data
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes, encode_attributes

_UNSEQUENCED = 1 << 62
# Kept in a reparented span's data while the run is rebuilt: the parent it had.
_ORIGINAL_PARENT = "_sftrace_original_parent"


@dataclass
class Recovered:
    """A recovered run, ready to be written or loaded: its spans in bundle order."""

    source: Path
    manifest: Manifest
    lines: list[bytes]
    final_name: str
    calls: int = 0
    lost_calls: list[int] = field(default_factory=list)
    # What the run was started with: may it replace an existing bundle, and when.
    overwrite: bool = False
    started_at: str | None = None

    @property
    def notes(self) -> list[str]:
        return self.manifest.notes

    @property
    def spans_bytes(self) -> bytes:
        return b"".join(line + b"\n" for line in self.lines)

    def bundle(self) -> Bundle:
        """The recovered run as a loaded ``Bundle`` (nothing is written)."""
        display = f"{self.source / JOURNAL_FILE} (recovered)"
        bundle = spans_from_data(None, self.manifest, self.spans_bytes, display)
        bundle.path = self.source
        return bundle


def _journal_lines(path: Path, notes: list[str]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the journal; a last line without its newline is dropped."""
    if not os.path.lexists(path):
        notes.append("the journal was missing: no span had been written")
        return
    fd, _ = open_bundle_file(path.parent, path.name, MAX_SPANS_BYTES)
    with os.fdopen(fd, "rb") as handle:
        for number, line in bounded_lines(handle, str(path)):
            if not line.endswith(b"\n"):
                if line.strip(b"\0 \t\r"):
                    notes.append(
                        f"the last journal line was cut off mid-write ({len(line)} bytes); "
                        f"it was dropped"
                    )
                return
            # A power cut can leave zeros where the file system had not written data yet.
            line = line.strip(b"\0 \t\r\n")
            if line:
                yield number, line


@dataclass
class _Span:
    data: dict[str, Any]
    attributes: dict[str, Any]
    number: int

    @property
    def span_id(self) -> str:
        return str(self.data["spanId"])

    @property
    def parent(self) -> str | None:
        parent = self.data.get("parentSpanId")
        return parent if isinstance(parent, str) and parent else None

    @property
    def kind(self) -> Any:
        return self.attributes.get(A.KIND)

    @property
    def seq(self) -> int | None:
        seq = self.attributes.get(A.SEQ)
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else None

    @property
    def start(self) -> int:
        return _nanos(self.data.get("startTimeUnixNano"))

    @property
    def end(self) -> int:
        return _nanos(self.data.get("endTimeUnixNano"))

    def label(self) -> str:
        if self.kind in (A.KIND_TOOL, A.KIND_LLM):
            return f"call {self.seq} ({self.data.get('name')})"
        return f"span {self.data.get('name')!r}"


def _nanos(value: Any) -> int:
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return 0
    return nanos if 0 <= nanos < 1 << 63 else 0


def _journal_spans(journal: Path, trace_id: str, notes: list[str]) -> list[_Span]:
    """The valid spans of the journal, in line order; each line dropped is noted."""
    checker = SpanChecker(trace_id, parents_first=False)
    spans: list[_Span] = []
    for number, line in _journal_lines(journal, notes):
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            notes.append(f"journal line {number} was not valid JSON; it was dropped")
            continue
        if isinstance(raw, dict) and raw.get("spanId") in checker.parents:
            notes.append(f"journal line {number} repeated span {raw['spanId']}; it was dropped")
            continue
        problems, attributes = checker.check(raw)
        if problems:
            notes.append(f"journal line {number} was dropped: {problems[0]}")
            continue
        kind = attributes.get(A.KIND)
        if kind is not None and (kind == A.KIND_RUN) != (attributes.get(A.SEQ) == 0):
            notes.append(f"journal line {number} has a wrong or repeated seq; it was dropped")
            continue
        checker.accept(raw, attributes)
        spans.append(_Span(raw, attributes, number))
    return spans


def rebuild(partial: Path, header: dict[str, Any]) -> Recovered:
    """The run left in ``partial`` rebuilt from its journal and ``header``."""
    trace_id: str = header["trace_id"]
    notes: list[str] = []
    spans = _journal_spans(partial / JOURNAL_FILE, trace_id, notes)
    runs = [span for span in spans if span.kind == A.KIND_RUN]
    if runs:
        run = runs[0]
        notes.insert(
            0,
            "the run ended but its bundle was never finished (the process died or the disk "
            "filled while writing it); rebuilt from the journal",
        )
    else:
        run = _synthesized_run(partial, header, spans, notes)
        spans.insert(0, run)
    by_id = {span.span_id: span for span in spans}
    ordered = _order(run, spans, by_id, notes)
    calls = [s for s in ordered if s.kind in (A.KIND_TOOL, A.KIND_LLM)]
    if not runs:
        _note_inside_unfinished(run, calls)
    lost = _lost_calls(calls, notes, interrupted=not runs)
    totals = RunTotals()
    for span in ordered:
        totals.add(_numeric_totals(span.attributes))
    manifest = manifest_from_parts(
        header,
        attributes=run.attributes,
        trace_id=trace_id,
        root_span_id=run.span_id,
        start=run.start,
        end=max([run.end, *(s.end for s in ordered)]),
        resource_attributes=_list(header.get("resource")),
        scope=header.get("scope") if isinstance(header.get("scope"), dict) else None,
        totals=totals,
        notes=notes,
    )
    return Recovered(
        source=partial,
        manifest=manifest,
        lines=[orjson.dumps(span.data) for span in ordered],
        final_name=_final_name(header, manifest),
        calls=len(calls),
        lost_calls=lost,
        overwrite=header.get("overwrite") is True,
        started_at=header.get("created_at") if isinstance(header.get("created_at"), str) else None,
    )


def _lost_calls(calls: list[_Span], notes: list[str], *, interrupted: bool) -> list[int]:
    """The sequence numbers missing from the journal below the highest there (the first
    20 of them; all are counted in the note). Linear in the calls, whatever the numbers."""
    finished = sorted({s.seq for s in calls if s.seq is not None})
    highest = finished[-1] if finished else 0
    listed: list[int] = []
    count = 0
    previous = 0
    for seq in finished:
        gap = seq - previous - 1
        if gap > 0:
            listed.extend(range(previous + 1, min(seq, previous + 1 + 20 - len(listed))))
            count += gap
        previous = seq
    if count:
        more = f" and {count - len(listed)} more" if count > len(listed) else ""
        notes.append(
            f"calls {', '.join(map(str, listed))}{more} are not in the journal (they had not "
            f"finished, or could not be saved): they are not in the bundle"
        )
    if interrupted:
        notes.append(
            f"any call in progress after call {highest} when the process died is lost"
            if highest
            else "no call had finished when the process died"
        )
    return listed


def _final_name(header: dict[str, Any], manifest: Manifest) -> str:
    """The bundle's name: the one the run was recording to, if it is a plain name;
    else ``<agent>-<run_id>.sftrace`` made safe (a header is data from disk)."""
    final_name = header.get("final_name")
    if is_plain_name(final_name):
        return str(final_name)
    return bundle_name(manifest.agent_name, manifest.run_id)


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _numeric_totals(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes totals are computed from, keeping only numbers where numbers go."""
    numeric = (
        A.GEN_AI_USAGE_INPUT_TOKENS,
        A.GEN_AI_USAGE_OUTPUT_TOKENS,
        A.USAGE_TOTAL_TOKENS,
        A.COST_USD,
    )
    return {
        key: value
        for key, value in attributes.items()
        if key not in numeric or (isinstance(value, int | float) and not isinstance(value, bool))
    }


def _synthesized_run(
    partial: Path, header: dict[str, Any], spans: list[_Span], notes: list[str]
) -> _Span:
    """The run span, rebuilt: it was still open when the process died."""
    trace_id: str = header["trace_id"]
    template = header.get("run_span")
    data: dict[str, Any] | None = None
    if isinstance(template, dict):
        problems, _ = SpanChecker(trace_id, parents_first=False).check(dict(template))
        data = None if problems else dict(template)
    if data is None:
        data = _inferred_run_span(header, spans)
        notes.append("the journal header did not describe the run span; it was inferred")
    data.pop("parentSpanId", None)
    data.pop("events", None)
    died = max([_nanos(data.get("startTimeUnixNano")), *(s.end for s in spans)])
    with contextlib.suppress(OSError):
        died = max(died, os.stat(partial / JOURNAL_FILE).st_mtime_ns)
    data["endTimeUnixNano"] = str(died)
    redactions = _collected_redactions(header, spans)
    extra: dict[str, Any] = {A.STATUS: STATUS_INTERRUPTED}
    if redactions:
        extra[A.REDACTIONS] = orjson.dumps(redactions, option=orjson.OPT_SORT_KEYS).decode()
    kept = [
        item
        for item in data.get("attributes", [])
        if item.get("key") not in (A.STATUS, A.REDACTIONS, A.RUN_OUTPUT)
    ]
    data["attributes"] = kept + encode_attributes(extra)
    data["status"] = {
        "code": 2,
        "message": "interrupted: the process ended before the run did (recovered by sftrace)",
    }
    notes.insert(
        0,
        "recovered from the journal of a run that never ended (its process was killed or "
        "crashed): status 'interrupted'; the run's output, final status and state changes "
        "were lost (they are written when the run ends)",
    )
    return _Span(data, decode_attributes(data["attributes"]), 0)


def _inferred_run_span(header: dict[str, Any], spans: list[_Span]) -> dict[str, Any]:
    """A run span for an older header, or a run the exporter met without record(): its
    id is the parent that the top-level spans name but that never reached the journal."""
    trace_id: str = header["trace_id"]
    agent = str(header.get("agent_name") or "unknown")
    known = {s.span_id for s in spans}
    orphans = [s for s in spans if s.parent is not None and s.parent not in known]
    # The run started first: its first child is the earliest orphan.
    first = min(orphans, key=lambda s: (s.start, s.seq or 0), default=None)
    root = str(first.parent) if first is not None else secrets.token_hex(8)
    return {
        "traceId": trace_id,
        "spanId": root,
        "name": f"{A.OPERATION_INVOKE_AGENT} {agent}",
        "kind": 1,
        "startTimeUnixNano": str(min((s.start for s in spans), default=0)),
        "endTimeUnixNano": "0",
        "attributes": encode_attributes(
            {
                A.KIND: A.KIND_RUN,
                A.SEQ: 0,
                A.RUN_ID: str(header.get("run_id") or trace_id),
                A.GEN_AI_OPERATION_NAME: A.OPERATION_INVOKE_AGENT,
                A.GEN_AI_AGENT_NAME: agent,
            }
        ),
        "status": {},
    }


def _collected_redactions(header: dict[str, Any], spans: list[_Span]) -> list[dict[str, Any]]:
    """The run's redaction list: the header's (run input, metadata) and each call's."""
    collected = [r for r in _list(header.get("redactions")) if isinstance(r.get("seq"), int)]
    for span in spans:
        text = span.attributes.get(A.REDACTIONS)
        seq = span.seq
        if not isinstance(text, str) or seq is None:
            continue
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(items, list):
            collected.extend({**item, "seq": seq} for item in items if isinstance(item, dict))
    return sorted(
        collected,
        key=lambda r: (r.get("seq", 0), str(r.get("field", "")), str(r.get("path", ""))),
    )


def _order(
    run: _Span, spans: list[_Span], by_id: dict[str, _Span], notes: list[str]
) -> list[_Span]:
    """Spans in bundle order: the run first, then by start time, parents before children.

    A span whose parent is not in the journal (it was still open when the process died)
    is attached to the run span, and said so; so is a span caught in a parent cycle
    (which only a damaged journal has).
    """
    for span in spans:
        parent = span.parent
        if span is not run and (parent is None or parent not in by_id or parent == span.span_id):
            _reparent(span, run, notes, unfinished=parent is not None and parent not in by_id)
    # Each span is walked up to one already known to reach the run, once: linear in the
    # number of spans however long the parent chains are.
    reaches_run = {run.span_id}
    for span in spans:
        chain: set[str] = set()
        current = span
        while current.span_id not in reaches_run:
            if current.span_id in chain:
                _reparent(current, run, notes)
                break
            chain.add(current.span_id)
            current = by_id[str(current.parent)]
        reaches_run |= chain
    rest = sorted(
        (span for span in spans if span is not run),
        key=lambda s: (s.start, s.seq if s.seq is not None else _UNSEQUENCED, s.number),
    )
    result = [run]
    placed = {run.span_id}
    for span in rest:
        # Place the span after any of its ancestors not placed yet (same start time).
        pending: list[_Span] = []
        ancestor: _Span | None = span
        while ancestor is not None and ancestor.span_id not in placed:
            pending.append(ancestor)
            ancestor = by_id.get(str(ancestor.parent))
        for item in reversed(pending):
            placed.add(item.span_id)
            result.append(item)
    return result


def _note_inside_unfinished(run: _Span, calls: list[_Span]) -> None:
    """List on the run span the calls that ran inside a span the process died in (their
    parent never reached the journal): a replay stops where the agent reaches that span's
    call instead of them (``sftrace.inside_unfinished``)."""
    inside = sorted(
        span.seq
        for span in calls
        if span.seq is not None and span.data.get(_ORIGINAL_PARENT) not in (None, run.span_id)
    )
    for span in calls:
        span.data.pop(_ORIGINAL_PARENT, None)
    if inside:
        run.data["attributes"] = [
            *run.data.get("attributes", []),
            *encode_attributes({A.INSIDE_UNFINISHED: orjson.dumps(inside).decode()}),
        ]
        run.attributes[A.INSIDE_UNFINISHED] = orjson.dumps(inside).decode()


def _reparent(span: _Span, run: _Span, notes: list[str], *, unfinished: bool = False) -> None:
    """Attach ``span`` to the run span; ``unfinished``: its parent never ended (the
    process died inside it), as opposed to a parent cycle of a damaged journal."""
    original = span.parent
    if unfinished and span.seq is not None:
        span.data[_ORIGINAL_PARENT] = original  # dropped again before the span is written
    span.data["parentSpanId"] = run.span_id
    if original is not None and original != run.span_id:
        notes.append(
            f"{span.label()} was inside a span that never finished ({original}); it is "
            f"attached to the run span"
        )
