"""OTLP export of recorded spans: the enriching exporter and its processor.

sftrace ships spans to a collector through the official OTLP exporters, composed:

``OtlpSpanProcessor`` (a ``BatchSpanProcessor`` that can be switched off, with bounded
flush and shutdown) -> ``EnrichingSpanExporter`` (the OTLP copy of each span, see
``enrich``) -> the official ``OTLPSpanExporter`` (HTTP/protobuf or gRPC, configured by
``otlp_settings``).

The agent never waits on the network: ``on_end`` only queues the span. A collector that
is down or slow costs the agent nothing; its failures are logged once per cause (the
official exporters log every failed batch; sftrace silences the repeats of its own).
Only the OTLP copy of a span is changed: the bundle always keeps every value whole.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from sftrace._export.enrich import SpanPreparer
from sftrace._export.otlp_settings import OtlpSettings, official_exporter
from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._version import __version__

__all__ = ["EXPORTER_LOGGERS", "EnrichingSpanExporter", "OtlpSpanProcessor"]


# --- logging once per cause --------------------------------------------------------------

# Loggers the official exporters and the batch processor report failures on.
EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
)
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_quiet = threading.local()


class _OncePerCause(logging.Filter):
    """Lets through the first record of each cause logged during sftrace's own export.

    Only records emitted while sftrace's exporter or processor is running in the current
    thread are filtered: the application's own exporters keep their normal logging.
    """

    def __init__(self) -> None:
        super().__init__("sftrace-otlp")
        self._seen: set[tuple[str, str, tuple[str, ...]]] = set()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_quiet, "depth", 0):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        # A cause is the message template and its arguments without numbers and
        # addresses (backoff delays, object ids and ports vary from attempt to attempt).
        key = (
            record.name,
            str(record.msg),
            tuple(_VARYING.sub("#", str(arg)) for arg in args if not isinstance(arg, float)),
        )
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) > 1000:
                self._seen.clear()
            self._seen.add(key)
        record.msg = f"{record.msg} [sftrace OTLP export; repeats are not logged]"
        return True


_filter = _OncePerCause()
_filter_installed = False
_filter_lock = threading.Lock()


def _install_filter() -> None:
    global _filter_installed
    with _filter_lock:
        if _filter_installed:
            return
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(_filter)
        _filter_installed = True


class _Quiet:
    """Marks the current thread as running sftrace's export (see ``_OncePerCause``)."""

    def __enter__(self) -> None:
        _quiet.depth = getattr(_quiet, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _quiet.depth -= 1


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
            _install_filter()
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
        with _Quiet() if self._quiet else contextlib.nullcontext():
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
        with _Quiet():
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


def _bounded(work: Callable[[], object], timeout_s: float, name: str) -> bool:
    """Run ``work`` in a daemon thread; True if it finished within ``timeout_s``."""
    finished = threading.Event()

    def run() -> None:
        try:
            with _Quiet():
                work()
        except Exception as exc:
            log_once(name, exc)
        finally:
            finished.set()

    threading.Thread(target=run, name=f"sftrace-{name.replace(' ', '-')}", daemon=True).start()
    return finished.wait(max(0.0, timeout_s))


class OtlpSpanProcessor(SpanProcessor):
    """A ``BatchSpanProcessor`` in front of an ``EnrichingSpanExporter``, made safe.

    - ``on_end`` queues the span and returns; it never raises and never blocks.
    - ``force_flush`` and ``shutdown`` return within their time budget (shutdown: the
      export timeout) even when the collector hangs: the exporter is then closed, so
      whatever is still queued is dropped instead of retried.
    - ``active = False`` switches it off (an SDK provider cannot remove a processor).
    """

    def __init__(self, settings: OtlpSettings, exporter: SpanExporter | None = None) -> None:
        _install_filter()
        self.settings = settings
        if exporter is None:
            preparer = SpanPreparer(
                capture_content=settings.capture_content,
                max_payload_bytes=settings.max_payload_bytes,
                resource_attributes={A.SFTRACE_VERSION: __version__},
                service_name=settings.service_name,
            )
            exporter = EnrichingSpanExporter(official_exporter(settings), preparer)
        self.exporter = exporter
        self._batch = BatchSpanProcessor(exporter)
        self.active = True
        self._shutdown = False
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not self.active:
            return
        with _Quiet():
            try:
                self._batch.on_end(span)
            except Exception as exc:  # never raise into the host
                log_once("queueing a span for OTLP export", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._shutdown:
            return True
        return _bounded(self._batch.force_flush, timeout_millis / 1000, "flushing OTLP export")

    def shutdown(self) -> None:
        """Send what is queued within the export timeout, then stop. Idempotent."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
        self.active = False
        if not _bounded(self._batch.shutdown, self.settings.timeout_s, "shutting down OTLP export"):
            # The collector did not answer in time: stop retrying and drop the rest.
            self.exporter.shutdown()
