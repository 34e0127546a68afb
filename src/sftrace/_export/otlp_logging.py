"""Logging of OTLP export failures: once per cause, only for sftrace's own export.

The official exporters log every failed batch, and so would sftrace's own exporter; a
collector that is down for an hour must not fill the application's log. While sftrace's
export runs in a thread (``Quiet``), the first record of each cause is let through and
its repeats are dropped; the application's own exporters keep their normal logging.
"""

from __future__ import annotations

import logging
import re
import threading

__all__ = ["EXPORTER_LOGGERS", "OTLP_LOGGER", "Quiet", "install_filter"]

# sftrace's own exporter logs its failures here.
OTLP_LOGGER = "sftrace.otlp"
# Loggers the exporters and the batch processor report failures on.
EXPORTER_LOGGERS = (
    OTLP_LOGGER,
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


def install_filter() -> None:
    global _filter_installed
    with _filter_lock:
        if _filter_installed:
            return
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(_filter)
        _filter_installed = True


class Quiet:
    """Marks the current thread as running sftrace's export (see ``_OncePerCause``)."""

    def __enter__(self) -> None:
        _quiet.depth = getattr(_quiet, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _quiet.depth -= 1
