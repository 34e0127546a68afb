"""Bundles to and from collectors: ``push`` archived bundles, ``import`` collector files.

- :func:`push_bundles` sends bundles to an OTLP endpoint through the official exporters,
  with their original trace ids, span ids, parents and timestamps (the spans are rebuilt
  from the bundle's OTLP/JSON lines), the attributes a bundle leaves out restored, and
  the same OpenInference attributes as live export.
- :func:`import_otlp_files` reads the OpenTelemetry Collector ``file`` exporter's output
  (one ``ExportTraceServiceRequest`` as OTLP/JSON per line, hex ids; runs may be spread
  over many lines and files and interleaved) and writes one bundle per complete sftrace
  run with the same writer as recording, so the bundle replays like the original.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from sftrace._bundle.format import BUNDLE_SUFFIX, FORMAT_NAME, FORMAT_VERSION
from sftrace._bundle.load import load_bundle
from sftrace._bundle.manifest import RunTotals, environment, manifest_from_parts, utc_iso
from sftrace._bundle.names import safe_file_stem
from sftrace._bundle.reader import Bundle, bounded_lines
from sftrace._bundle.writer import BundleWriter, partial_dir_for
from sftrace._errors import BundleError
from sftrace._export.otlp import (
    ENRICHMENT_ATTRIBUTES,
    EXPORTER_LOGGERS,
    EnrichingSpanExporter,
    OtlpSettings,
    SpanPreparer,
    default_endpoint,
    normalize_endpoint,
    official_exporter,
    parse_headers,
    resolve_protocol,
    resolve_timeout,
    standard_endpoint,
)
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes

# Spans per export request, and a soft bound on its size: collectors refuse large
# requests (gRPC receivers default to 4 MiB).
PUSH_BATCH_SPANS = 512
PUSH_BATCH_BYTES = 2 * 1024 * 1024

# --- push -----------------------------------------------------------------------------


@dataclass
class PushResult:
    """How sending one bundle went: spans sent, or why it failed."""

    bundle: Path
    run_id: str | None = None
    trace_id: str | None = None
    spans: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def resolve_push_endpoint(endpoint: str | None, protocol: str) -> str:
    """The argument, else ``$SFTRACE_OTLP_ENDPOINT``, the standard OTEL_EXPORTER_OTLP_*
    variables, else OpenTelemetry's default (``localhost:4318`` / ``localhost:4317``)."""
    if endpoint is not None:
        return normalize_endpoint(endpoint, protocol, source="endpoint")
    configured = os.environ.get("SFTRACE_OTLP_ENDPOINT", "").strip()
    if configured:
        return normalize_endpoint(configured, protocol, source="SFTRACE_OTLP_ENDPOINT")
    return standard_endpoint(protocol) or default_endpoint(protocol)


def push_bundles(
    bundles: Iterable[str | os.PathLike[str]],
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    timeout: float | None = None,
) -> list[PushResult]:
    """Send archived bundles to an OTLP collector, one result per bundle.

    ``endpoint``, ``protocol`` and ``headers`` default like ``configure()``'s (the
    standard ``OTEL_EXPORTER_OTLP_*`` variables), then to OpenTelemetry's default local
    collector. ``timeout``: seconds per request (default ``$OTEL_EXPORTER_OTLP_TIMEOUT``
    or 10). Bundles are loaded and checked first: an unreadable bundle raises
    ``BundleError`` before anything is sent. Values are sent whole (no payload cap).
    """
    resolved_protocol = resolve_protocol(protocol)
    header_source = "headers"
    if headers is None:
        headers = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get(
            "OTEL_EXPORTER_OTLP_HEADERS"
        )
        header_source = "OTEL_EXPORTER_OTLP_HEADERS"
    settings = OtlpSettings(
        endpoint=resolve_push_endpoint(endpoint, resolved_protocol),
        protocol=resolved_protocol,
        headers=tuple(sorted(parse_headers(headers, source=header_source).items())),
        timeout_s=timeout if timeout is not None else resolve_timeout(),
        capture_content=True,
        max_payload_bytes=None,
    )
    loaded = [(Path(path), load_bundle(path)) for path in bundles]
    exporter = EnrichingSpanExporter(official_exporter(settings), SpanPreparer(), log_once=False)
    results = []
    try:
        for path, bundle in loaded:
            results.append(_push_one(exporter, path, bundle, settings.endpoint))
    finally:
        exporter.shutdown()
    return results


def _push_one(
    exporter: EnrichingSpanExporter, path: Path, bundle: Bundle, endpoint: str
) -> PushResult:
    result = PushResult(path, run_id=bundle.run_id, trace_id=bundle.manifest.trace_id)
    spans = spans_of_bundle(bundle)
    with _capture_exporter_logs() as messages:
        for batch in _batches(bundle.spans, spans):
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                reason = " | ".join(dict.fromkeys(m[:500] for m in messages)) or "no detail"
                result.error = (
                    f"sending {str(path)!r} to {endpoint} failed after {result.spans} of "
                    f"{len(spans)} spans: {reason}; check that a collector listens there "
                    f"(--endpoint, --protocol) and accepts the request"
                )
                return result
            result.spans += len(batch)
    return result


