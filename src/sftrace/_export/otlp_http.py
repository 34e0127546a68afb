"""sftrace's own OTLP exporter over HTTP: OTLP/JSON encoded from sftrace's span mapping,
or OTLP/protobuf written by ``otlp_proto``.

The official Python exporters encode through the protobuf runtime, which costs more CPU
per span than recording the span did; in CPython that CPU is taken from the agent (the
exporting thread needs the GIL). This exporter encodes each span with the mapping
bundles are written with (``_model.otlp_json``: the OpenTelemetry Collector's OTLP/JSON),
serializes the request with orjson and POSTs it (``Content-Type: application/json``) to
the collector's OTLP/HTTP endpoint, which accepts JSON as well as protobuf. With
``protobuf=True`` it sends the same spans as OTLP/protobuf (``application/x-protobuf``),
written directly in the wire format (``otlp_proto``): collectors parse that faster, and
some (Phoenix) take nothing else.

It keeps the exporter contract: ``export`` never raises and returns a
``SpanExportResult``; ``shutdown`` is idempotent and stops retries at once.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from sftrace._export.enrich import ADDITIONS_SHAPE_KEYS, SpanPreparer, added_attributes
from sftrace._export.kept import Kept
from sftrace._export.otlp_logging import OTLP_LOGGER, Quiet, install_filter
from sftrace._export.otlp_proto import encode_spans_proto
from sftrace._export.otlp_settings import OtlpSettings
from sftrace._model.otlp_json import (
    STRING_VALUE,
    JSONDict,
    encode_request,
    encode_span,
    encode_value,
    encoded_key,
    plain_attributes,
    string_item,
)
from sftrace._version import __version__

__all__ = ["HttpSpanExporter", "encode_spans_json"]

logger = logging.getLogger(OTLP_LOGGER)
# Answers worth retrying (the OTLP/HTTP specification's list), and the backoff bounds.
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 2.0
# What _send returns when the collector does not take OTLP/JSON.
_UNSUPPORTED = object()
# What ``answer`` finds when ``post`` sent nothing.
_NOT_POSTED = object()
# Where a line's attributes start (the span's own: they come before events and links).
_ATTRIBUTES = b'"attributes":['
# SpanFlags: "has is_remote" (0x100), plus "is remote" (0x200) for a remote parent.
_LOCAL_FLAGS = 0x100
_REMOTE_FLAGS = 0x300
# attribute key -> the start of its item with a string value (_string_prefix)
_STRING_PREFIXES: Kept[str, bytes] = Kept()
# (key, short string value) -> the whole item and its comma: the values that repeat from
# span to span (names, kinds, MIME types, models) cost one look-up per attribute.
_PAIRS: Kept[tuple[str, str], bytes] = Kept()
_SHORT = 24  # the longest string value (in characters) kept in _PAIRS
# How a span's additions to its bundle line are written: the bytes before each value the
# span supplies, with the attribute holding it and whether it is a string (escaped once
# per span), then the bytes after the last one.
_Template = tuple[tuple[tuple[bytes, str, bool], ...], bytes]
# The shape of a span's attributes (_shape) -> its additions' _Template, or None when
# they are not the same bytes around the span's own values for every span of it.
_TEMPLATES: Kept[tuple[Any, ...], _Template | None] = Kept()
_NOT_KEPT: Any = object()  # what _TEMPLATES.get gives for a shape not kept
_PROBE_INT = 1 << 70  # added to an int by _probed: a value no attribute holds


def encode_spans_json(
    spans: Sequence[ReadableSpan],
    preparer: SpanPreparer,
    lines: Sequence[bytes | None] | None = None,
) -> bytes:
    """The OTLP/JSON ``ExportTraceServiceRequest`` of the OTLP copies of ``spans``.

    ``lines``: the spans' bundle lines where known (None where not). A bundle line is the
    span's OTLP/JSON already (``_model.otlp_json``): when the OTLP copy only adds
    attributes to it (``enrich.added_attributes``), they are spliced into the line
    instead of encoding the span again, the costliest part of export. Either way each
    span becomes one piece of bytes (no tree of dicts per span), and each string value
    is escaped once however many attributes repeat it (the aliases of the input and
    output); the request's envelope is built once per resource and scope.
    """
    groups: dict[tuple[int, int], tuple[Resource, InstrumentationScope | None, list[bytes]]]
    groups = {}
    items = (
        zip(spans, lines, strict=True) if lines is not None else ((span, None) for span in spans)
    )
    for span, line in items:
        encoded = _spliced(span, line, preparer) if line is not None else None
        if encoded is None:
            encoded = _encoded(span, preparer)
        resource, scope = span.resource, span.instrumentation_scope
        group = groups.get((id(resource), id(scope)))
        if group is None:  # the OTLP copy's resource, once per group
            group = groups[(id(resource), id(scope))] = (
                preparer.resource_for(resource),
                scope,
                [],
            )
        group[2].append(encoded)
    # Each group's spans as one fragment: orjson writes "[a,b,...]" around it.
    joined: list[tuple[Resource, InstrumentationScope | None, list[Any]]] = [
        (resource, scope, [orjson.Fragment(b",".join(encoded))])
        for resource, scope, encoded in groups.values()
    ]
    return orjson.dumps(encode_request(joined))


def _spliced(span: ReadableSpan, line: bytes, preparer: SpanPreparer) -> bytes | None:
    """The span's bundle line with the OTLP copy's additions and flags, or None when the
    copy differs in more than added attributes."""
    if span.dropped_attributes or span.dropped_events or span.dropped_links:
        return None
    context, parent = span.context, span.parent
    if context is None or context.trace_state or span.links:
        return None
    if not preparer.splices(len(line)):
        return None
    end = len(line) - 1 if line.endswith(b"\n") else len(line)
    flags = _REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS
    return _with_items(line, end, _added_items(plain_attributes(span)), b',"flags":%d}' % flags)


def _encoded(span: ReadableSpan, preparer: SpanPreparer) -> bytes:
    """The OTLP copy of ``span`` encoded from the span alone (no bundle line)."""
    attributes, events, _ = preparer.prepare_parts(span)
    encoded = encode_span(span, attributes={}, events=events)
    _add_wire_fields(encoded, span)
    line = orjson.dumps(encoded)
    items = _attribute_items(attributes) if attributes else b""
    spliced = _with_items(line, len(line), items, b"}")
    assert spliced is not None  # orjson wrote the empty list encode_span made
    return spliced


def _with_items(line: bytes, end: int, items: bytes, tail: bytes) -> bytes | None:
    """``line[:end]`` (one encoded span without its closing brace) with attribute
    ``items`` added at the end of its own attribute list, closed with ``tail``; None when
    the line is not of that shape. The span's own attributes come before its events and
    links, and a key inside a string value is escaped, so the first match is theirs."""
    at = line.find(_ATTRIBUTES)
    if at < 0 or line[end - 1 : end] != b"}":
        return None
    at += len(_ATTRIBUTES)
    view = memoryview(line)
    if not items:
        return b"".join((view[: end - 1], tail))
    separator = b"" if line[at : at + 1] == b"]" else b","
    return b"".join((view[:at], items, separator, view[at : end - 1], tail))


def _added_items(attributes: dict[str, Any]) -> bytes:
    """``_attribute_items`` of ``added_attributes(attributes)``, from the _Template of
    the attributes' shape where there is one: per span only the values the span supplies
    (its input and output, three times each) are encoded, each string once."""
    try:
        key = _shape(attributes)
        template = _TEMPLATES.get(key, _NOT_KEPT)
    except TypeError:  # an unhashable value among the shape's
        template = None
    else:
        if template is _NOT_KEPT:
            template = _TEMPLATES.keep(key, _template(attributes))
    if template is None:
        added = added_attributes(attributes)
        return _attribute_items(added) if added else b""
    slots, last = template
    parts: list[bytes] = []
    append = parts.append
    escaped: dict[str, bytes] = {}
    for before, source, is_string in slots:
        append(before)
        value = attributes[source]
        if is_string:
            text = escaped.get(value)
            if text is None:
                text = escaped[value] = orjson.dumps(value)
            append(text)
        else:
            append(orjson.dumps(encode_value(value)))
    append(last)
    return b"".join(parts)


def _attribute_items(attributes: Mapping[str, Any]) -> bytes:
    """``attributes`` as the items of an OTLP/JSON attribute list (what
    ``encode_attributes`` gives, without the brackets), each distinct string value
    escaped once, and a short one with its key once for all spans (``_PAIRS``)."""
    parts: list[bytes] = []
    append = parts.append
    escaped: dict[str, bytes] = {}
    pairs, prefixes = _PAIRS, _STRING_PREFIXES
    for key, value in attributes.items():
        if type(value) is str:
            if len(value) <= _SHORT:
                append(pairs.get((key, value)) or _pair(key, value))
                continue
            text = escaped.get(value)
            if text is None:
                text = escaped[value] = orjson.dumps(value)
            append(prefixes.get(key) or _string_prefix(key))
            append(text)
            append(b"}},")
        else:
            append(encoded_key(key))
            append(orjson.dumps(encode_value(value)))
            append(b"},")
    parts[-1] = parts[-1][:-1]  # no comma after the last one
    return b"".join(parts)


def _shape(attributes: dict[str, Any]) -> tuple[Any, ...]:
    """What ``added_attributes`` depends on but the values the span supplies: the keys in
    order, the values' types, the values of ``ADDITIONS_SHAPE_KEYS``."""
    # One flat tuple (one to hash): as many types as keys, a fixed number of shape keys.
    return (
        tuple(attributes),
        *map(type, attributes.values()),
        *map(attributes.get, ADDITIONS_SHAPE_KEYS),
    )


