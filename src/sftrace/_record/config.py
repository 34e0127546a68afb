"""``sftrace.configure``: which tracer provider sftrace uses and where bundles go.

sftrace fits into the OpenTelemetry set-up an application already has. If a global SDK
``TracerProvider`` exists (the application's own, or one made by ``logfire.configure()``
[behind Logfire's proxy], ``phoenix.otel.register()``, ``Traceloop.init()`` or
``opentelemetry-instrument``), sftrace adds its processors to it (see ``_record.attach``);
otherwise it creates one, which it sets as the global provider when the first run
starts if no other set-up has installed one by then. ``record()`` configures the
defaults by itself the first time it is used.

Unless ``configure`` was given an SDK provider, sftrace looks again when each run or
replay starts: a set-up made after ``sftrace.configure()`` (``logfire.configure()``
called later, or again) takes sftrace's processors over to its provider, with the same
arguments. Spans sftrace records are kept whatever the application's sampler decides
(``attach.RecordDroppedSpans``): bundles never depend on sampling.

OTLP export (``otlp_endpoint`` or the standard ``OTEL_EXPORTER_OTLP_*`` variables) adds
a processor that sends spans from a background worker, through sftrace's own OTLP/JSON
encoder or the official OTLP exporters (see ``_export.otlp``).

``OTEL_SDK_DISABLED=true`` turns OpenTelemetry off for the application: sftrace then
exports nothing over OTLP, but ``record()`` and replay keep working (bundles are
sftrace's own feature, asked for explicitly): they run on a private provider that is
not the global one, so no other span is created or exported.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import (
    ReadableSpan,
    Span,
    SpanLimits,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.util.instrumentation import InstrumentationInfo, InstrumentationScope
from opentelemetry.trace import Tracer

from sftrace._errors import ConfigError
from sftrace._export.bundle_exporter import BundleSpanExporter
from sftrace._export.otlp import OtlpSpanProcessor
from sftrace._export.otlp_settings import OtlpSettings, resolve_settings
from sftrace._internal import flag_value, log_once
from sftrace._model import attributes as A
from sftrace._model.attributes import INSTRUMENTATION_SCOPE
from sftrace._record.attach import record_dropped_spans, sdk_provider_of
from sftrace._record.redaction import Redactor, set_redactor
from sftrace._version import __version__

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
    otlp: OtlpSpanProcessor | None = None
    # What configure() was given: the provider (or proxy) to follow, None for the global
    # one, an SDK provider to stay on; and its other arguments, to redo it (see follow).
    source: object | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    def resolved_bundle_dir(self) -> Path:
        if self.bundle_dir is not None:
            return self.bundle_dir
        env = os.environ.get("SFTRACE_DIR")
        return Path(env) if env else DEFAULT_BUNDLE_DIR


_state: State | None = None
_lock = threading.RLock()
# Providers sftrace created, so a second configure() reuses rather than stacks them.
_own_provider: TracerProvider | None = None
# Its processors, on which sftrace builds its tracer under OTEL_SDK_DISABLED (see _tracer).
_own_processors: SynchronousMultiSpanProcessor | None = None
# sftrace's own provider once it was offered as the global one (at its first run).
_own_offered: TracerProvider | None = None
# True while record() configures the defaults by itself (see get_state).
_configuring_defaults = False
# Span processors a higher layer contributes to every configuration (the replay layer's
# matcher). That layer registers a factory when it is imported; the recording layer never
# imports it, so imports point down.
_processor_factories: list[Callable[[], SpanProcessor]] = []


def register_processor_factory(factory: Callable[[], SpanProcessor]) -> None:
    """Add a processor made by ``factory`` to the current and every later configuration."""
    with _lock:
        _processor_factories.append(factory)
        if _state is not None:
            processor = factory()
            _state.provider.add_span_processor(processor)
            _state.processors.append(processor)


def configure(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    bundle_dir: str | os.PathLike[str] | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    otlp_headers: Mapping[str, str] | str | None = None,
    otlp_encoder: str | None = None,
    service_name: str | None = None,
    capture_content: bool | None = None,
    max_payload_bytes: int | None = None,
    redaction: Redactor | None = None,
    fsync: bool | None = None,
) -> None:
    """Configure where sftrace's spans go. Keyword-only; safe to call more than once.

    Calling it again replaces the previous configuration; calling it twice with the same
    arguments changes nothing (processors and exporters are never duplicated).

    Args:
        tracer_provider: the SDK ``TracerProvider`` to attach to, or a proxy holding one
            in its ``provider`` attribute (Logfire's, which sftrace follows when Logfire
            is configured again). Default: the global provider if it is (or wraps) an
            SDK provider, looked up again when each run starts; else a new one, set as
            the global provider when the first run starts if none was set by then.
        bundle_dir: where ``record()`` writes bundles when it is given no ``output``.
            Default: ``$SFTRACE_DIR``, else ``.sftrace/traces`` under the working directory.
        otlp_endpoint: the collector to ship spans to (``http://host:4318`` or
            ``http://host:4318/v1/traces`` for HTTP, ``http://host:4317`` for gRPC;
            ``https://`` for TLS). Default: ``$SFTRACE_OTLP_ENDPOINT``; else, on a
            provider sftrace creates, ``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
            ``$OTEL_EXPORTER_OTLP_ENDPOINT`` (unless ``$OTEL_TRACES_EXPORTER`` excludes
            ``otlp``). An application's own provider already exports according to those
            variables, so sftrace does not add a second exporter for them. With no
            endpoint, nothing touches the network.
        otlp_protocol: ``"http/protobuf"``, ``"http/json"`` or ``"grpc"``. Default:
            ``$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, ``$OTEL_EXPORTER_OTLP_PROTOCOL``,
            else ``"http/protobuf"``.
        otlp_headers: headers for every export request (a dict, or ``"k=v,k2=v2"``).
            Default: ``$OTEL_EXPORTER_OTLP_TRACES_HEADERS``, ``$OTEL_EXPORTER_OTLP_HEADERS``.
        otlp_encoder: who encodes and sends the spans: ``"sftrace"`` (sftrace's own
            encoders over HTTP: OTLP/JSON, several times cheaper in CPU than the official
            protobuf encoder; sftrace's own OTLP/protobuf when ``otlp_protocol`` /
            ``$OTEL_EXPORTER_OTLP_PROTOCOL`` is set to ``"http/protobuf"``, and from the
            first HTTP 415 of a collector that refuses JSON, unless ``"http/json"`` was
            set), ``"official"`` (the OpenTelemetry protobuf exporters, HTTP or gRPC) or
            ``"auto"`` (sftrace's for HTTP, the official one for gRPC). Default:
            ``$SFTRACE_OTLP_ENCODER``, else ``"auto"``.
        service_name: ``service.name`` of a provider sftrace creates. Default:
            ``$OTEL_SERVICE_NAME``, else ``"sftrace"``. On an application's provider
            that has no service name of its own, sftrace's OTLP export uses it too.
        capture_content: send inputs and outputs over OTLP. Default:
            ``$SFTRACE_CAPTURE_CONTENT``, else True. Bundles always keep them.
        max_payload_bytes: cap of one string attribute in the OTLP copy of a span; longer
            values are cut and end with a visible ``…[truncated by sftrace: N bytes in
            full]`` marker. Default: ``$SFTRACE_MAX_PAYLOAD_BYTES``, else 1048576 (1 MiB);
            0 means no cap. Bundles always keep values whole.
        redaction: the rules that keep secrets out of every span, bundle and export,
            applied as values are captured (see ``sftrace.Redactor``). Default: the
            built-in rules; ``Redactor(builtins=False)`` switches redaction off.
        fsync: force every finished bundle to disk (``fsync`` of its files and
            directories) before it is renamed into place, so that it survives an OS
            crash or a power cut. False saves that wait (about a millisecond per run
            on a local SSD, far more on network disks), which counts in a service that
            records many short runs: a killed process still loses nothing (each span is
            handed to the OS as it ends), but an OS crash or power cut may lose the
            bundles of the last seconds or leave one that ``sftrace validate`` refuses.
            Default: ``$SFTRACE_FSYNC`` (true/false), else True.

    The export timeout comes from ``$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` /
    ``$OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds, default 10); it also bounds how long the
    provider's shutdown can wait for a collector that does not answer.
    """
    arguments = {
        "bundle_dir": bundle_dir,
        "otlp_endpoint": otlp_endpoint,
        "otlp_protocol": otlp_protocol,
        "otlp_headers": otlp_headers,
        "otlp_encoder": otlp_encoder,
        "service_name": service_name,
        "capture_content": capture_content,
        "max_payload_bytes": max_payload_bytes,
        "redaction": redaction,
        "fsync": fsync,
    }
    _configure(tracer_provider, arguments)


def _bundle_dir(value: object) -> Path | None:
    """``configure(bundle_dir=...)`` checked: a path that is a directory or is not there
    yet (``record()`` creates it)."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise ConfigError(f"bundle_dir must be a directory path, got {value!r}")
    directory = Path(value)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(
            f"bundle_dir {str(directory)!r} is not a directory; name a directory (record() "
            f"creates it when it is not there yet)"
        )
    return directory


def _fsync(value: object) -> bool:
    """``configure(fsync=...)`` checked, else ``$SFTRACE_FSYNC``, else True."""
    if value is not None:
        if not isinstance(value, bool):
            raise ConfigError(f"fsync must be True or False, got {value!r}")
        return value
    raw = os.environ.get("SFTRACE_FSYNC", "")
    if not raw.strip():
        return True
    flag = flag_value(raw)
    if flag is not None:
        return flag
    error = ConfigError(
        f"SFTRACE_FSYNC: {raw!r} is neither true (1, true, yes, on) nor false (0, false, "
        f"no, off); set one of them, or unset it to fsync every bundle"
    )
    if not _configuring_defaults:
        raise error
    # record() configured itself: a bad variable must not break the agent's run. Keep
    # the safe default and say why, once.
    log_once("reading SFTRACE_FSYNC", error)
    return True


def _configure(source: object | None, arguments: dict[str, Any]) -> None:
    global _state
    with _lock:
        # Everything that can fail is checked first, so a ConfigError changes nothing.
        _check_provider(source)
        directory = _bundle_dir(arguments["bundle_dir"])
        fsync = _fsync(arguments.get("fsync"))
        existing = _existing_provider(source)
        settings = _otlp_settings(
            endpoint=arguments["otlp_endpoint"],
            protocol=arguments["otlp_protocol"],
            headers=arguments["otlp_headers"],
            encoder=arguments["otlp_encoder"],
            capture_content=arguments["capture_content"],
            max_payload_bytes=arguments["max_payload_bytes"],
            standard_endpoint_variables=existing is None or existing is _own_provider,
            service_name=arguments["service_name"],
        )
        set_redactor(arguments["redaction"])  # checks its argument before it changes anything
        provider = existing if existing is not None else _own(arguments["service_name"])
        old = _state
        if old is not None and old.provider is provider:
            # Idempotent: same provider, keep the processors already attached.
            old.bundle_dir = directory
            old.bundle_exporter.fsync = fsync
            old.source, old.arguments = source, arguments
            _apply_otlp(old, settings)
            return
        if old is not None:
            _deactivate(old)
        exporter = BundleSpanExporter(fsync=fsync)
        processors: list[SpanProcessor] = [factory() for factory in _processor_factories]
        processors.append(BundleSpanProcessor(exporter))
        for processor in processors:
            provider.add_span_processor(processor)
        _state = State(
            provider=provider,
            tracer=_tracer(provider),
            bundle_exporter=exporter,
            bundle_dir=directory,
            processors=processors,
            source=source,
            arguments=arguments,
        )
        _apply_otlp(_state, settings)


def _otlp_settings(
    *, endpoint: str | None, standard_endpoint_variables: bool, **options: Any
) -> OtlpSettings | None:
    """The OTLP export settings, or None (no export). Raises ConfigError on a bad one."""
    if _sdk_disabled():
        if endpoint is not None or os.environ.get("SFTRACE_OTLP_ENDPOINT"):
            log_once(
                "configuring OTLP export",
                RuntimeError(
                    "OTEL_SDK_DISABLED=true: no span is exported over OTLP (bundles are "
                    "still recorded); unset OTEL_SDK_DISABLED to export"
                ),
            )
        return None
    try:
        return resolve_settings(
            endpoint=endpoint, standard_endpoint_variables=standard_endpoint_variables, **options
        )
    except ConfigError as exc:
        if not _configuring_defaults:
            raise
        # record() configured itself: a bad OTEL_* variable must not break the agent's
        # run. Record without OTLP export and say why, once.
        log_once("reading the OTLP settings from the environment", exc)
        return None


def _sdk_disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _apply_otlp(state: State, settings: OtlpSettings | None) -> None:
    """Make the state's OTLP processor match ``settings`` (keep it when they are equal)."""
    current = state.otlp
    if current is not None and current.settings == settings:
        return
    if current is not None:
        _retire(current)
        state.processors.remove(current)
        state.otlp = None
    if settings is not None:
        processor = OtlpSpanProcessor(settings, source=state.bundle_exporter)
        state.provider.add_span_processor(processor)
        state.processors.append(processor)
        state.otlp = processor


def _retire(processor: OtlpSpanProcessor) -> None:
    """Switch an OTLP processor off and let it send what it holds, off the caller's thread."""
    processor.active = False
    threading.Thread(target=processor.shutdown, name="sftrace-otlp-retire", daemon=True).start()


def _check_provider(explicit: object | None) -> None:
    if explicit is not None and sdk_provider_of(explicit) is None:
        raise ConfigError(
            f"tracer_provider must be an opentelemetry.sdk.trace.TracerProvider (or a "
            f"configured proxy around one, such as Logfire's), got "
            f"{type(explicit).__qualname__}"
        )


def _existing_provider(source: object | None) -> TracerProvider | None:
    """The provider to attach to: the explicit one's SDK provider, else the global one's;
    None when sftrace must use its own (neither exists, or OpenTelemetry is disabled)."""
    provider = sdk_provider_of(trace.get_tracer_provider() if source is None else source)
    if provider is not None and not _is_disabled(provider):
        return provider
    return None


def _own(service_name: str | None) -> TracerProvider:
    """sftrace's own provider, created (and made global when there is none) on first use."""
    global _own_provider, _own_processors
    if _own_provider is not None:
        return _own_provider
    resource = Resource.create(
        {
            A.SERVICE_NAME: service_name or os.environ.get("OTEL_SERVICE_NAME") or "sftrace",
            A.SFTRACE_VERSION: __version__,
        }
    )
    processors = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]
    provider = TracerProvider(resource=resource, active_span_processor=processors)
    _own_provider, _own_processors = provider, processors
    return provider


def _offer_own_as_global(state: State) -> None:
    """At the first run on sftrace's own provider, make it global if nothing else is.

    Not earlier: a set-up made after ``sftrace.configure()`` and before the first run
    (``logfire.configure()``) must get the global slot, which OpenTelemetry gives once.
    Under OTEL_SDK_DISABLED the application turned OpenTelemetry off, but record() and
    replay were asked for explicitly: they run on this provider, which is not made
    global (so nothing else is traced) and exports nothing over OTLP. When the global
    provider is not an SDK one (sftrace cannot add processors to it), it stays private.
    """
    global _own_offered
    if state.provider is not _own_provider or _own_offered is _own_provider:
        return
    _own_offered = _own_provider
    if not _is_disabled(state.provider) and isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider
    ):
        trace.set_tracer_provider(state.provider)


def _tracer(provider: TracerProvider) -> Tracer:
    """sftrace's tracer on ``provider``; on its own provider, also under OTEL_SDK_DISABLED."""
    tracer = provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)
    processors = _own_processors if provider is _own_provider else None
    if not isinstance(tracer, trace.NoOpTracer) or processors is None:
        return record_dropped_spans(tracer)
    # The SDK hands out no-op tracers when disabled; build a real one on the provider's
    # public parts (sampler, resource, id generator and the processors it was given).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # InstrumentationInfo's
        info = InstrumentationInfo(INSTRUMENTATION_SCOPE, __version__)
    return SdkTracer(
        provider.sampler,  # its own provider's: always on
        provider.resource,
        processors,
        provider.id_generator,
        info,
        SpanLimits(),
        InstrumentationScope(INSTRUMENTATION_SCOPE, __version__),
    )


def _is_disabled(provider: TracerProvider) -> bool:
    """True for a provider made under OTEL_SDK_DISABLED=true (its tracers are no-ops)."""
    return isinstance(provider.get_tracer(INSTRUMENTATION_SCOPE, __version__), trace.NoOpTracer)


def _deactivate(state: State) -> None:
    for processor in state.processors:
        try:
            if isinstance(processor, BundleSpanProcessor):
                processor.active = False
            else:
                processor.active = False  # type: ignore[attr-defined]
        except Exception as exc:  # pragma: no cover - defensive
            log_once("switching off an old processor", exc)
    if state.otlp is not None:
        _retire(state.otlp)


def get_state() -> State:
    """The configuration for a run or replay that starts now: configures the defaults
    on first use, and follows a tracing set-up made since (see the module docstring)."""
    global _configuring_defaults
    state = _state
    if state is None:
        with _lock:
            if _state is None:
                _configuring_defaults = True
                try:
                    configure()
                finally:
                    _configuring_defaults = False
    elif state.source is None or not isinstance(state.source, TracerProvider):
        _follow(state)
    state = _state
    assert state is not None
    _offer_own_as_global(state)
    return state


def _follow(state: State) -> None:
    """Configure again, with the same arguments, when the provider sftrace should use
    changed since (a set-up installed or replaced after ``configure``)."""
    global _configuring_defaults
    wanted = _existing_provider(state.source)
    if wanted is None or wanted is state.provider:
        return  # the same, or nothing better than sftrace's own provider
    with _lock:
        if _state is not state:
            return  # configured meanwhile
        _configuring_defaults = True  # the environment may have changed: never raise
        try:
            _configure(state.source, state.arguments)
        except Exception as exc:  # keep the old configuration rather than break the run
            log_once("attaching to the application's new tracer provider", exc)
        finally:
            _configuring_defaults = False


def reset() -> None:
    """Forget the configuration (switching off sftrace's processors). For tests."""
    global _state
    with _lock:
        if _state is not None:
            _deactivate(_state)
        _state = None
        set_redactor(None)
