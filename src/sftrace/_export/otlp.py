"""OTLP export of recorded spans: settings, the enriching exporter and its processor.

sftrace ships spans to a collector through the official OTLP exporters, composed:

``OtlpSpanProcessor`` (a ``BatchSpanProcessor`` that can be switched off, with bounded
flush and shutdown) -> ``EnrichingSpanExporter`` (OpenInference attributes, payload cap,
content stripping) -> the official ``OTLPSpanExporter`` (HTTP/protobuf or gRPC).

The agent never waits on the network: ``on_end`` only queues the span. A collector that
is down or slow costs the agent nothing; its failures are logged once per cause (the
official exporters log every failed batch; sftrace silences the repeats of its own).
Only the OTLP copy of a span is changed: the bundle always keeps every value whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from sftrace._errors import ConfigError
from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._model.otlp_json import copy_span
from sftrace._version import __version__

PROTOCOL_HTTP = "http/protobuf"
PROTOCOL_GRPC = "grpc"
PROTOCOLS = (PROTOCOL_HTTP, PROTOCOL_GRPC)
DEFAULT_TIMEOUT_S = 10.0
# Default cap of one payload attribute in the OTLP copy of a span. Large enough that
# production runs (long prompts, big tool results) reach the collector whole and can be
# imported back as replayable bundles; small enough that one pathological value cannot
# push a batch far past a collector's request limit (4 MiB for gRPC by default).
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
TRACES_PATH = "/v1/traces"

# Attributes holding inputs and outputs: left out of OTLP with capture_content=False.
CONTENT_ATTRIBUTES = frozenset(
    {
        A.INPUT,
        A.OUTPUT,
        A.RUN_INPUT,
        A.RUN_OUTPUT,
        A.GEN_AI_TOOL_CALL_ARGUMENTS,
        A.GEN_AI_TOOL_CALL_RESULT,
        A.GEN_AI_INPUT_MESSAGES,
        A.GEN_AI_OUTPUT_MESSAGES,
        A.GEN_AI_SYSTEM_INSTRUCTIONS,
        A.INPUT_VALUE,
        A.OUTPUT_VALUE,
    }
)
CONTENT_EVENT_ATTRIBUTES = frozenset({A.EVENT_BEFORE, A.EVENT_AFTER})
# What the enrichment adds to sftrace spans (an importer removes them again).
ENRICHMENT_ATTRIBUTES = frozenset(
    {
        A.OPENINFERENCE_SPAN_KIND,
        A.INPUT_VALUE,
        A.INPUT_MIME_TYPE,
        A.OUTPUT_VALUE,
        A.OUTPUT_MIME_TYPE,
        A.LLM_MODEL_NAME,
        A.LLM_PROVIDER,
        A.LLM_TOKEN_COUNT_PROMPT,
        A.LLM_TOKEN_COUNT_COMPLETION,
        A.LLM_TOKEN_COUNT_TOTAL,
        A.TOOL_NAME,
    }
)
# The SDK's service.name when nobody set one ("unknown_service:python").
_SDK_DEFAULT_SERVICE = "unknown_service"
_SPAN_KINDS = {
    A.KIND_RUN: A.OPENINFERENCE_AGENT,
    A.KIND_TOOL: A.OPENINFERENCE_TOOL,
    A.KIND_LLM: A.OPENINFERENCE_LLM,
}


# --- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OtlpSettings:
    """Where and how spans are shipped; equal settings mean the same exporter."""

    endpoint: str
    protocol: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    capture_content: bool = True
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES
    service_name: str | None = None  # for spans whose provider has none of its own


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def resolve_protocol(protocol: str | None) -> str:
    """The OTLP protocol: the argument, else ``$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``,
    else ``$OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf``."""
    source = "otlp_protocol"
    if protocol is None:
        protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        source = "OTEL_EXPORTER_OTLP_PROTOCOL"
    if protocol is None:
        return PROTOCOL_HTTP
    value = protocol.strip().lower()
    if value in PROTOCOLS:
        return value
    hint = (
        "the Python OTLP exporters do not send OTLP/JSON; use 'http/protobuf'"
        if value == "http/json"
        else f"use one of {list(PROTOCOLS)}"
    )
    raise ConfigError(f"{source}: unsupported OTLP protocol {protocol!r}: {hint}")


def normalize_endpoint(endpoint: str, protocol: str, *, source: str = "otlp_endpoint") -> str:
    """Check an endpoint URL; for HTTP, add ``/v1/traces`` when the URL has no path.

    ``http://collector:4318`` and ``http://collector:4318/v1/traces`` both work; gRPC
    endpoints are ``http://host:4317`` (plaintext) or ``https://host:4317`` (TLS).
    """
    text = endpoint.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{source}: {endpoint!r} is not an http:// or https:// URL; give the collector's "
            f"URL with its scheme, e.g. 'http://127.0.0.1:4318' (http/protobuf) or "
            f"'http://127.0.0.1:4317' (grpc); http:// means plaintext, https:// TLS"
        )
    if protocol == PROTOCOL_HTTP and parts.path in ("", "/"):
        return text.rstrip("/") + TRACES_PATH
    return text


def parse_headers(headers: Mapping[str, str] | str | None, *, source: str) -> dict[str, str]:
    """Headers from a mapping or an ``OTEL_EXPORTER_OTLP_HEADERS``-style ``k=v,k2=v2``."""
    if headers is None:
        return {}
    if isinstance(headers, str):
        from opentelemetry.util.re import parse_env_headers

        return dict(parse_env_headers(headers, liberal=True))
    if not isinstance(headers, Mapping):
        raise ConfigError(
            f"{source}: headers must be a dict of str to str or a 'key=value,...' string, "
            f"got {type(headers).__qualname__}"
        )
    parsed: dict[str, str] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key.strip():
            raise ConfigError(f"{source}: header {key!r}: {value!r} must be a str: str pair")
        parsed[key.strip().lower()] = value
    return parsed


def resolve_timeout() -> float:
    """Seconds per export: ``$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else
    ``$OTEL_EXPORTER_OTLP_TIMEOUT``, else 10 (seconds, as the Python exporters read them)."""
    raw = _env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_TIMEOUT: {raw!r} is not a positive number of seconds"
        )
    return value


def resolve_capture_content(capture_content: bool | None) -> bool:
    """The argument, else ``$SFTRACE_CAPTURE_CONTENT`` (true/false), else True."""
    if capture_content is not None:
        if not isinstance(capture_content, bool):
            raise ConfigError(f"capture_content must be True or False, got {capture_content!r}")
        return capture_content
    raw = _env("SFTRACE_CAPTURE_CONTENT")
    if raw is None:
        return True
    flag = raw.lower()
    if flag in ("1", "true", "yes", "on"):
        return True
    if flag in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"SFTRACE_CAPTURE_CONTENT: {raw!r} is not true or false")


def resolve_max_payload_bytes(max_payload_bytes: int | None) -> int | None:
    """The argument, else ``$SFTRACE_MAX_PAYLOAD_BYTES``, else 1048576 (1 MiB); 0 means no cap."""
    source = "max_payload_bytes"
    value: Any = max_payload_bytes
    if value is None:
        raw = _env("SFTRACE_MAX_PAYLOAD_BYTES")
        if raw is None:
            return DEFAULT_MAX_PAYLOAD_BYTES
        source = "SFTRACE_MAX_PAYLOAD_BYTES"
        try:
            value = int(raw)
        except ValueError:
            value = raw
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(
            f"{source} must be a non-negative number of bytes (0: no cap), got {value!r}"
        )
    return value or None


def resolve_settings(
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Mapping[str, str] | str | None,
    capture_content: bool | None,
    max_payload_bytes: int | None,
    standard_endpoint_variables: bool,
    service_name: str | None = None,
) -> OtlpSettings | None:
    """The OTLP settings of ``configure()``; None when no endpoint is configured.

    The endpoint is the argument, else ``$SFTRACE_OTLP_ENDPOINT``, else (only when
    ``standard_endpoint_variables``) ``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is)
    or ``$OTEL_EXPORTER_OTLP_ENDPOINT`` (the base URL; HTTP adds ``/v1/traces``), unless
    ``$OTEL_TRACES_EXPORTER`` names exporters without ``otlp``.
    """
    resolved_protocol = resolve_protocol(protocol)
    url: str | None = None
    if endpoint is not None:
        if not isinstance(endpoint, str):
            raise ConfigError(f"otlp_endpoint must be a URL string, got {endpoint!r}")
        url = normalize_endpoint(endpoint, resolved_protocol)
    elif (sftrace_endpoint := _env("SFTRACE_OTLP_ENDPOINT")) is not None:
        url = normalize_endpoint(
            sftrace_endpoint, resolved_protocol, source="SFTRACE_OTLP_ENDPOINT"
        )
    elif standard_endpoint_variables and _otlp_exporter_wanted():
        url = standard_endpoint(resolved_protocol)
    if url is None:
        return None
    header_source = "otlp_headers"
    if headers is None:
        headers = _env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
        header_source = "OTEL_EXPORTER_OTLP_HEADERS"
    return OtlpSettings(
        endpoint=url,
        protocol=resolved_protocol,
        headers=tuple(sorted(parse_headers(headers, source=header_source).items())),
        timeout_s=resolve_timeout(),
        capture_content=resolve_capture_content(capture_content),
        max_payload_bytes=resolve_max_payload_bytes(max_payload_bytes),
        service_name=service_name,
    )


def standard_endpoint(protocol: str) -> str | None:
    """The endpoint named by the standard OTEL_EXPORTER_OTLP_* variables, if any."""
    traces = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces is not None:
        normalize_endpoint(traces, PROTOCOL_GRPC, source="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return traces  # the signal-specific variable is used as is
    base = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if base is None:
        return None
    checked = normalize_endpoint(base, PROTOCOL_GRPC, source="OTEL_EXPORTER_OTLP_ENDPOINT")
    if protocol == PROTOCOL_HTTP:
        return checked.rstrip("/") + TRACES_PATH
    return checked


def _otlp_exporter_wanted() -> bool:
    names = _env("OTEL_TRACES_EXPORTER")
    if names is None:
        return True
    return "otlp" in {name.strip().lower() for name in names.split(",")}


def default_endpoint(protocol: str) -> str:
    """OpenTelemetry's default collector address for ``protocol``."""
    if protocol == PROTOCOL_GRPC:
        return DEFAULT_GRPC_ENDPOINT
    return DEFAULT_HTTP_ENDPOINT + TRACES_PATH