def _template(attributes: dict[str, Any]) -> _Template | None:
    """The _Template of ``added_attributes`` for spans of this span's shape, or None.

    Which added value is the span's own and which is the same for the whole shape is
    found by running ``added_attributes`` again with every value outside the shape keys
    changed (``_probed``): a value that follows its source is taken from the span, a
    string that stays is a constant, and anything else (a value computed from the span's,
    a different set of keys) gets no template."""
    added = added_attributes(attributes)
    probe = {
        key: value if key in ADDITIONS_SHAPE_KEYS else _probed(value)
        for key, value in attributes.items()
    }
    probed = added_attributes(probe)
    if list(probed) != list(added):
        return None
    # The attributes _probed changed, by the id of their new value (each its own object).
    changed_keys = [key for key, new in probe.items() if new is not attributes[key]]
    sources = {id(probe[key]): key for key in changed_keys}
    if len(sources) != len(changed_keys):
        return None
    slots: list[tuple[bytes, str, bool]] = []
    pending: list[bytes] = []  # the constant items and the closing of the last value
    for (key, value), changed in zip(added.items(), probed.values(), strict=True):
        if type(value) is str and type(changed) is str and changed == value:
            constant = _pair(key, value) if len(value) <= _SHORT else string_item(key, value) + b","
            pending.append(constant)
            continue
        source = sources.get(id(changed))
        if source is None or probe[source] is not changed:
            return None
        is_string = type(value) is str
        pending.append(_string_prefix(key) if is_string else encoded_key(key))
        slots.append((b"".join(pending), source, is_string))
        pending = [b"}}," if is_string else b"},"]
    last = b"".join(pending)
    return tuple(slots), last[:-1] if last.endswith(b",") else last


