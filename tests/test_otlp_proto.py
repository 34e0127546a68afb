"""sftrace's OTLP/protobuf encoder against the official one: the bytes decode (with the
official generated classes, used here only) to the message the official exporter's
encoder makes of the same OTLP copies."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from sftrace._export import otlp_http
from sftrace._export.enrich import SpanPreparer, added_attributes
from sftrace._export.otlp_http import encode_spans_json
from sftrace._export.otlp_proto import encode_spans_proto
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_SCALAR = st.one_of(_TEXT, _INT64, st.booleans(), st.floats(allow_nan=False))
_VALUE = st.one_of(
    _SCALAR,
    st.lists(_TEXT, max_size=3).map(tuple),
    st.lists(_INT64, max_size=3).map(tuple),
    st.lists(st.floats(allow_nan=False), max_size=3).map(tuple),
    st.lists(st.booleans(), max_size=3).map(tuple),
)
_ATTRIBUTES = st.dictionaries(_TEXT, _VALUE, max_size=5)
_IDS = st.integers(1, (1 << 64) - 1)
_TIMES = st.integers(0, (1 << 64) - 1)


def _context(trace_id: int, span_id: int, remote: bool = False, state: Any = None) -> SpanContext:
    return SpanContext(trace_id, span_id, remote, TraceFlags(1), state)


@st.composite
def _spans(draw: st.DrawFn, resource: Resource, scopes: list[Any]) -> ReadableSpan:
    trace_id = draw(st.integers(1, (1 << 128) - 1))
    parent = draw(st.none() | st.builds(_context, st.just(trace_id), _IDS, st.booleans()))
    code = draw(st.sampled_from(StatusCode))
    state = draw(st.none() | st.just(TraceState([("vendor", "v1"), ("other", "x")])))
    return ReadableSpan(
        name=draw(_TEXT),
        context=_context(trace_id, draw(_IDS), False, state),
        parent=parent,
        resource=resource,
        attributes=draw(_ATTRIBUTES),
        events=draw(st.lists(st.builds(Event, _TEXT, _ATTRIBUTES, _TIMES), max_size=2)),
        links=draw(
            st.lists(
                st.builds(
                    Link,
                    st.builds(_context, st.integers(1, (1 << 128) - 1), _IDS, st.booleans()),
                    _ATTRIBUTES,
                ),
                max_size=2,
            )
        ),
        kind=draw(st.sampled_from(SpanKind)),
        status=Status(code, draw(_TEXT) if code is StatusCode.ERROR else None),
        start_time=draw(_TIMES),
        end_time=draw(_TIMES),
        instrumentation_scope=draw(st.sampled_from(scopes)),
    )


def _official(spans: list[ReadableSpan], preparer: SpanPreparer) -> ExportTraceServiceRequest:
    return encode_spans([preparer.prepare(span) for span in spans])


def _assert_same(spans: list[ReadableSpan], preparer: SpanPreparer) -> None:
    ours = ExportTraceServiceRequest.FromString(encode_spans_proto(spans, preparer))
    assert ours == _official(spans, preparer)


_RESOURCE = Resource({"service.name": "svc", "n": 3, "flag": True, "list": ("a", "é")})
_SCOPES = [
    InstrumentationScope("sftrace", "1.0"),
    InstrumentationScope("other", None, "https://schema", {"a": 1}),
    InstrumentationScope(""),
]


@settings(max_examples=150, deadline=None)
@given(st.lists(_spans(_RESOURCE, _SCOPES), min_size=1, max_size=4))
def test_equal_to_the_official_encoding(spans: list[ReadableSpan]) -> None:
    _assert_same(spans, SpanPreparer())


def test_agent_spans_with_content_and_caps() -> None:
    attributes = {
        "sftrace.kind": "llm",
        "sftrace.input": '{"messages": "hé ☃"}',
        "sftrace.output": "x" * 300,
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 12,
        "empty": "",
        "zero": 0,
        "big": (1 << 63) - 1,
        "negative": -(1 << 63),
        "floats": (0.5, -1e300),
        "nothing": (),
    }
    span = ReadableSpan(
        name="llm call ☃",
        context=_context(7, 9),
        parent=_context(7, 3, True),
        resource=Resource({"service.name": "agent"}, "https://resource-schema"),
        attributes=attributes,
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, "boom"),
        start_time=1,
        end_time=2,
        instrumentation_scope=InstrumentationScope("sftrace", "0.1"),
    )
    for preparer in (
        SpanPreparer(),
        SpanPreparer(capture_content=False),
        SpanPreparer(max_payload_bytes=100, service_name="named"),
    ):
        _assert_same([span, span], preparer)


def test_short_values_encoded_once_for_all_spans_stay_exact_past_the_cache_bound() -> None:
    """Short string values (names, kinds, ids) are encoded with their key once for all
    spans, in a bounded cache: thousands of distinct ones, more than it keeps, still
    encode as the official encoder does, in OTLP/protobuf and OTLP/JSON alike."""
    spans = [
        ReadableSpan(
            name=f"tool {number % 7}",
            context=_context(5, number + 1),
            resource=_RESOURCE,
            attributes={"sftrace.kind": "tool", "call.id": f"c-{number}", "n": number},
            start_time=number,
            end_time=number + 1,
            instrumentation_scope=_SCOPES[0],
        )
        for number in range(5000)
    ]
    preparer = SpanPreparer()
    _assert_same(spans, preparer)
    request = orjson.loads(encode_spans_json(spans, preparer))
    encoded = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [decode_attributes(span["attributes"]) for span in encoded] == [
        preparer.prepare_parts(span)[0] for span in spans
    ]


def test_otlp_json_groups_spans_by_resource_and_scope_as_the_official_encoder() -> None:
    """Spans of two resources and three scopes, interleaved, come out of the OTLP/JSON
    encoder grouped as the official encoder groups them (one resourceSpans entry per
    resource, one scopeSpans per scope, spans in their order within each)."""
    other = Resource({"service.name": "other"})
    spans = [
        ReadableSpan(
            name=f"span {number}",
            context=_context(9, number + 1),
            resource=(_RESOURCE, other)[number % 2],
            attributes={"sftrace.kind": "tool", "n": number},
            start_time=number,
            end_time=number + 1,
            instrumentation_scope=_SCOPES[number % 3],
        )
        for number in range(12)
    ]
    preparer = SpanPreparer(resource_attributes={"sftrace.version": "0"})
    request = orjson.loads(encode_spans_json(spans, preparer))
    ours = [
        (
            decode_attributes(resource_spans["resource"]["attributes"]),
            [
                (scope_spans["scope"].get("name", ""), [s["name"] for s in scope_spans["spans"]])
                for scope_spans in resource_spans["scopeSpans"]
            ],
        )
        for resource_spans in request["resourceSpans"]
    ]
    theirs = [
        (
            {kv.key: _plain(kv.value) for kv in resource_spans.resource.attributes},
            [
                (scope_spans.scope.name, [s.name for s in scope_spans.spans])
                for scope_spans in resource_spans.scope_spans
            ],
        )
        for resource_spans in _official(spans, preparer).resource_spans
    ]
    assert ours == theirs
    assert len(ours) == 2
    assert all(len(scopes) == 3 for _, scopes in ours)


def _plain(value: Any) -> Any:
    """An official ``AnyValue`` as the value OTLP/JSON decodes to (the kinds used here)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_plain(item) for item in value.array_value.values)
    return getattr(value, kind)


