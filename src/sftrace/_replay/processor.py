"""``ReplaySpanProcessor``: the replay's view of the spans of its run.

A replay registers its :class:`ReplayController` under the trace id of its run span.
The boundaries (traced tools, LLM calls) ask their run's controller for a decision
before their span starts; a span with a call's ``sftrace.kind`` that no boundary
started is matched here, from its attributes, as it starts, so it counts as a reached
call. As spans of the replay end, the processor keeps them (``session.spans``). Like
every span processor it never blocks and never raises.
"""

from __future__ import annotations

import threading

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._model.otlp_json import copy_span, plain_attributes
from sftrace._record.config import register_processor_factory
from sftrace._record.intercept import HANDOFF, Reached
from sftrace._replay.controller import ReplayController

_controllers: dict[int, ReplayController] = {}
# The trace ids of the replays whose controllers note every span (a concurrent recording).
_noting: set[int] = set()
_lock = threading.Lock()


def register(trace_id: int, controller: ReplayController) -> None:
    with _lock:
        _controllers[trace_id] = controller
        if controller.concurrency is not None:
            _noting.add(trace_id)


def unregister(trace_id: int) -> None:
    with _lock:
        _controllers.pop(trace_id, None)
        _noting.discard(trace_id)


class ReplaySpanProcessor(SpanProcessor):
    """Matches the call spans no boundary started, and keeps the spans of each replay."""

    def __init__(self) -> None:
        self.active = True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.active or not _controllers:
            return
        decided = HANDOFF.decided  # a boundary's span: the boundary had it decided
        if decided:
            HANDOFF.decided = False
            if not _noting:
                return
        try:
            context = span.get_span_context()
            controller = _controllers.get(context.trace_id)
            if controller is None:
                return
            parent = span.parent.span_id if span.parent is not None else None
            if not decided:
                attributes = plain_attributes(span)
                if attributes.get(A.KIND) in (A.KIND_TOOL, A.KIND_LLM):
                    # Not a boundary's span: decided all the same, so it counts as a
                    # reached call, though nothing acts on the decision.
                    reached = Reached.from_attributes(attributes)
                    seq = attributes.get(A.SEQ)
                    controller.decide(
                        reached, parent_span_id=parent, seq=seq if isinstance(seq, int) else None
                    )
                    decided = True
            if controller.concurrency is not None:  # where each call sits (see controller)
                controller.note_span(context.span_id, parent, decided=decided)
        except Exception as exc:  # never raise into the host
            log_once("matching a replayed call", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if not self.active or not _controllers:
            return
        context = span.context
        controller = _controllers.get(context.trace_id) if context is not None else None
        if controller is not None:
            try:
                kept = kept_span(span)
            except Exception as exc:  # never raise into the host; keep the span as it is
                log_once("keeping a replayed span", exc)
                kept = span
            controller.spans.append(kept)

    def shutdown(self) -> None:
        self.active = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def kept_span(span: ReadableSpan) -> ReadableSpan:
    """The span as a replay keeps it (``session.spans``): the same data, plain containers.

    The SDK's finished span holds its attributes, events and links in bounded containers
    of several objects each, which the garbage collector walks on every full pass. A
    replay keeps every span it makes, so those passes grew with the run: a 20,000-call
    replay spent about 10 µs a call in them. A span whose limits dropped something is
    kept as it is, with its counts of what was dropped.

    The SDK hands its processors a ``ReadableSpan`` it makes for them as the span ends:
    that one is kept, its containers swapped for plain ones holding the same data (a copy
    through the constructor cost about as much as the rest of the processor's work for a
    call). Any other span is copied (without the deprecated ``instrumentation_info``).
    """
    if span.dropped_attributes or span.dropped_events or span.dropped_links:
        return span
    if type(span) is ReadableSpan:
        span._attributes = plain_attributes(span)
        span._events = span.events
        span._links = span.links
        return span
    return copy_span(span, attributes=plain_attributes(span))


__all__ = ["ReplaySpanProcessor", "kept_span", "register", "unregister"]


# Every configuration, present and future, gets this processor once the replay layer loads.
register_processor_factory(ReplaySpanProcessor)