def _probed(value: Any) -> Any:
    """``value`` changed, of the same type (for ``_template``): a new object of its own
    (CPython shares the empty and one-character strings, not longer ones)."""
    if type(value) is str:
        return value + "\x00\x00"
    if type(value) is int:
        return value + _PROBE_INT
    return value


def _string_prefix(key: str) -> bytes:
    """``{"key":<key>,"value":{"stringValue":``, kept for the keys seen most (bounded)."""
    return _STRING_PREFIXES.keep(key, encoded_key(key) + STRING_VALUE)


def _pair(key: str, value: str) -> bytes:
    """The item of ``key`` and a short string ``value`` with its comma, kept in
    ``_PAIRS`` (bounded)."""
    return _PAIRS.keep((key, value), string_item(key, value) + b",")


def _add_wire_fields(encoded: JSONDict, span: ReadableSpan) -> None:
    """What OTLP carries beyond a bundle line, set as the official encoder sets it: span
    flags (whether the parent is remote), the W3C trace state, dropped counts."""
    parent = span.parent
    encoded["flags"] = _REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS
    context = span.context
    if context is not None and context.trace_state:
        encoded["traceState"] = ",".join(f"{k}={v}" for k, v in context.trace_state.items())
    for key, count in (
        ("droppedAttributesCount", span.dropped_attributes),
        ("droppedEventsCount", span.dropped_events),
        ("droppedLinksCount", span.dropped_links),
    ):
        if count:
            encoded[key] = count
    for link, encoded_link in zip(span.links, encoded.get("links", ()), strict=False):
        encoded_link["flags"] = _REMOTE_FLAGS if link.context.is_remote else _LOCAL_FLAGS


