"""``sftrace.configure``: which tracer provider sftrace uses and where bundles go.

sftrace fits into the OpenTelemetry set-up an application already has. If a global SDK
``TracerProvider`` exists (the application's own, or one made by ``logfire.configure()``,
``phoenix.otel.register()`` or ``opentelemetry-instrument``), sftrace adds its processors
to it; otherwise it creates one and sets it as the global provider. ``record()``
configures the defaults by itself the first time it is used.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Tracer

from ._attributes import INSTRUMENTATION_SCOPE
from ._exporter import BundleSpanExporter
from ._internal import log_once
from ._version import __version__

DEFAULT_BUNDLE_DIR = Path(".sftrace") / "traces"


class BundleSpanProcessor(SpanProcessor):
    """Hands every ended span to the bundle exporter at once (spans reach disk as they end).

    Like ``SimpleSpanProcessor``, but it can be switched off when sftrace is configured
    again (an SDK provider cannot remove a processor), and it never raises.
    """

    def __init__(self, exporter: BundleSpanExporter) -> None:
        self.exporter = exporter
        self.active = True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            self.exporter.export((span,))  # never raises

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


@dataclass
class State:
    """What ``configure`` set up; replaced as a whole when it is called again."""

    provider: TracerProvider
    tracer: Tracer
    bundle_exporter: BundleSpanExporter
    bundle_dir: Path | None
    processors: list[SpanProcessor] = field(default_factory=list)

    def resolved_bundle_dir(self) -> Path:
        if self.bundle_dir is not None:
            return self.bundle_dir
        env = os.environ.get("SFTRACE_DIR")
        return Path(env) if env else DEFAULT_BUNDLE_DIR


_state: State | None = None
_lock = threading.RLock()
# Providers sftrace created, so a second configure() reuses rather than stacks them.
_own_provider: TracerProvider | None = None


def configure(
    *,
    tracer_provider: TracerProvider | None = None,
    bundle_dir: str | os.PathLike[str] | None = None,
    service_name: str | None = None,
) -> None:
    """Configure where sftrace's spans go. Keyword-only; safe to call more than once.

    Args:
        tracer_provider: the SDK ``TracerProvider`` to attach to. Default: the global
            provider if it is an SDK provider, else a new one set as the global provider.
        bundle_dir: where ``record()`` writes bundles when it is given no ``output``.
            Default: ``$SFTRACE_DIR``, else ``.sftrace/traces`` under the working directory.
        service_name: ``service.name`` of a provider sftrace creates. Default:
            ``$OTEL_SERVICE_NAME``, else ``"sftrace"``.
    """
    global _state
    with _lock:
        provider = _choose_provider(tracer_provider, service_name)
        old = _state
        if old is not None and old.provider is provider:
            # Idempotent: same provider, keep the processors already attached.
            old.bundle_dir = Path(bundle_dir) if bundle_dir is not None else None
            return
        if old is not None:
            _deactivate(old)
        exporter = BundleSpanExporter()
        from ._replay_processor import ReplaySpanProcessor

        processors: list[SpanProcessor] = [ReplaySpanProcessor(), BundleSpanProcessor(exporter)]
        for processor in processors:
            provider.add_span_processor(processor)
        _state = State(
            provider=provider,
            tracer=provider.get_tracer(INSTRUMENTATION_SCOPE, __version__),
            bundle_exporter=exporter,
            bundle_dir=Path(bundle_dir) if bundle_dir is not None else None,
            processors=processors,
        )


def _choose_provider(explicit: TracerProvider | None, service_name: str | None) -> TracerProvider:
    global _own_provider
    if explicit is not None:
        if not isinstance(explicit, TracerProvider):
            from ._errors import ConfigError

            raise ConfigError(
                f"tracer_provider must be an opentelemetry.sdk.trace.TracerProvider, got "
                f"{type(explicit).__qualname__}"
            )
        return explicit
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    if _own_provider is not None:
        return _own_provider
    resource = Resource.create(
        {
            "service.name": service_name or os.environ.get("OTEL_SERVICE_NAME") or "sftrace",
            "sftrace.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource)
    if isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    # Otherwise the global provider is not an SDK one (sftrace cannot add processors to
    # it): sftrace keeps a private provider of its own for recording.
    _own_provider = provider
    return provider


def _deactivate(state: State) -> None:
    for processor in state.processors:
        try:
            if isinstance(processor, BundleSpanProcessor):
                processor.active = False
            else:
                processor.active = False  # type: ignore[attr-defined]
        except Exception as exc:  # pragma: no cover - defensive
            log_once("switching off an old processor", exc)


def get_state() -> State:
    """The current configuration, configuring the defaults on first use."""
    state = _state
    if state is None:
        configure()
        state = _state
        assert state is not None
    return state


def reset() -> None:
    """Forget the configuration (switching off sftrace's processors). For tests."""
    global _state
    with _lock:
        if _state is not None:
            _deactivate(_state)
        _state = None