# Attributes that decide or feed what the OTLP copy adds to a bundle line, with values
# of the types that change what is added (a string or not, an int or a bool).
_ADDED_FROM: dict[str, Any] = {
    A.KIND: st.sampled_from([A.KIND_TOOL, A.KIND_LLM, A.KIND_RUN, "other"]),
    A.GEN_AI_OPERATION_NAME: st.sampled_from([A.OPERATION_EXECUTE_TOOL, A.OPERATION_CHAT, "x"]),
    A.GEN_AI_TOOL_TYPE: st.sampled_from(["function", "x"]),
    A.REPLAY_POLICY: st.sampled_from(["frozen", "live"]),
    A.GEN_AI_TOOL_NAME: st.sampled_from(["search", "a tool named past the short values"]),
    A.GEN_AI_REQUEST_MODEL: st.sampled_from(["m", ""]),
    A.GEN_AI_RESPONSE_MODEL: st.sampled_from(["m-1", ""]),
    A.GEN_AI_PROVIDER_NAME: st.just("openai"),
    **{key: _TEXT | _INT64 for key in (A.INPUT, A.OUTPUT, A.RUN_INPUT, A.RUN_OUTPUT)},
    **{key: _VALUE for key in (*A.INPUT_ALIASES, *A.OUTPUT_ALIASES, A.INPUT_SHA256)},
    **{
        key: st.integers(0, 300) | st.booleans()
        for key in (A.GEN_AI_USAGE_INPUT_TOKENS, A.GEN_AI_USAGE_OUTPUT_TOKENS)
    },
    A.USAGE_TOTAL_TOKENS: st.integers(0, 600),
    "sftrace.seq": _INT64,
}


@st.composite
def _attribute_runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Attributes of several spans, most of them of a few shapes (the same keys in the
    same order): what the OTLP/JSON encoder keeps the additions' bytes for."""
    runs = []
    for _ in range(draw(st.integers(1, 3))):
        keys = draw(st.permutations(list(_ADDED_FROM)))[: draw(st.integers(0, len(_ADDED_FROM)))]
        for _ in range(draw(st.integers(1, 4))):
            runs.append({key: draw(_ADDED_FROM[key]) for key in keys})
    return runs


@settings(max_examples=300, deadline=None)
@given(_attribute_runs())
def test_additions_from_the_shape_cache_are_the_bytes_of_encoding_them(
    runs: list[dict[str, Any]],
) -> None:
    """The additions to a bundle line written from the bytes kept per shape of span
    (``_added_items``) are, for every span of a shape, the bytes of encoding the
    additions themselves."""
    for attributes in runs:
        added = added_attributes(attributes)
        expected = otlp_http._attribute_items(added) if added else b""
        assert otlp_http._added_items(dict(attributes)) == expected
