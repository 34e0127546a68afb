"""Importing collector files: :func:`import_otlp_files`.

Reads the OpenTelemetry Collector ``file`` exporter's output (one
``ExportTraceServiceRequest`` as OTLP/JSON per line, hex ids; runs may be spread over
many lines and files and interleaved) and writes one bundle per complete sftrace run
with the same writer as recording, so the bundle replays like the original. Each span
goes through the bundle layer's one span validator and the manifest through its one
model; a run that fails either is skipped with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sftrace._bundle.checks import SpanChecker
from sftrace._bundle.files import bounded_lines
from sftrace._bundle.load import load_bundle
from sftrace._bundle.manifest import (
    RunTotals,
    environment,
    journal_header,
    manifest_from_parts,
    utc_iso,
)
from sftrace._bundle.names import bundle_name, safe_file_stem
from sftrace._bundle.writer import BundleWriter, partial_dir_for
from sftrace._errors import BundleError
from sftrace._export.enrich import ENRICHMENT_ATTRIBUTES
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes, decode_value, encode_value
from sftrace._model.stored import ALIASES, stored_attributes


@dataclass
class ImportedRun:
    """One sftrace run found in the files: the bundle written, or why it was not."""

    trace_id: str
    run_id: str
    agent_name: str
    spans: int
    path: Path | None = None
    problem: str | None = None


@dataclass
class ImportResult:
    """What ``import_otlp_files`` found: the runs, and traces that hold no run."""

    runs: list[ImportedRun] = field(default_factory=list)
    other_traces: int = 0
    spans_read: int = 0
    # Trace ids asked for by name that the source doesn't hold (Phoenix import).
    missing_traces: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[ImportedRun]:
        return [run for run in self.runs if run.path is not None]

    @property
    def skipped(self) -> list[ImportedRun]:
        return [run for run in self.runs if run.path is None]


@dataclass
class FoundSpan:
    """One span read from a source, in OTLP/JSON (hex ids), with what the run import
    needs beside it: its resource and scope, and its attributes decoded."""

    span: dict[str, Any]
    resource: list[dict[str, Any]]
    scope: dict[str, Any] | None
    attributes: dict[str, Any]


# Spans by trace id, then span id: what an import reads before it writes bundles.
Traces = dict[str, dict[str, FoundSpan]]


@dataclass(frozen=True)
class ImportSource:
    """Where imported runs came from, as the bundle's manifest says it."""

    kind: str  # the manifest's environment "source", e.g. "otlp-import"
    description: str  # for the manifest's note: "imported from <description> on <date>"


_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_SFTRACE_KINDS = (A.KIND_RUN, A.KIND_TOOL, A.KIND_LLM)


def import_otlp_files(
    files: Iterable[str | os.PathLike[str]],
    *,
    output: str | os.PathLike[str],
    overwrite: bool = False,
) -> ImportResult:
    """Write one bundle per complete sftrace run found in collector ``file`` output.

    Bundles are named ``<agent>-<run_id>.sftrace`` in ``output``. A run is skipped (and
    says why) when a span is missing, when its payloads were cut or left out by the OTLP
    export (``max_payload_bytes``, ``capture_content=False``), or when its bundle exists
    and ``overwrite`` is False. Raises ``BundleError`` for an unreadable file.
    """
    traces: Traces = {}
    paths = [Path(name) for name in files]
    spans_read = 0
    for path in paths:
        for number, request in _requests(path):
            spans_read += _collect(request, traces, f"{path}:{number}")
    names = ", ".join(path.name for path in paths)
    source = ImportSource("otlp-import", f"OTLP/JSON ({names})")
    result = import_traces(traces, output=output, overwrite=overwrite, source=source)
    result.spans_read = spans_read
    return result


def import_traces(
    traces: Traces,
    *,
    output: str | os.PathLike[str],
    overwrite: bool,
    source: ImportSource,
) -> ImportResult:
    """Write one bundle per sftrace run in ``traces`` (the common half of every import)."""
    result = ImportResult()
    target = Path(output)
    for trace_id, spans in traces.items():
        runs = [found for found in spans.values() if found.attributes.get(A.KIND) == A.KIND_RUN]
        if not runs:
            result.other_traces += 1
            continue
        result.runs.append(_import_run(trace_id, spans, runs, target, overwrite, source))
    return result


