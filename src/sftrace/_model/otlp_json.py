"""Spans as OTLP/JSON objects: the encoding of bundle lines.

The mapping is the OTLP/JSON one used by the OpenTelemetry Collector's ``file``
exporter: lowercase hex ids, integer enums (span kind is the SDK value + 1), 64-bit
integers as decimal strings, lowerCamelCase keys and typed attribute values. A bundle
line is exactly one ``Span`` object of an ``ExportTraceServiceRequest``, so a bundle
turns into OTLP (and back) without loss.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from sftrace._model.stored import restored_attributes

JSONDict = dict[str, Any]

STRING_VALUE = b'{"stringValue":'
"""How a line spells a string ``AnyValue`` up to the value's JSON text."""


def trace_id_hex(trace_id: int) -> str:
    return f"{trace_id:032x}"


def span_id_hex(span_id: int) -> str:
    return f"{span_id:016x}"


def encode_value(value: Any) -> JSONDict:
    """One attribute value as an OTLP ``AnyValue`` object."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [encode_value(item) for item in value]}}
    return {"stringValue": str(value)}


def encode_attributes(
    attributes: Mapping[str, Any] | None, drop: frozenset[str] = frozenset()
) -> list[JSONDict]:
    if not attributes:
        return []
    # Most values are strings (inputs, outputs, names): skip encode_value for them.
    return [
        {"key": key, "value": {"stringValue": value} if type(value) is str else encode_value(value)}
        for key, value in attributes.items()
        if key not in drop
    ]


def encoded_key(key: str) -> bytes:
    """How a line spells the start of attribute ``key``'s item: ``{"key":<key>,"value":``.

    With ``STRING_VALUE``, ``string_item`` and ``string_value_start``: the bytes that
    ``orjson.dumps`` makes of ``encode_attributes``' items, for the code that writes or
    finds an attribute in a line without building or parsing the whole span (one home for
    that spelling; ``tests/test_otlp_json.py`` checks they agree)."""
    return b'{"key":%s,"value":' % orjson.dumps(key)


def string_item(key: str, value: str) -> bytes:
    """String attribute ``key`` = ``value`` as a line spells the item."""
    return encoded_key(key) + STRING_VALUE + orjson.dumps(value) + b"}}"


def string_value_start(key: str) -> bytes:
    """What a line holds just before the JSON-escaped text of string attribute ``key``'s
    value (``{"key":"<key>","value":{"stringValue":"``): the first match in a line is the
    attribute itself, since a key inside a string value has its quotes escaped."""
    return encoded_key(key) + STRING_VALUE + b'"'


def copy_span(
    span: ReadableSpan,
    *,
    attributes: Mapping[str, Any],
    resource: Resource | None = None,
    events: Sequence[Event] | None = None,
) -> ReadableSpan:
    """A finished span with other attributes (and, if given, resource and events)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=resource if resource is not None else span.resource,
        attributes=attributes,
        events=events if events is not None else span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def plain_attributes(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes as a plain dict (a copy), read in one step.

    ``ReadableSpan.attributes`` is a read-only view of the SDK's ``BoundedAttributes``,
    whose every read is a Python-level call; its ``copy()`` returns a plain dict at once.
    """
    attributes = span.attributes
    if not attributes:
        return {}
    try:
        copied = attributes.copy()  # type: ignore[attr-defined]
    except AttributeError:  # a mapping without copy()
        copied = None
    return copied if type(copied) is dict else dict(attributes)


def decode_value(value: Mapping[str, Any]) -> Any:
    """An OTLP ``AnyValue`` object back to a Python value; unknown shapes give None."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return tuple(decode_value(item) for item in value["arrayValue"].get("values", ()))
    if "kvlistValue" in value:
        return decode_attributes(value["kvlistValue"].get("values", ()))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    return None


def decode_attributes(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {item["key"]: decode_value(item.get("value", {})) for item in items}


def encode_span(
    span: ReadableSpan,
    drop: frozenset[str] = frozenset(),
    *,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[Event] | None = None,
) -> JSONDict:
    """One finished SDK span as an OTLP/JSON ``Span`` object.

    ``drop`` names attributes left out (the aliases a bundle restores on read);
    ``attributes`` / ``events``: the span's own, or others to encode in their place (the
    caller's dict of its attributes, or the OTLP copy's attributes and events).
    """
    context = span.context
    assert context is not None
    encoded: JSONDict = {
        "traceId": trace_id_hex(context.trace_id),
        "spanId": span_id_hex(context.span_id),
        "name": span.name,
        "kind": span.kind._value_ + 1,  # (the member's own: Enum.value is a Python call)
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": encode_attributes(
            plain_attributes(span) if attributes is None else attributes, drop
        ),
    }
    status = _encode_status(span)
    if status:  # an unset status is OTLP/JSON's default: left out
        encoded["status"] = status
    if span.parent is not None:
        encoded["parentSpanId"] = span_id_hex(span.parent.span_id)
    if events is None:
        events = span.events
    if events:
        encoded["events"] = [
            {
                "timeUnixNano": str(event.timestamp),
                "name": event.name,
                "attributes": encode_attributes(event.attributes),
            }
            for event in events
        ]
    if span.links:
        encoded["links"] = [
            {
                "traceId": trace_id_hex(link.context.trace_id),
                "spanId": span_id_hex(link.context.span_id),
                "attributes": encode_attributes(link.attributes),
            }
            for link in span.links
        ]
    return encoded


def _encode_status(span: ReadableSpan) -> JSONDict:
    status = span.status
    code = status.status_code._value_  # (as in encode_span)
    if code == 0:
        return {}
    encoded: JSONDict = {"code": code}
    if status.description:
        encoded["message"] = status.description
    return encoded


def encode_request(
    groups: Iterable[tuple[Resource, InstrumentationScope | None, list[JSONDict]]],
) -> JSONDict:
    """An OTLP/JSON ``ExportTraceServiceRequest``: encoded spans with their resource and
    scope, one ``resourceSpans`` entry per resource and one ``scopeSpans`` per scope."""
    by_resource: dict[int, tuple[Resource, list[JSONDict]]] = {}
    for resource, scope, spans in groups:
        entry = by_resource.get(id(resource))
        if entry is None:
            entry = by_resource[id(resource)] = (resource, [])
        encoded_scope: JSONDict = {}
        if scope is not None:
            encoded_scope["name"] = scope.name
            if scope.version:
                encoded_scope["version"] = scope.version
        entry[1].append({"scope": encoded_scope, "spans": spans})
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": encode_attributes(resource.attributes)},
                "scopeSpans": scope_spans,
            }
            for resource, scope_spans in by_resource.values()
        ]
    }


def decode_span(
    span: Mapping[str, Any], resource: Resource, scope: InstrumentationScope | None
) -> ReadableSpan:
    """An OTLP/JSON ``Span`` object (a bundle line) back to a finished SDK span, with the
    attributes a bundle line leaves out restored (``stored.restored_attributes``)."""
    trace_id = int(span["traceId"], 16)
    # What recording set and bundle lines leave out (aliases, implied GenAI values), back.
    attributes = restored_attributes(decode_attributes(span.get("attributes") or ()))
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
