"""Spans as an OTLP/protobuf ``ExportTraceServiceRequest``, written byte by byte.

The official exporters build generated protobuf messages per span and serialize them,
which costs several times the CPU of recording the span. This module writes the same
wire format directly (varints, fixed-width integers and length-delimited fields) from
the OTLP copy of each span (``SpanPreparer.prepare_parts``), as the official encoder
would encode that copy (``opentelemetry.exporter.otlp.proto.common``): the bytes decode
to an equal message (``tests/test_otlp_proto.py``).

Field numbers and wire types, from opentelemetry-proto v1
(https://github.com/open-telemetry/opentelemetry-proto):

- collector/trace/v1/trace_service.proto: ExportTraceServiceRequest resource_spans=1.
- trace/v1/trace.proto: ResourceSpans resource=1 scope_spans=2 schema_url=3;
  ScopeSpans scope=1 spans=2 schema_url=3; Span trace_id=1 (16 bytes) span_id=2
  (8 bytes) trace_state=3 parent_span_id=4 name=5 kind=6 (enum) start_time_unix_nano=7
  and end_time_unix_nano=8 (fixed64) attributes=9 dropped_attributes_count=10 events=11
  dropped_events_count=12 links=13 dropped_links_count=14 status=15 flags=16 (fixed32);
  Span.Event time_unix_nano=1 (fixed64) name=2 attributes=3 dropped_attributes_count=4;
  Span.Link trace_id=1 span_id=2 trace_state=3 attributes=4 dropped_attributes_count=5
  flags=6 (fixed32); Status message=2 code=3 (enum).
- common/v1/common.proto: AnyValue string_value=1 bool_value=2 int_value=3 (int64)
  double_value=4 (double) array_value=5 kvlist_value=6 bytes_value=7; ArrayValue
  values=1; KeyValueList values=1; KeyValue key=1 value=2; InstrumentationScope name=1
  version=2 attributes=3.
- resource/v1/resource.proto: Resource attributes=1.

A tag is one varint, ``field_number << 3 | wire_type`` (0 varint, 1 fixed64,
2 length-delimited, 5 fixed32); the tags below are written out as bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext

from sftrace._export.enrich import SpanPreparer
from sftrace._export.kept import Kept

__all__ = ["encode_spans_proto"]

_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_FIXED32 = struct.Struct("<I").pack
_SMALL = [bytes((n,)) for n in range(128)]
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_TIMES = struct.Struct("<BQBQ").pack  # a span's start and end times: tag, fixed64 each
# A span's kind field, by the SDK's SpanKind value (OTLP's is that + 1).
_KINDS = [b"\x30" + bytes((value + 1,)) for value in range(5)]
# SpanFlags: "has is_remote" (0x100), plus "is remote" (0x200) for a remote context.
_LOCAL_FLAGS = _FIXED32(0x100)
_REMOTE_FLAGS = _FIXED32(0x300)
_SPAN_LOCAL = b"\x85\x01" + _LOCAL_FLAGS  # Span.flags (field 16, fixed32) with its tag
_SPAN_REMOTE = b"\x85\x01" + _REMOTE_FLAGS
_KEYS: Kept[str, bytes] = Kept()  # attribute key -> its encoded KeyValue.key field
_NAMES: Kept[str, bytes] = Kept()  # span name -> its encoded Span.name field
# (key, short string value) -> the whole KeyValue, length first: the values that repeat
# from span to span (names, kinds, MIME types, models) cost one look-up per attribute.
_PAIRS: Kept[tuple[str, str], bytes] = Kept()
_SHORT = 24  # the longest string value (in characters) kept in _PAIRS


def _varint(number: int) -> bytes:
    """``number`` (>= 0) as a protobuf base-128 varint."""
    if number < 0x80:
        return _SMALL[number]
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    size = len(payload)
    return b"".join((tag, _SMALL[size] if size < 0x80 else _varint(size), payload))


def _text(tag: bytes, text: str) -> bytes:
    return _field(tag, text.encode("utf-8", "replace"))


def encode_spans_proto(spans: Sequence[ReadableSpan], preparer: SpanPreparer) -> bytes:
    """The OTLP/protobuf ``ExportTraceServiceRequest`` of the OTLP copies of ``spans``:
    one ``ResourceSpans`` per resource and one ``ScopeSpans`` per scope, in the order
    first seen (as the official encoder groups them)."""
    groups: dict[int, tuple[Resource, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        attributes, events, resource = preparer.prepare_parts(span)
        group = groups.get(id(resource))
        if group is None:
            group = groups[id(resource)] = (resource, {})
        scope = span.instrumentation_scope
        entry = group[1].get(id(scope))
        if entry is None:
            entry = group[1][id(scope)] = (scope, [])
        entry[1].append(_span(span, attributes, events))
    request = []
    for resource, scopes in groups.values():
        parts = [_field(b"\x0a", _attributes(b"\x0a", resource.attributes))]
        for scope, encoded in scopes.values():
            parts.append(_field(b"\x12", _scope_spans(scope, encoded)))
        if resource.schema_url:
            parts.append(_text(b"\x1a", resource.schema_url))
        request.append(_field(b"\x0a", b"".join(parts)))
    return b"".join(request)


def _scope_spans(scope: InstrumentationScope | None, spans: list[bytes]) -> bytes:
    parts = []
    if scope is not None:
        if scope.name:
            parts.append(_text(b"\x0a", scope.name))
        if scope.version:
            parts.append(_text(b"\x12", scope.version))
        if scope.attributes:
            parts.append(_attributes(b"\x1a", scope.attributes))
    encoded = [_field(b"\x0a", b"".join(parts))]
    encoded.extend(_field(b"\x12", span) for span in spans)
    if scope is not None and scope.schema_url:
        encoded.append(_text(b"\x1a", scope.schema_url))
    return b"".join(encoded)


def _identity(context: SpanContext) -> list[bytes]:
    """Fields 1-3 of a ``Span`` and of a ``Span.Link`` alike: trace id, span id and trace
    state."""
    parts = [
        b"\x0a\x10",
        context.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        context.span_id.to_bytes(8, "big"),
    ]
    if context.trace_state:
        parts.append(_text(b"\x1a", _trace_state(context)))
    return parts


def _span(span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[Event]) -> bytes:
    context, parent = span.context, span.parent
    assert context is not None
    parts = _identity(context)
    if parent is not None:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))
    name = span.name
    if name:
        parts.append(_NAMES.get(name) or _name(name))
    parts.append(_KINDS[span.kind.value])
    start, end = span.start_time, span.end_time
    if start and end:
        parts.append(_TIMES(0x39, start, 0x41, end))
    else:  # a zero time is left out, as the official encoder does
        if start:
            parts.append(b"\x39" + _FIXED64(start))
        if end:
            parts.append(b"\x41" + _FIXED64(end))
    parts.append(_attributes(b"\x4a", attributes))
    for tag, count in ((b"\x50", span.dropped_attributes), (b"\x60", span.dropped_events)):
        if count:
            parts.append(tag + _varint(count))
    parts.extend(_field(b"\x5a", _event(event)) for event in events)
    parts.extend(_field(b"\x6a", _link(link)) for link in span.links)
    if span.dropped_links:
        parts.append(b"\x70" + _varint(span.dropped_links))
    parts.append(_field(b"\x7a", _status(span)))
    parts.append(_SPAN_REMOTE if parent is not None and parent.is_remote else _SPAN_LOCAL)
    return b"".join(parts)


def _name(name: str) -> bytes:
    """A span's encoded ``name`` field, kept for the names seen most (bounded)."""
    return _NAMES.keep(name, _text(b"\x2a", name))