def official_exporter(settings: OtlpSettings) -> SpanExporter:
    """The official OTLP span exporter for ``settings`` (nothing is sent until export)."""
    headers = dict(settings.headers) or None
    if settings.protocol == PROTOCOL_GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(
            endpoint=settings.endpoint,
            insecure=urlsplit(settings.endpoint).scheme == "http",
            headers=headers,
            timeout=settings.timeout_s,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=settings.endpoint, headers=headers, timeout=settings.timeout_s)


# --- logging once per cause --------------------------------------------------------------

# Loggers the official exporters and the batch processor report failures on.
EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
)
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_quiet = threading.local()


class _OncePerCause(logging.Filter):
    """Lets through the first record of each cause logged during sftrace's own export.

    Only records emitted while sftrace's exporter or processor is running in the current
    thread are filtered: the application's own exporters keep their normal logging.
    """

    def __init__(self) -> None:
        super().__init__("sftrace-otlp")
        self._seen: set[tuple[str, str, tuple[str, ...]]] = set()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_quiet, "depth", 0):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        # A cause is the message template and its arguments without numbers and
        # addresses (backoff delays, object ids and ports vary from attempt to attempt).
        key = (
            record.name,
            str(record.msg),
            tuple(_VARYING.sub("#", str(arg)) for arg in args if not isinstance(arg, float)),
        )
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) > 1000:
                self._seen.clear()
            self._seen.add(key)
        record.msg = f"{record.msg} [sftrace OTLP export; repeats are not logged]"
        return True


