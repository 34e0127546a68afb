"""Finding the application's SDK provider behind the wrappers tracing set-ups install,
and keeping sftrace's spans recorded whatever the application's sampler decides.

Tracing set-ups do not all install a plain SDK ``TracerProvider`` as the global one:
``logfire.configure()`` installs a proxy whose ``provider`` attribute holds the SDK
provider (and is swapped when Logfire is configured again); ``phoenix.otel.register()``
and ``Traceloop.init()`` install SDK providers (subclasses or plain). ``sdk_provider_of``
looks through such proxies, so sftrace's processors land on the provider whose
processors and exporters the application configured.

A bundle never depends on sampling. sftrace's tracer asks the application's sampler
first; where it would drop a span, ``RecordDroppedSpans`` makes the span record-only:
the span reaches every processor (so sftrace's bundle processor writes it), but stays
unsampled, so the application's exporters (``BatchSpanProcessor`` and
``SimpleSpanProcessor`` skip unsampled spans) and sftrace's OTLP export leave it out,
as the application asked. Spans of other instrumentations inside such a run follow the
application's sampler (a ``ParentBased`` sampler drops them) and are not in the bundle;
sftrace's spans inside one of those are parented on sftrace's own innermost span
(``ActiveRun.parent_context``).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Tracer
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

# How many proxies deep sdk_provider_of looks (a proxy of a proxy is unusual; a cycle of
# attributes must not hang it).
_MAX_DEPTH = 4


def sdk_provider_of(provider: object) -> TracerProvider | None:
    """The SDK provider ``provider`` is or delegates to through a ``provider`` attribute
    (Logfire's proxy); None when there is none (the API's proxy, a no-op provider)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(provider, TracerProvider):
            return provider
        try:
            provider = getattr(provider, "provider", None)
        except Exception:  # a proxy whose attribute raises: not one we can use
            return None
        if provider is None:
            return None
    return None


# Looked up once: an Enum member looked up on its class costs about ten times as much
# as a module global, and every span sftrace starts is sampled here.
_DROP = Decision.DROP


class RecordDroppedSpans(Sampler):
    """The application's sampler, except that a span it drops is still recorded (and
    not sampled): see the module docstring."""

    def __init__(self, delegate: Sampler) -> None:
        self.delegate = delegate

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        result = self.delegate.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if result.decision is not _DROP:
            return result
        # A span starts with the attributes its sampling result carries; samplers that
        # drop return none (the SDK's do), so the span's own come back here.
        kept = {**(attributes or {}), **(result.attributes or {})}
        return SamplingResult(Decision.RECORD_ONLY, kept, result.trace_state)

    def get_description(self) -> str:
        return f"RecordDroppedSpans{{{self.delegate.get_description()}}}"


def record_dropped_spans(tracer: Tracer) -> Tracer:
    """Make ``tracer`` (sftrace's own SDK tracer) record the spans its sampler drops."""
    sampler = getattr(tracer, "sampler", None)
    if isinstance(sampler, Sampler) and not isinstance(sampler, RecordDroppedSpans):
        tracer.sampler = RecordDroppedSpans(sampler)  # type: ignore[attr-defined]
    return tracer
