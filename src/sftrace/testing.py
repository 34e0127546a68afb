"""Helpers for testing agents (and sftrace itself) with sftrace.

- :class:`SequentialIdGenerator`: deterministic trace and span ids.
- :func:`isolated_tracing`: a fresh ``TracerProvider`` with deterministic ids and an
  in-memory exporter, configured for sftrace for the duration of a ``with`` block.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from . import _config

__all__ = ["SequentialIdGenerator", "isolated_tracing"]


class SequentialIdGenerator(IdGenerator):
    """Trace ids 1, 2, 3... and span ids 1, 2, 3...: assertable span output."""

    def __init__(self) -> None:
        self._trace_ids = itertools.count(1)
        self._span_ids = itertools.count(1)
        self._lock = threading.Lock()

    def generate_trace_id(self) -> int:
        with self._lock:
            return next(self._trace_ids)

    def generate_span_id(self) -> int:
        with self._lock:
            return next(self._span_ids)


@contextmanager
def isolated_tracing(
    *, bundle_dir: str | os.PathLike[str] | None = None, deterministic_ids: bool = True
) -> Iterator[InMemorySpanExporter]:
    """Configure sftrace on a fresh provider; yield an exporter holding every finished span.

    The global OpenTelemetry provider is left alone, so tests stay independent.
    """
    provider = TracerProvider(id_generator=SequentialIdGenerator() if deterministic_ids else None)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _config.configure(tracer_provider=provider, bundle_dir=bundle_dir)
    try:
        yield memory
    finally:
        _config.reset()
        provider.shutdown()