def _requests(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    display = str(path)
    with open(path, "rb") as handle:
        for number, line in bounded_lines(handle, display):
            if not line.strip():
                continue
            try:
                request = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise BundleError(
                    f"{display}:{number}: not OTLP/JSON ({exc}); sftrace import reads the "
                    f"collector's file exporter output: one JSON request per line",
                    path=display,
                    line=number,
                ) from None
            if not isinstance(request, dict):
                raise BundleError(
                    f"{display}:{number}: expected a JSON object (an ExportTraceServiceRequest)"
                    f", got {type(request).__name__}",
                    path=display,
                    line=number,
                )
            yield number, request


def _collect(request: dict[str, Any], traces: Traces, where: str) -> int:
    """Add a request's spans to ``traces``; lines of other signals hold none."""
    count = 0
    try:
        for resource_spans in request.get("resourceSpans") or ():
            resource = list((resource_spans.get("resource") or {}).get("attributes") or ())
            for scope_spans in resource_spans.get("scopeSpans") or ():
                raw_scope = scope_spans.get("scope")
                scope = (
                    {"name": raw_scope.get("name", ""), "version": raw_scope.get("version", "")}
                    if raw_scope
                    else None
                )
                for span in scope_spans.get("spans") or ():
                    add_span(traces, span, resource, scope)
                    count += 1
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        message = str(exc) if isinstance(exc, ValueError) else f"malformed request ({exc!r})"
        raise BundleError(f"{where}: {message}", path=where.rsplit(":", 1)[0]) from None
    return count


def add_span(
    traces: Traces,
    span: dict[str, Any],
    resource: list[dict[str, Any]],
    scope: dict[str, Any] | None,
) -> None:
    """Add one OTLP/JSON span to ``traces``; raises ValueError for ids that aren't hex."""
    trace_id = _hex_id(span.get("traceId"), 32, "traceId")
    span_id = _hex_id(span.get("spanId"), 16, "spanId")
    span["traceId"], span["spanId"] = trace_id, span_id
    spans = traces.setdefault(trace_id, {})
    if span_id in spans:
        return  # a collector may deliver a span twice
    attributes = decode_attributes(span.get("attributes") or ())
    spans[span_id] = FoundSpan(span, resource, scope, attributes)


_HEX = re.compile(r"[0-9a-fA-F]+")


def _hex_id(value: Any, digits: int, name: str) -> str:
    if not isinstance(value, str) or len(value) != digits or not _HEX.fullmatch(value):
        raise ValueError(
            f"{name} must be {digits} hex digits, got {value!r} (the collector's file exporter "
            f"writes hex ids; is this protobuf JSON with base64 ids?)"
        )
    return value.lower()


def _import_run(
    trace_id: str,
    spans: dict[str, FoundSpan],
    runs: list[FoundSpan],
    output: Path,
    overwrite: bool,
    source: ImportSource,
) -> ImportedRun:
    root = runs[0]
    attributes = root.attributes
    run_id = str(attributes.get(A.RUN_ID) or trace_id)
    agent = str(attributes.get(A.GEN_AI_AGENT_NAME) or "agent")
    run = ImportedRun(trace_id=trace_id, run_id=run_id, agent_name=agent, spans=len(spans))
    # Like recording, a bundle holds the spans of the run's own process (its resource);
    # spans other services added to the same distributed trace are left out.
    spans = {key: found for key, found in spans.items() if found.resource == root.resource}
    run.spans = len(spans)
    run.problem = _completeness_problem(spans, runs)
    if run.problem is not None:
        return run
    path = output / bundle_name(agent, run_id)
    if path.exists() and not overwrite:
        run.problem = f"{path} already exists; pass --overwrite to replace it"
        return run
    lines, run.problem = _checked_lines(trace_id, spans)
    if run.problem is not None:
        return run
    try:
        _write_bundle(path, trace_id, lines, root, run_id, agent, source, overwrite)
        load_bundle(path, verify_integrity=True, eager=True)
    except BundleError as exc:
        shutil.rmtree(path, ignore_errors=True)
        run.problem = f"the spans do not form a valid bundle: {exc}"
        return run
    run.path = path
    return run


def _completeness_problem(spans: dict[str, FoundSpan], runs: list[FoundSpan]) -> str | None:
    if len(runs) > 1:
        return f"the trace holds {len(runs)} run spans; a bundle holds one run"
    seqs: set[int] = set()
    for span_id, found in spans.items():
        attributes = found.attributes
        if A.TRUNCATED in attributes:
            keys = ", ".join(str(key) for key in attributes[A.TRUNCATED])
            return (
                f"span {span_id} was cut for OTLP by max_payload_bytes ({keys}); export with "
                f"SFTRACE_MAX_PAYLOAD_BYTES=0 to import runs whole, or use the bundle itself"
            )
        if attributes.get(A.CONTENT_OMITTED):
            return (
                f"span {span_id} was exported without inputs and outputs "
                f"(capture_content=False); such a run cannot be replayed"
            )
        parent = found.span.get("parentSpanId")
        if parent and parent.lower() not in spans:
            return (
                f"incomplete: the parent {parent} of span {span_id} is missing (lost on the "
                f"way, or not yet written by the collector)"
            )
        seq = attributes.get(A.SEQ)
        if attributes.get(A.KIND) in _SFTRACE_KINDS and isinstance(seq, int):
            seqs.add(seq)
    missing = sorted(set(range(max(seqs, default=0) + 1)) - seqs)
    if missing:
        return f"incomplete: no span with {A.SEQ} {missing[0]} (lost, or not yet exported)"
    return None


def _checked_lines(
    trace_id: str, spans: dict[str, FoundSpan]
) -> tuple[list[tuple[FoundSpan, dict[str, Any]]], str | None]:
    """Each span in the shape of a bundle line, checked by the bundle's span validator;
    or the first problem (the run is then skipped)."""
    checker = SpanChecker(trace_id, parents_first=False)
    lines = []
    for span_id, found in spans.items():
        try:
            line = normalize_span(found.span, sftrace_span=A.KIND in found.attributes)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return [], f"span {span_id} is malformed ({exc!r})"
        problems, _ = checker.check(line)
        if problems:
            return [], f"the spans do not form a valid bundle: {problems[0]}"
        checker.accept(line, found.attributes)
        lines.append((found, line))
    return lines, None


def _write_bundle(
    path: Path,
    trace_id: str,
    lines: list[tuple[FoundSpan, dict[str, Any]]],
    root: FoundSpan,
    run_id: str,
    agent: str,
    source: ImportSource,
    overwrite: bool,
) -> None:
    start = int(root.span.get("startTimeUnixNano", 0))
    header = journal_header(
        trace_id,
        run_id=run_id,
        agent_name=agent,
        final_name=path.name,
        created_at=utc_iso(start),
    )
    header["environment"] = _environment(root, source)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = BundleWriter(partial_dir_for(path, safe_file_stem(run_id)), header)
    try:
        totals = RunTotals()
        for found, line in lines:
            seq = found.attributes.get(A.SEQ)
            writer.append(
                orjson.dumps(line),
                int(line["startTimeUnixNano"]),
                seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            )
            totals.add(found.attributes)
        manifest = manifest_from_parts(
            header,
            attributes=root.attributes,
            trace_id=trace_id,
            root_span_id=str(root.span["spanId"]),
            start=start,
            end=int(root.span.get("endTimeUnixNano", 0)),
            resource_attributes=normalize_attributes(root.resource),
            scope=root.scope,
            totals=totals,
            notes=[f"imported from {source.description} on {utc_iso()}"],
        )
        writer.finalize(manifest, path, overwrite=overwrite)
    except BaseException:
        writer.discard()
        raise


def _environment(root: FoundSpan, source: ImportSource) -> dict[str, Any]:
    """What is known of the recording environment: only what the resource says."""
    resource = decode_attributes(root.resource)
    recorded: dict[str, Any] = {"source": source.kind}
    for key, name in (
        (A.SFTRACE_VERSION, "sftrace"),
        ("telemetry.sdk.version", "opentelemetry_sdk"),
        ("process.runtime.version", "python"),
    ):
        if key in resource:
            recorded[name] = resource[key]
    recorded["imported_by"] = environment()
    recorded["imported_at"] = utc_iso()
    return recorded


# --- OTLP/JSON normalisation (the exact shape of bundle lines, see _otlp_json) ----------


def normalize_span(span: dict[str, Any], *, sftrace_span: bool) -> dict[str, Any]:
    """A collector's OTLP/JSON span in the shape ``encode_span`` writes.

    Same key order, decimal-string times, integer enums, typed values; fields bundles do
    not keep (``flags``, ``traceState``, dropped counts) are left out, and so are the
    attributes recording leaves out and the ones OTLP export added to sftrace spans.
    """
    drop = ALIASES | ENRICHMENT_ATTRIBUTES if sftrace_span else ALIASES
    line: dict[str, Any] = {
        "traceId": span["traceId"],
        "spanId": span["spanId"],
        "name": str(span.get("name", "")),
        "kind": _enum(span.get("kind", 0), _KIND_NAMES),
        "startTimeUnixNano": str(int(span.get("startTimeUnixNano", 0))),
        "endTimeUnixNano": str(int(span.get("endTimeUnixNano", 0))),
        "attributes": normalize_attributes(span.get("attributes") or (), drop),
    }
    if sftrace_span:
        line["attributes"] = _stored_items(line["attributes"])
    status = _status(span.get("status") or {})
    if status:
        line["status"] = status
    parent = span.get("parentSpanId")
    if parent:
        line["parentSpanId"] = str(parent).lower()
    events = span.get("events")
    if events:
        line["events"] = [
            {
                "timeUnixNano": str(int(event.get("timeUnixNano", 0))),
                "name": str(event.get("name", "")),
                "attributes": normalize_attributes(event.get("attributes") or ()),
            }
            for event in events
        ]
    links = span.get("links")
    if links:
        line["links"] = [
            {
                "traceId": str(link["traceId"]).lower(),
                "spanId": str(link["spanId"]).lower(),
                "attributes": normalize_attributes(link.get("attributes") or ()),
            }
            for link in links
        ]
    return line


def normalize_attributes(
    items: Iterable[dict[str, Any]], drop: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    return [
        {"key": item["key"], "value": normalize_value(item.get("value") or {})}
        for item in items
        if item["key"] not in drop
    ]


def _stored_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Normalized attributes of an sftrace span as a bundle line stores them
    (``stored_attributes``): kept values exactly as normalized, the digests added."""
    by_key = {item["key"]: item for item in items}
    kept = stored_attributes({key: decode_value(item["value"]) for key, item in by_key.items()})
    return [
        by_key[key] if key in by_key else {"key": key, "value": encode_value(value)}
        for key, value in kept.items()
    ]


def normalize_value(value: dict[str, Any]) -> dict[str, Any]:
    """One ``AnyValue`` in the bundle's spelling; unknown shapes are kept as they are."""
    if "stringValue" in value:
        return {"stringValue": str(value["stringValue"])}
    if "boolValue" in value:
        return {"boolValue": bool(value["boolValue"])}
    if "intValue" in value:
        return {"intValue": str(int(value["intValue"]))}
    if "doubleValue" in value:
        return {"doubleValue": float(value["doubleValue"])}
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or ()
        return {"arrayValue": {"values": [normalize_value(item) for item in items]}}
    if "kvlistValue" in value:
        items = (value["kvlistValue"] or {}).get("values") or ()
        return {"kvlistValue": {"values": normalize_attributes(items)}}
    return value


def _enum(value: Any, names: dict[str, int]) -> int:
    if isinstance(value, str) and not value.isdigit():
        return names.get(value, 0)
    return int(value)


def _status(status: dict[str, Any]) -> dict[str, Any]:
    code = _enum(status.get("code", 0), _STATUS_NAMES)
    if code == 0:
        return {}
    encoded: dict[str, Any] = {"code": code}
    if status.get("message"):
        encoded["message"] = str(status["message"])
    return encoded