_filter = _OncePerCause()
_filter_installed = False
_filter_lock = threading.Lock()


def _install_filter() -> None:
    global _filter_installed
    with _filter_lock:
        if _filter_installed:
            return
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(_filter)
        _filter_installed = True


class _Quiet:
    """Marks the current thread as running sftrace's export (see ``_OncePerCause``)."""

    def __enter__(self) -> None:
        _quiet.depth = getattr(_quiet, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _quiet.depth -= 1


# --- the OTLP copy of a span -------------------------------------------------------------


def truncate_utf8(value: str, limit: int) -> str | None:
    """``value`` cut to ``limit`` UTF-8 bytes plus a visible marker; None if it fits."""
    if len(value) * 4 <= limit:  # cheap: even 4-byte characters would fit
        return None
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return None
    kept = encoded[:limit].decode("utf-8", "ignore")
    return f"{kept}…[truncated by sftrace: {len(encoded)} bytes in full]"


def openinference_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """OpenInference attributes for an sftrace span (what Phoenix and Langfuse render)."""
    kind = attributes.get(A.KIND)
    span_kind = _SPAN_KINDS.get(kind) if isinstance(kind, str) else None
    if span_kind is None:
        return {}
    extra: dict[str, Any] = {A.OPENINFERENCE_SPAN_KIND: span_kind}
    if kind == A.KIND_RUN:
        input_json, output_json = attributes.get(A.RUN_INPUT), attributes.get(A.RUN_OUTPUT)
    else:
        input_json, output_json = attributes.get(A.INPUT), attributes.get(A.OUTPUT)
    if isinstance(input_json, str):
        extra[A.INPUT_VALUE] = input_json
        extra[A.INPUT_MIME_TYPE] = A.MIME_JSON
    if isinstance(output_json, str):
        extra[A.OUTPUT_VALUE] = output_json
        extra[A.OUTPUT_MIME_TYPE] = A.MIME_JSON
    if kind == A.KIND_TOOL:
        name = attributes.get(A.GEN_AI_TOOL_NAME)
        if isinstance(name, str):
            extra[A.TOOL_NAME] = name
    elif kind == A.KIND_LLM:
        model = attributes.get(A.GEN_AI_RESPONSE_MODEL) or attributes.get(A.GEN_AI_REQUEST_MODEL)
        if isinstance(model, str):
            extra[A.LLM_MODEL_NAME] = model
        provider = attributes.get(A.GEN_AI_PROVIDER_NAME)
        if isinstance(provider, str):
            extra[A.LLM_PROVIDER] = provider
        prompt = _int(attributes.get(A.GEN_AI_USAGE_INPUT_TOKENS))
        completion = _int(attributes.get(A.GEN_AI_USAGE_OUTPUT_TOKENS))
        total = _int(attributes.get(A.USAGE_TOTAL_TOKENS))
        if prompt is not None:
            extra[A.LLM_TOKEN_COUNT_PROMPT] = prompt
        if completion is not None:
            extra[A.LLM_TOKEN_COUNT_COMPLETION] = completion
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        if total is not None:
            extra[A.LLM_TOKEN_COUNT_TOTAL] = total
    return extra


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class SpanPreparer:
    """Turns a finished span into its OTLP copy (the original span is never changed)."""

    def __init__(
        self,
        *,
        capture_content: bool = True,
        max_payload_bytes: int | None = None,
        resource_attributes: Mapping[str, Any] | None = None,
        service_name: str | None = None,
    ) -> None:
        self.capture_content = capture_content
        self.max_payload_bytes = max_payload_bytes
        self._resource_attributes = dict(resource_attributes or {})
        self._service_name = service_name
        self._resources: dict[int, tuple[Resource, Resource]] = {}

    def prepare(self, span: ReadableSpan) -> ReadableSpan:
        attributes = dict(span.attributes or {})
        if A.KIND in attributes:
            for key, value in openinference_attributes(attributes).items():
                attributes.setdefault(key, value)
        if not self.capture_content:
            omitted = [key for key in attributes if key in CONTENT_ATTRIBUTES]
            for key in omitted:
                del attributes[key]
            if omitted:
                attributes[A.CONTENT_OMITTED] = True
        events = span.events
        if not self.capture_content or self.max_payload_bytes:
            events = tuple(self._prepare_event(event) for event in span.events)
        if self.max_payload_bytes:
            truncated = self._cap(attributes)
            if truncated:
                attributes[A.TRUNCATED] = tuple(truncated)
        return copy_span(
            span, attributes=attributes, resource=self._resource(span.resource), events=events
        )

    def _cap(self, attributes: dict[str, Any]) -> list[str]:
        limit = self.max_payload_bytes
        assert limit
        truncated = []
        for key, value in attributes.items():
            if isinstance(value, str):
                cut = truncate_utf8(value, limit)
                if cut is not None:
                    attributes[key] = cut
                    truncated.append(key)
        return truncated

    def _prepare_event(self, event: Event) -> Event:
        attributes = dict(event.attributes or {})
        changed = False
        if not self.capture_content:
            for key in CONTENT_EVENT_ATTRIBUTES & attributes.keys():
                del attributes[key]
                changed = True
        if self.max_payload_bytes and self._cap(attributes):
            changed = True
        if not changed:
            return event
        return Event(event.name, attributes, event.timestamp)

    def _resource(self, resource: Resource) -> Resource:
        """The resource plus sftrace's defaults for what it lacks (cached per resource)."""
        if not self._resource_attributes and self._service_name is None:
            return resource
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1]
        missing = {
            key: value
            for key, value in self._resource_attributes.items()
            if key not in resource.attributes
        }
        current = str(resource.attributes.get(A.SERVICE_NAME, ""))
        if self._service_name is not None and current.startswith(_SDK_DEFAULT_SERVICE):
            missing[A.SERVICE_NAME] = self._service_name
        merged = resource.merge(Resource(missing)) if missing else resource
        if len(self._resources) > 64:
            self._resources.clear()
        self._resources[id(resource)] = (resource, merged)
        return merged