def _batches(
    encoded: Sequence[dict[str, Any]], spans: Sequence[ReadableSpan]
) -> Iterator[list[ReadableSpan]]:
    batch: list[ReadableSpan] = []
    size = 0
    for line, span in zip(encoded, spans, strict=True):
        weight = len(orjson.dumps(line))
        if batch and (len(batch) >= PUSH_BATCH_SPANS or size + weight > PUSH_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(span)
        size += weight
    if batch:
        yield batch


class _ListHandler(logging.Handler):
    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the push
            message = str(record.msg)
        self.messages.append(message.split(" [sftrace OTLP export")[0])


@contextmanager
def _capture_exporter_logs() -> Iterator[list[str]]:
    """Collect what the official exporters log (their only account of a failure)."""
    messages: list[str] = []
    handler = _ListHandler(messages)
    loggers = [logging.getLogger(name) for name in EXPORTER_LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield messages
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@contextmanager
def exporter_logs_silenced() -> Iterator[None]:
    """Keep the exporters' own log lines off stderr (the CLI reports failures itself)."""
    loggers = [logging.getLogger(name) for name in EXPORTER_LOGGERS]
    saved = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.propagate = False
    try:
        yield
    finally:
        for logger, propagate in zip(loggers, saved, strict=True):
            logger.propagate = propagate


def spans_of_bundle(bundle: Bundle) -> list[ReadableSpan]:
    """The bundle's spans as SDK spans, as they were recorded (aliases restored)."""
    manifest = bundle.manifest
    resource = Resource(decode_attributes(manifest.resource.get("attributes") or ()))
    scope_info = manifest.scope or {}
    scope = InstrumentationScope(
        str(scope_info.get("name") or A.INSTRUMENTATION_SCOPE),
        str(scope_info.get("version") or "") or None,
    )
    return [_span_from_json(span, resource, scope) for span in bundle.spans]


def _span_from_json(
    span: dict[str, Any], resource: Resource, scope: InstrumentationScope
) -> ReadableSpan:
    trace_id = int(span["traceId"], 16)
    attributes = decode_attributes(span.get("attributes") or ())
    if attributes.get(A.KIND) == A.KIND_TOOL:
        # Recording sets these GenAI aliases on tool spans; bundles leave them out.
        if A.INPUT in attributes:
            attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = attributes[A.INPUT]
        if A.OUTPUT in attributes:
            attributes[A.GEN_AI_TOOL_CALL_RESULT] = attributes[A.OUTPUT]
    parent_id = span.get("parentSpanId")
    status = span.get("status") or {}
    code = StatusCode(int(status.get("code", 0)))
    return ReadableSpan(
        name=str(span["name"]),
        context=_context(trace_id, span["spanId"]),
        parent=_context(trace_id, parent_id) if parent_id else None,
        resource=resource,
        attributes=attributes,
        events=tuple(
            Event(
                str(event.get("name", "")),
                decode_attributes(event.get("attributes") or ()),
                int(event.get("timeUnixNano", 0)),
            )
            for event in span.get("events", ())
        ),
        links=tuple(
            Link(
                _context(int(link["traceId"], 16), link["spanId"]),
                decode_attributes(link.get("attributes") or ()),
            )
            for link in span.get("links", ())
        ),
        kind=SpanKind(max(int(span.get("kind", 1)) - 1, 0)),
        status=Status(code, status.get("message") if code is StatusCode.ERROR else None),
        start_time=int(span.get("startTimeUnixNano", 0)),
        end_time=int(span.get("endTimeUnixNano", 0)),
        instrumentation_scope=scope,
    )


def _context(trace_id: int, span_id: str) -> SpanContext:
    return SpanContext(trace_id, int(span_id, 16), False, TraceFlags(TraceFlags.SAMPLED))


# --- import ---------------------------------------------------------------------------


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

    @property
    def written(self) -> list[ImportedRun]:
        return [run for run in self.runs if run.path is not None]

    @property
    def skipped(self) -> list[ImportedRun]:
        return [run for run in self.runs if run.path is None]


@dataclass
class _Found:
    span: dict[str, Any]
    resource: list[dict[str, Any]]
    scope: dict[str, Any] | None
    attributes: dict[str, Any]


_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
# Left out of bundle lines, as recording does (readers restore them).
_ALIASES = frozenset(A.INPUT_ALIASES + A.OUTPUT_ALIASES)
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
    traces: dict[str, dict[str, _Found]] = {}
    paths = [Path(name) for name in files]
    result = ImportResult()
    for path in paths:
        for number, request in _requests(path):
            result.spans_read += _collect(request, traces, f"{path}:{number}")
    target = Path(output)
    for trace_id, spans in traces.items():
        runs = [found for found in spans.values() if found.attributes.get(A.KIND) == A.KIND_RUN]
        if not runs:
            result.other_traces += 1
            continue
        result.runs.append(_import_run(trace_id, spans, runs, target, overwrite, paths))
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


def _collect(request: dict[str, Any], traces: dict[str, dict[str, _Found]], where: str) -> int:
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
                    trace_id = _hex_id(span.get("traceId"), 32, "traceId")
                    span_id = _hex_id(span.get("spanId"), 16, "spanId")
                    span["traceId"], span["spanId"] = trace_id, span_id
                    spans = traces.setdefault(trace_id, {})
                    count += 1
                    if span_id in spans:
                        continue  # a collector may deliver a span twice
                    attributes = decode_attributes(span.get("attributes") or ())
                    spans[span_id] = _Found(span, resource, scope, attributes)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        message = str(exc) if isinstance(exc, ValueError) else f"malformed request ({exc!r})"
        raise BundleError(f"{where}: {message}", path=where.rsplit(":", 1)[0]) from None
    return count


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
    spans: dict[str, _Found],
    runs: list[_Found],
    output: Path,
    overwrite: bool,
    sources: list[Path],
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
    path = output / f"{safe_file_stem(agent)}-{safe_file_stem(run_id)}{BUNDLE_SUFFIX}"
    if path.exists() and not overwrite:
        run.problem = f"{path} already exists; pass --overwrite to replace it"
        return run
    try:
        _write_bundle(path, trace_id, spans, root, run_id, agent, sources, overwrite)
        load_bundle(path, verify_integrity=True)
    except BundleError as exc:
        shutil.rmtree(path, ignore_errors=True)
        run.problem = f"the spans do not form a valid bundle: {exc}"
        return run
    run.path = path
    return run


def _completeness_problem(spans: dict[str, _Found], runs: list[_Found]) -> str | None:
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


def _write_bundle(
    path: Path,
    trace_id: str,
    spans: dict[str, _Found],
    root: _Found,
    run_id: str,
    agent: str,
    sources: list[Path],
    overwrite: bool,
) -> None:
    start = int(root.span.get("startTimeUnixNano", 0))
    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "trace_id": trace_id,
        "run_id": run_id,
        "agent_name": agent,
        "final_name": path.name,
        "created_at": utc_iso(start),
        "environment": _environment(root),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = BundleWriter(partial_dir_for(path, safe_file_stem(run_id)), header)
    try:
        totals = RunTotals()
        for found in spans.values():
            line = normalize_span(found.span, sftrace_span=A.KIND in found.attributes)
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
        )
        names = ", ".join(source.name for source in sources)
        manifest["notes"] = [f"imported from OTLP/JSON ({names}) on {utc_iso()}"]
        writer.finalize(manifest, path, overwrite=overwrite)
    except BaseException:
        writer.discard()
        raise


def _environment(root: _Found) -> dict[str, Any]:
    """What is known of the recording environment: only what the resource says."""
    resource = decode_attributes(root.resource)
    recorded: dict[str, Any] = {"source": "otlp-import"}
    for key, name in (
        (A.SFTRACE_VERSION, "sftrace"),
        ("telemetry.sdk.version", "opentelemetry_sdk"),
        ("process.runtime.version", "python"),
    ):
        if key in resource:
            recorded[name] = resource[key]
    recorded["imported_by"] = environment()
    recorded["imported_at"] = _dt.datetime.now(_dt.UTC).isoformat().replace("+00:00", "Z")
    return recorded


# --- OTLP/JSON normalisation (the exact shape of bundle lines, see _otlp_json) ----------


def normalize_span(span: dict[str, Any], *, sftrace_span: bool) -> dict[str, Any]:
    """A collector's OTLP/JSON span in the shape ``encode_span`` writes.

    Same key order, decimal-string times, integer enums, typed values; fields bundles do
    not keep (``flags``, ``traceState``, dropped counts) are left out, and so are the
    attributes recording leaves out and the ones OTLP export added to sftrace spans.
    """
    drop = _ALIASES | ENRICHMENT_ATTRIBUTES if sftrace_span else _ALIASES
    line: dict[str, Any] = {
        "traceId": span["traceId"],
        "spanId": span["spanId"],
        "name": str(span.get("name", "")),
        "kind": _enum(span.get("kind", 0), _KIND_NAMES),
        "startTimeUnixNano": str(int(span.get("startTimeUnixNano", 0))),
        "endTimeUnixNano": str(int(span.get("endTimeUnixNano", 0))),
        "attributes": normalize_attributes(span.get("attributes") or (), drop),
        "status": _status(span.get("status") or {}),
    }
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
