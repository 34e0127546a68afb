"""OTLP export of recorded spans: the processor and the exporters it can use.

``OtlpSpanProcessor`` (switchable, bounded flush and shutdown) queues each finished span
for an ``ExportWorker`` (``otlp_worker``: a background thread, batches, and a spill to
the bundle journal instead of dropping), which sends through one of:

- sftrace's own encoders (``otlp_encoder="sftrace"``, the default for HTTP):
  ``HttpSpanExporter`` (``otlp_http``), OTLP/JSON over HTTP, or OTLP/protobuf
  (``otlp_proto``) when ``http/protobuf`` is asked for or the collector refuses JSON;
- the official exporters (``otlp_encoder="official"``, and always for gRPC):
  ``EnrichingSpanExporter`` -> the official ``OTLPSpanExporter`` (HTTP/protobuf or gRPC).

Both send the OTLP copy of each span (see ``enrich``). The agent never waits on the
network. A collector that is down or slow costs the agent nothing; its failures are
logged once per cause. Only the OTLP copy of a span is changed: the bundle always keeps
every value whole.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from sftrace._export.enrich import SpanPreparer
from sftrace._export.otlp_http import HttpSpanExporter
from sftrace._export.otlp_logging import EXPORTER_LOGGERS, Quiet, install_filter
from sftrace._export.otlp_settings import (
    PROTOCOL_HTTP_JSON,
    OtlpSettings,
    official_exporter,
)
from sftrace._export.otlp_worker import ExportWorker, SpanSource
from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._version import __version__

__all__ = ["EXPORTER_LOGGERS", "EnrichingSpanExporter", "OtlpSpanProcessor", "make_exporter"]


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
            install_filter()
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
        with Quiet() if self._quiet else contextlib.nullcontext():
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
        with Quiet():
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


def make_exporter(
    settings: OtlpSettings, preparer: SpanPreparer, *, log_once: bool = True
) -> SpanExporter:
    """The exporter ``settings`` ask for: sftrace's HTTP one, or the official one.

    sftrace's sends OTLP/protobuf when ``http/protobuf`` was asked for, else OTLP/JSON;
    unless ``http/json`` was asked for, a collector that answers 415 to OTLP/JSON gets
    sftrace's OTLP/protobuf instead (see ``HttpSpanExporter``).
    """
    if not settings.sftrace_encoder:
        return EnrichingSpanExporter(official_exporter(settings), preparer, log_once=log_once)

    def protobuf() -> SpanExporter:
        return HttpSpanExporter(settings, preparer, log_once=log_once, protobuf=True)

    if settings.sftrace_protobuf:
        return protobuf()
    fallback = protobuf if settings.protocol != PROTOCOL_HTTP_JSON else None
    return HttpSpanExporter(settings, preparer, log_once=log_once, fallback=fallback)


class OtlpSpanProcessor(SpanProcessor):
    """Queues finished spans for export by an ``ExportWorker``, made safe.

    - ``on_end`` queues the span and returns; it never raises and never blocks. When the
      queue is full, a span of a recorded run is spilled (``source``: where its journal
      is) and sent from disk as soon as the queue has room.
    - ``force_flush`` and ``shutdown`` return within their time budget (shutdown: the
      export timeout) even when the collector hangs: the exporter is then closed, and
      what is still unsent is noted beside its bundle for ``sftrace push``.
    - ``active = False`` switches it off (an SDK provider cannot remove a processor).
    """

    def __init__(
        self,
        settings: OtlpSettings,
        exporter: SpanExporter | None = None,
        *,
        source: SpanSource | None = None,
    ) -> None:
        install_filter()
        self.settings = settings
        if exporter is None:
            preparer = SpanPreparer(
                capture_content=settings.capture_content,
                max_payload_bytes=settings.max_payload_bytes,
                resource_attributes={A.SFTRACE_VERSION: __version__},
                service_name=settings.service_name,
            )
            exporter = make_exporter(settings, preparer)
        self.exporter = exporter
        self.worker = ExportWorker(exporter, source=source)
        self.active = True
        self._shutdown = False
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not self.active:
            return
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # the application's sampler dropped it (sftrace kept it for its bundle)
        try:
            self.worker.put(span)
        except Exception as exc:  # never raise into the host
            log_once("queueing a span for OTLP export", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._shutdown:
            return True
        return self.worker.flush(timeout_millis / 1000)

    def shutdown(self) -> None:
        """Send what is queued within the export timeout, then stop. Idempotent."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
        self.active = False
        try:
            self.worker.shutdown(self.settings.timeout_s, self._close)
        except Exception as exc:
            log_once("shutting down OTLP export", exc)

    def _close(self) -> None:
        with Quiet():
            try:
                self.exporter.shutdown()
            except Exception as exc:
                log_once("shutting down the OTLP exporter", exc)
