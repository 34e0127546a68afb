"""Pushing archived bundles to an OTLP collector: :func:`push_bundles`.

The spans are sent through the same exporters as live export (sftrace's OTLP/JSON one
or the official ones, see ``otlp_encoder``) with their original trace ids, span ids,
parents and timestamps (rebuilt from the bundle's OTLP/JSON lines), the attributes a
bundle leaves out restored, and the same OpenInference attributes as live export. When
live export left a note of the spans it could not send (``unsent``), only those are
sent, and the note is removed once they were.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._export.enrich import SpanPreparer
from sftrace._export.otlp import EXPORTER_LOGGERS, make_exporter
from sftrace._export.otlp_settings import (
    OtlpSettings,
    default_endpoint,
    normalize_endpoint,
    parse_headers,
    protocol_asked,
    resolve_compression,
    resolve_encoder,
    resolve_protocol,
    resolve_timeout,
    standard_endpoint,
)
from sftrace._export.unsent import clear_unsent, read_unsent
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes, decode_span
from sftrace._model.text import pluralize, shorten

# Spans per export request, and a soft bound on its size: collectors refuse large
# requests (gRPC receivers default to 4 MiB).
PUSH_BATCH_SPANS = 512
PUSH_BATCH_BYTES = 2 * 1024 * 1024


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
    encoder: str | None = None,
) -> list[PushResult]:
    """Send archived bundles to an OTLP collector, one result per bundle.

    ``endpoint``, ``protocol`` and ``headers`` default like ``configure()``'s (the
    standard ``OTEL_EXPORTER_OTLP_*`` variables), then to OpenTelemetry's default local
    collector. ``timeout``: seconds per request (default ``$OTEL_EXPORTER_OTLP_TIMEOUT``
    or 10). ``encoder``: like ``configure(otlp_encoder=...)`` (default
    ``$SFTRACE_OTLP_ENCODER``, else ``auto``). Bundles are loaded and checked first: an
    unreadable bundle raises ``BundleError`` before anything is sent. Values are sent
    whole (no payload cap). A bundle with a note of spans live export did not send
    (``<bundle>.otlp-unsent.json``) sends only those.
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
        encoder=resolve_encoder(encoder, resolved_protocol),
        compression=resolve_compression(),
        protocol_asked=protocol_asked(protocol),
    )
    # Every value is checked before anything is sent.
    loaded = [(Path(path), load_bundle(path, eager=True)) for path in bundles]
    exporter = make_exporter(settings, SpanPreparer(), log_once=False)
    results = []
    try:
        for path, bundle in loaded:
            results.append(_push_one(exporter, path, bundle, settings.endpoint))
    finally:
        exporter.shutdown()
    return results


def _push_one(exporter: SpanExporter, path: Path, bundle: Bundle, endpoint: str) -> PushResult:
    result = PushResult(path, run_id=bundle.run_id, trace_id=bundle.manifest.trace_id)
    lines: Sequence[dict[str, Any]] = bundle.spans
    unsent = read_unsent(path)
    if unsent is not None:  # live export sent the others already
        lines = [line for line in lines if line.get("spanId") in unsent]
    spans = spans_of_bundle(bundle, lines)
    with _capture_exporter_logs() as messages:
        for batch in _batches(lines, spans):
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                reason = " | ".join(dict.fromkeys(shorten(m, 500) for m in messages)) or "no detail"
                result.error = (
                    f"sending {str(path)!r} to {endpoint} failed after {result.spans} of "
                    f"{pluralize(len(spans), 'span')}: {reason}; check that a collector listens "
                    f"there (--endpoint, --protocol) and accepts the request"
                )
                return result
            result.spans += len(batch)
    if unsent is not None:
        clear_unsent(path)
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


def spans_of_bundle(
    bundle: Bundle, lines: Sequence[dict[str, Any]] | None = None
) -> list[ReadableSpan]:
    """The bundle's spans (or those of its ``lines``) as SDK spans, as they were recorded
    (aliases restored)."""
    manifest = bundle.manifest
    resource = Resource(decode_attributes(manifest.resource.get("attributes") or ()))
    scope_info = manifest.scope or {}
    scope = InstrumentationScope(
        str(scope_info.get("name") or A.INSTRUMENTATION_SCOPE),
        str(scope_info.get("version") or "") or None,
    )
    chosen = bundle.spans if lines is None else lines
    return [decode_span(span, resource, scope) for span in chosen]