class HttpSpanExporter(SpanExporter):
    """POSTs OTLP/JSON requests (OTLP/protobuf with ``protobuf``) to ``settings.endpoint``
    (keep-alive, gzip if configured).

    A request that fails with a connection error or a retryable status (429, 502, 503,
    504) is retried with exponential backoff until ``settings.timeout_s`` has passed.
    ``log_once``: log each cause of failure once (``sftrace push`` logs every one).
    ``fallback``: makes the exporter to use instead when the collector answers 415 to
    OTLP/JSON (Arize Phoenix takes only protobuf); from then on every export goes
    through it. A bundle line is the span's OTLP/JSON, not its protobuf: the protobuf
    encoding starts from the span (the lines are not used).
    """

    def __init__(
        self,
        settings: OtlpSettings,
        preparer: SpanPreparer | None = None,
        *,
        log_once: bool = True,
        fallback: Callable[[], SpanExporter] | None = None,
        protobuf: bool = False,
    ) -> None:
        parts = urlsplit(settings.endpoint)
        self.settings = settings
        self.preparer = preparer or SpanPreparer()
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {
            "Content-Type": "application/x-protobuf" if protobuf else "application/json",
            "User-Agent": f"sftrace/{__version__}",
            **dict(settings.headers),
        }
        if settings.compression == "gzip":
            self._headers["Content-Encoding"] = "gzip"
        self._connection: http.client.HTTPConnection | None = None
        self._quiet = log_once
        if log_once:
            install_filter()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._fallback = fallback
        self._protobuf = protobuf
        self.delegate: SpanExporter | None = None  # the fallback, once in use
        self._posted: object = _NOT_POSTED  # what _request said of the request post sent
        self._deadline = 0.0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.export_items([(span, None) for span in spans])

    def export_items(self, items: Sequence[tuple[ReadableSpan, bytes | None]]) -> SpanExportResult:
        """Export spans given with their bundle lines where known (see encode_spans_json)."""
        body = self.encode_items(items)
        if isinstance(body, SpanExportResult):
            return body
        self.post(body)
        return self.answer(body, items)

    # A caller that has more to send (the export worker) splits export_items in three:
    # it encodes its next batch between ``post`` and ``answer``, while the collector
    # reads this one. One caller at a time (the connection holds one request).
    def encode_items(
        self, items: Sequence[tuple[ReadableSpan, bytes | None]]
    ) -> bytes | SpanExportResult:
        """The request body for ``items``, or their result when there is nothing to send
        (closed, no spans, the encoding failed, or the fallback exporter sent them)."""
        if self._closed.is_set():
            return SpanExportResult.FAILURE
        if not items:
            return SpanExportResult.SUCCESS
        if self.delegate is not None:
            return self.delegate.export([span for span, _ in items])
        try:
            spans = [span for span, _ in items]
            if self._protobuf:
                body = encode_spans_proto(spans, self.preparer)
            else:
                body = encode_spans_json(spans, self.preparer, [line for _, line in items])
            if self.settings.compression == "gzip":
                body = gzip.compress(body, compresslevel=1)
        except Exception as exc:
            with self._logging():
                kind = "protobuf" if self._protobuf else "JSON"
                logger.warning("Failed to encode spans as OTLP/%s: %r", kind, exc)
            return SpanExportResult.FAILURE
        return body

    def post(self, body: bytes) -> None:
        """Send the request carrying ``body``; ``answer`` reads the collector's answer."""
        with self._lock:
            self._deadline = time.monotonic() + self.settings.timeout_s
            self._posted = self._request(body, self._deadline)

    def answer(
        self, body: bytes, items: Sequence[tuple[ReadableSpan, bytes | None]]
    ) -> SpanExportResult:
        """The result of the request ``post`` sent (retried as ``_send`` says)."""
        with self._lock, self._logging():
            posted, self._posted = self._posted, _NOT_POSTED
            result = self._send(body, len(items), posted)
        if isinstance(result, SpanExportResult):
            return result
        if self._fallback is None:  # pragma: no cover - _send returns it only with one
            return SpanExportResult.FAILURE
        if self.delegate is None:  # (a batch encoded before the first 415 finds it set)
            with self._logging():
                logger.warning(
                    "%s does not accept OTLP/JSON (HTTP 415): sending OTLP/protobuf from "
                    "now on (otlp_protocol='http/protobuf' skips this probe)",
                    self.settings.endpoint,
                )
            self.delegate = self._fallback()
        return self.delegate.export([span for span, _ in items])

    def shutdown(self) -> None:
        """Stop: retries end at once, later exports fail without the network. Idempotent."""
        self._closed.set()
        self._disconnect()  # without the lock: a hung request fails at once
        if self.delegate is not None:
            self.delegate.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is buffered here

    # -- internals -------------------------------------------------------------------
    def _logging(self) -> Any:
        return Quiet() if self._quiet else _NoQuiet()

    def _send(self, body: bytes, count: int, posted: object) -> SpanExportResult | object:
        """SUCCESS, FAILURE, or ``_UNSUPPORTED`` (the collector refused JSON with 415).
        ``posted``: what ``_request`` said of the request ``post`` sent (its answer is
        the first attempt's), or ``_NOT_POSTED``."""
        deadline = self._deadline
        if posted is _NOT_POSTED:
            deadline = time.monotonic() + self.settings.timeout_s
            reason = self._post(body, deadline)
        else:
            reason = self._response() if posted is None else posted  # type: ignore[assignment]
        backoff = _FIRST_BACKOFF_S
        while True:
            if reason is None:
                return SpanExportResult.SUCCESS
            retry, message = reason
            if message.startswith("HTTP 415 ") and self._fallback is not None:
                return _UNSUPPORTED
            remaining = deadline - time.monotonic()
            if not retry or remaining <= backoff or self._closed.wait(backoff):
                logger.warning(
                    "Failed to export %d spans to %s: %s", count, self.settings.endpoint, message
                )
                return SpanExportResult.FAILURE
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            reason = self._post(body, deadline)

    def _post(self, body: bytes, deadline: float) -> tuple[bool, str] | None:
        """One POST; None on success, else (worth retrying, why)."""
        return self._request(body, deadline) or self._response()

    def _request(self, body: bytes, deadline: float) -> tuple[bool, str] | None:
        """Send one request; None when sent, else (worth retrying, why)."""
        try:
            connection = self._connect(max(0.01, deadline - time.monotonic()))
            connection.request("POST", self._path, body, self._headers)
        except (OSError, http.client.HTTPException) as exc:
            self._disconnect()
            return True, f"{type(exc).__name__}: {exc}"
        return None

    def _response(self) -> tuple[bool, str] | None:
        """The answer to the request sent: None on success, else (worth retrying, why)."""
        connection = self._connection
        try:
            if connection is None:  # closed by shutdown meanwhile
                raise ConnectionError("the connection was closed")
            response = connection.getresponse()
            reply = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._disconnect()
            return True, f"{type(exc).__name__}: {exc}"
        if response.will_close:
            self._disconnect()
        if 200 <= response.status < 300:
            return None
        detail = reply[:300].decode("utf-8", "replace").strip()
        return (
            response.status in RETRYABLE_STATUS,
            f"HTTP {response.status} {response.reason}" + (f": {detail}" if detail else ""),
        )

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        connection = self._connection
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = kind(self._host, self._port, timeout=timeout)
            self._connection = connection
        else:
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
        return connection

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # closing a broken one must not raise
                connection.close()


class _NoQuiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