def _trace_state(context: Any) -> str:
    return ",".join(f"{key}={value}" for key, value in context.trace_state.items())


def _status(span: ReadableSpan) -> bytes:
    status = span.status
    parts = []
    if status.description:
        parts.append(_text(b"\x12", status.description))
    code = status.status_code.value
    if code:
        parts.append(b"\x18" + _varint(code))
    return b"".join(parts)


def _event(event: Event) -> bytes:
    parts = []
    if event.timestamp:
        parts.append(b"\x09" + _FIXED64(event.timestamp))
    if event.name:
        parts.append(_text(b"\x12", event.name))
    parts.append(_attributes(b"\x1a", event.attributes))
    if event.dropped_attributes:
        parts.append(b"\x20" + _varint(event.dropped_attributes))
    return b"".join(parts)


def _link(link: Link) -> bytes:
    context = link.context
    parts = _identity(context)
    parts.append(_attributes(b"\x22", link.attributes))
    if link.dropped_attributes:
        parts.append(b"\x28" + _varint(link.dropped_attributes))
    parts.append(b"\x35")
    parts.append(_REMOTE_FLAGS if context.is_remote else _LOCAL_FLAGS)
    return b"".join(parts)


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    """``attributes`` as repeated ``KeyValue`` fields numbered by ``tag``; each distinct
    string value is encoded once however many keys repeat it (the input and output
    appear under several keys in the OTLP copy), and a short one with its key is
    encoded once for all spans (``_PAIRS``)."""
    if not attributes:
        return b""
    parts: list[bytes] = []
    seen: dict[str, bytes] = {}
    pairs = _PAIRS
    for key, value in attributes.items():
        if type(value) is str:
            if len(value) <= _SHORT:
                pair = pairs.get((key, value))
                if pair is None:
                    pair = _pair(key, value)
                parts.append(tag)
                parts.append(pair)
                continue
            encoded = seen.get(value)
            if encoded is None:
                encoded = seen[value] = _field(b"\x12", _text(b"\x0a", value))
        else:
            encoded = _field(b"\x12", _value(value))
        prefix = _KEYS.get(key)
        if prefix is None:
            prefix = _key(key)
        parts.append(tag)
        parts.append(_varint(len(prefix) + len(encoded)))
        parts.append(prefix)
        parts.append(encoded)
    return b"".join(parts)


def _pair(key: str, value: str) -> bytes:
    """The ``KeyValue`` of ``key`` and a short string ``value``, its length first, kept
    in ``_PAIRS`` (bounded)."""
    prefix = _KEYS.get(key)
    if prefix is None:
        prefix = _key(key)
    encoded = _field(b"\x12", _text(b"\x0a", value))
    return _PAIRS.keep((key, value), _varint(len(prefix) + len(encoded)) + prefix + encoded)


def _key(key: str) -> bytes:
    """The encoded ``KeyValue.key`` field, kept for the keys seen most (bounded)."""
    return _KEYS.keep(key, _text(b"\x0a", key))


def _value(value: Any) -> bytes:
    """The fields of one ``AnyValue`` (the official encoder's order of checks)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _text(b"\x0a", value)
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # two's complement
        return _text(b"\x0a", str(value))  # beyond int64: as OTLP/JSON has it, text
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _value(item)) for item in value))
    if isinstance(value, Mapping):
        items = {str(key): item for key, item in value.items()}
        return _field(b"\x32", _attributes(b"\x0a", items))
    return _text(b"\x0a", str(value))