# --- exporter and processor --------------------------------------------------------------


class EnrichingSpanExporter(SpanExporter):
    """Wraps an OTLP exporter: sends the OTLP copy of each span (see ``SpanPreparer``).

    Never raises; after ``shutdown`` (idempotent) every export fails at once without
    touching the network. ``log_once``: log each cause of failure of the inner exporter
    once (the default; ``sftrace push`` wants every message to explain its failures).
    """

    def __init__(
        self, inner: SpanExporter, preparer: SpanPreparer | None = None, *, log_once: bool = True
    ) -> None:
        self.inner = inner
        self.preparer = preparer or SpanPreparer()
        self._quiet = log_once
        if log_once:
            _install_filter()
        self._closed = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            prepared = [self.preparer.prepare(span) for span in spans]
        except Exception as exc:
            log_once("preparing spans for OTLP export", exc)
            return SpanExportResult.FAILURE
        with _Quiet() if self._quiet else contextlib.nullcontext():
            try:
                return self.inner.export(prepared)
            except Exception as exc:
                log_once("exporting spans over OTLP", exc)
                return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with _Quiet():
            try:
                self.inner.shutdown()
            except Exception as exc:
                log_once("shutting down the OTLP exporter", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._closed:
            return True
        try:
            return self.inner.force_flush(timeout_millis)
        except Exception as exc:
            log_once("flushing the OTLP exporter", exc)
            return False


def _bounded(work: Callable[[], object], timeout_s: float, name: str) -> bool:
    """Run ``work`` in a daemon thread; True if it finished within ``timeout_s``."""
    finished = threading.Event()

    def run() -> None:
        try:
            with _Quiet():
                work()
        except Exception as exc:
            log_once(name, exc)
        finally:
            finished.set()

    threading.Thread(target=run, name=f"sftrace-{name.replace(' ', '-')}", daemon=True).start()
    return finished.wait(max(0.0, timeout_s))


class OtlpSpanProcessor(SpanProcessor):
    """A ``BatchSpanProcessor`` in front of an ``EnrichingSpanExporter``, made safe.

    - ``on_end`` queues the span and returns; it never raises and never blocks.
    - ``force_flush`` and ``shutdown`` return within their time budget (shutdown: the
      export timeout) even when the collector hangs: the exporter is then closed, so
      whatever is still queued is dropped instead of retried.
    - ``active = False`` switches it off (an SDK provider cannot remove a processor).
    """

    def __init__(self, settings: OtlpSettings, exporter: SpanExporter | None = None) -> None:
        _install_filter()
        self.settings = settings
        if exporter is None:
            preparer = SpanPreparer(
                capture_content=settings.capture_content,
                max_payload_bytes=settings.max_payload_bytes,
                resource_attributes={A.SFTRACE_VERSION: __version__},
                service_name=settings.service_name,
            )
            exporter = EnrichingSpanExporter(official_exporter(settings), preparer)
        self.exporter = exporter
        self._batch = BatchSpanProcessor(exporter)
        self.active = True
        self._shutdown = False
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not self.active:
            return
        with _Quiet():
            try:
                self._batch.on_end(span)
            except Exception as exc:  # never raise into the host
                log_once("queueing a span for OTLP export", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._shutdown:
            return True
        return _bounded(self._batch.force_flush, timeout_millis / 1000, "flushing OTLP export")

    def shutdown(self) -> None:
        """Send what is queued within the export timeout, then stop. Idempotent."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
        self.active = False
        if not _bounded(self._batch.shutdown, self.settings.timeout_s, "shutting down OTLP export"):
            # The collector did not answer in time: stop retrying and drop the rest.
            self.exporter.shutdown()
