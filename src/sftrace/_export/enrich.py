"""The OTLP copy of a span: OpenInference attributes, payload cap, content stripping.

:class:`SpanPreparer` turns a finished span into the copy that is shipped: it adds the
OpenInference attributes Phoenix and Langfuse render, cuts long string attributes with a
visible marker, leaves inputs and outputs out when content capture is off, and names the
service when the provider has no name of its own. The original span (and so the bundle)
is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan

from sftrace._model import attributes as A
from sftrace._model.otlp_json import copy_span, plain_attributes
from sftrace._model.stored import left_out

# Attributes holding inputs and outputs: left out of OTLP with capture_content=False.
CONTENT_ATTRIBUTES = frozenset(
    {
        A.INPUT,
        A.OUTPUT,
        # A digest of a short value gives the value away: it goes where the value goes.
        A.INPUT_SHA256,
        A.OUTPUT_SHA256,
        A.DIGESTS,
        A.RUN_INPUT,
        A.RUN_OUTPUT,
        A.GEN_AI_TOOL_CALL_ARGUMENTS,
        A.GEN_AI_TOOL_CALL_RESULT,
        A.GEN_AI_INPUT_MESSAGES,
        A.GEN_AI_OUTPUT_MESSAGES,
        A.GEN_AI_SYSTEM_INSTRUCTIONS,
        A.INPUT_VALUE,
        A.OUTPUT_VALUE,
        # The values an exception or a result carries beside the call's output: a tool's
        # result as LangChain's text, an exception's args and attributes (an order, an
        # amount), the errors it was raised from, an SDK error's response body.
        A.OUTPUT_TEXT,
        A.ERROR_ARGS,
        A.ERROR_FIELDS,
        A.ERROR_CAUSE,
        A.ERROR_BODY,
    }
)
CONTENT_EVENT_ATTRIBUTES = frozenset({A.EVENT_BEFORE, A.EVENT_AFTER})
# Names and ids, never cut by the payload cap: a run, a call or an error cut short could
# not be told from another (``sftrace import`` names skipped runs by their id).
UNCUT_ATTRIBUTES = frozenset(
    {
        A.KIND,
        A.RUN_ID,
        A.REPLAY_OF,
        A.AGENT_VERSION,
        A.REPLAY_POLICY,
        A.ERROR_TYPE,
        A.EXCEPTION_TYPE,
        A.GEN_AI_OPERATION_NAME,
        A.GEN_AI_AGENT_NAME,
        A.GEN_AI_TOOL_NAME,
        A.GEN_AI_PROVIDER_NAME,
        A.GEN_AI_REQUEST_MODEL,
        A.LLM_MODEL_NAME,
        A.TOOL_NAME,
    }
)
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


def added_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """What the OTLP copy adds to a bundle line of a span with ``attributes`` (when
    ``SpanPreparer.splices`` allows it): what the line leaves out (``stored.left_out``),
    then the OpenInference attributes the span lacks."""
    added = left_out(attributes)
    if A.KIND in attributes:
        for key, value in openinference_attributes(attributes).items():
            if key not in attributes:
                added[key] = value
    return added


# The attributes whose values (not just their presence and type) decide which
# attributes ``added_attributes`` adds or the constants it adds (the kind, the values
# the kind implies, the names OpenInference repeats): with the keys and their value
# types, the "shape" the OTLP/JSON encoder keeps the additions' bytes for. A key missing
# here costs speed, not exactness: the encoder then keeps no bytes for that shape.
ADDITIONS_SHAPE_KEYS = (
    A.KIND,
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_TOOL_TYPE,
    A.REPLAY_POLICY,
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_RESPONSE_MODEL,
    A.GEN_AI_REQUEST_MODEL,
    A.GEN_AI_PROVIDER_NAME,
)


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
        attributes, events, resource = self.prepare_parts(span)
        return copy_span(span, attributes=attributes, resource=resource, events=events)

    def prepare_parts(self, span: ReadableSpan) -> tuple[dict[str, Any], Sequence[Event], Resource]:
        """The OTLP copy's attributes, events and resource (encoders that need no copied
        ``ReadableSpan`` take these directly)."""
        attributes = plain_attributes(span)
        if A.KIND in attributes:
            for key, value in openinference_attributes(attributes).items():
                attributes.setdefault(key, value)
        if not self.capture_content:
            omitted = [key for key in attributes if key in CONTENT_ATTRIBUTES]
            for key in omitted:
                del attributes[key]
            if omitted:
                attributes[A.CONTENT_OMITTED] = True
        events: Sequence[Event] = span.events
        if events and (not self.capture_content or self.max_payload_bytes):
            events = tuple(self._prepare_event(event) for event in events)
        if self.max_payload_bytes:
            truncated = self._cap(attributes)
            if truncated:
                attributes[A.TRUNCATED] = tuple(truncated)
        return attributes, events, self._resource(span.resource)

    def splices(self, line_bytes: int) -> bool:
        """Whether the OTLP copy of a span whose bundle line is ``line_bytes`` long keeps
        the span's attributes as they are and only adds ``added_attributes``: not when
        content is stripped or a value may be over the cap."""
        if not self.capture_content:
            return False
        # No value in a line is longer than the line.
        return not (self.max_payload_bytes and line_bytes > self.max_payload_bytes)

    def resource_for(self, resource: Resource) -> Resource:
        """The OTLP copy's resource (the span's, with sftrace's defaults added)."""
        return self._resource(resource)

    def _cap(self, attributes: dict[str, Any]) -> list[str]:
        limit = self.max_payload_bytes
        assert limit
        truncated = []
        for key, value in attributes.items():
            # len * 4 <= limit: fits whatever its characters (truncate_utf8's own first
            # check, made here so that a span's short values cost no call).
            if isinstance(value, str) and len(value) * 4 > limit and key not in UNCUT_ATTRIBUTES:
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
