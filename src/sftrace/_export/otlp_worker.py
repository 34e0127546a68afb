"""The OTLP export worker: a bounded queue, a sending thread, and a spill to the journal.

The agent's thread only appends each finished span to a bounded queue (``put``); one
background thread takes batches off it, and the exporter encodes and sends them (with
sftrace's own exporter, the next batch is encoded while the collector reads the one
sent). When
the queue is full, or a batch fails (the collector is down), the spans are not dropped:
a span of a recorded run is already on disk in its bundle journal, so the worker only
notes its id (``spill``) and, as soon as the queue has room again, reads those spans
back from the journal (or the finished bundle) and sends them. At shutdown, within its
bounded timeout, the worker sends what it can; the ids of what is still unsent are
written beside each bundle (``unsent``) for ``sftrace push``, which sends only those.

Spans that belong to no recorded run (the application's own, replays) have nowhere on
disk to be read back from: when the queue is full they are dropped and counted (raise
``OTEL_BSP_MAX_QUEUE_SIZE`` to keep more in memory).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from sftrace._bundle.format import SPANS_FILE
from sftrace._export.otlp_logging import Quiet
from sftrace._export.unsent import write_unsent
from sftrace._internal import log_once
from sftrace._model.otlp_json import decode_span, span_id_hex, trace_id_hex

__all__ = ["ExportWorker", "SpanSource", "WorkerLimits"]

_SPAN_ID_KEY = b'"spanId":"'
_JOURNALS_KEPT = 64
_FIRST_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 5.0


# A queued span, with its bundle line when the bundle exporter just encoded it.
Item = tuple[ReadableSpan, bytes | None]


class SpanSource(Protocol):
    """Where recorded spans are on disk (the bundle exporter)."""

    def has_spans(self, trace_id: int) -> bool: ...

    def span_source(self, trace_id: int) -> Path | None: ...

    def journaled_line(self, span: ReadableSpan) -> bytes | None: ...


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class WorkerLimits:
    """Queue and batch sizes, from the standard ``OTEL_BSP_*`` variables."""

    max_queue: int = 2048
    batch_size: int = 512
    delay_s: float = 5.0

    @classmethod
    def from_environment(cls) -> WorkerLimits:
        queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        return cls(
            max_queue=queue,
            batch_size=min(queue, _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)),
            delay_s=_env_int("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000,
        )


@runtime_checkable
class Pipelined(Protocol):
    """An exporter whose export comes in three steps, so that the worker encodes its next
    batch while the collector reads the one sent (``HttpSpanExporter``)."""

    def encode_items(self, items: Sequence[Item]) -> bytes | SpanExportResult: ...

    def post(self, body: bytes) -> None: ...

    def answer(self, body: bytes, items: Sequence[Item]) -> SpanExportResult: ...


@dataclass(frozen=True)
class _Posted:
    """A batch whose request was sent and whose answer is not read yet."""

    batch: list[Item]
    body: bytes


@dataclass
class _Spilled:
    """The spilled spans of one trace: ids in the order they ended, and their origin."""

    resource: Resource
    scope: InstrumentationScope | None
    span_ids: list[int] = field(default_factory=list)


class ExportWorker:
    """Sends spans through ``exporter`` from a background thread (started on first use)."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        source: SpanSource | None = None,
        limits: WorkerLimits | None = None,
    ) -> None:
        self.exporter = exporter
        self.source = source
        self.limits = limits or WorkerLimits.from_environment()
        self.dropped = 0  # spans lost: no journal to read them back from
        self.spilled = 0  # spans that went through the spill
        self._queue: deque[Item] = deque()
        self._spill: dict[int, _Spilled] = {}
        self._inflight: list[list[Item]] = []  # batches being sent
        self._reading: tuple[int, _Spilled] | None = None  # spilled spans being read back
        self._journal_read: dict[Path, int] = {}  # journal -> offset read back up to
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._draining = 0  # flushes waiting
        self._retry_at = 0.0
        self._backoff = _FIRST_BACKOFF_S

    # -- the agent's side: never blocks, never raises -----------------------------------
    def put(self, span: ReadableSpan) -> None:
        queue = self._queue
        if len(queue) < self.limits.max_queue and not self._stopping:
            source = self.source
            queue.append((span, source.journaled_line(span) if source is not None else None))
            if len(queue) >= self.limits.batch_size and not self._wake.is_set():
                self._wake.set()
        else:
            self._overflow(span)
        if self._thread is None:
            self._start()

    def _overflow(self, span: ReadableSpan) -> None:
        context = span.context
        source = self.source
        if context is not None and source is not None and source.has_spans(context.trace_id):
            self._note(
                context.trace_id, span.resource, span.instrumentation_scope, [context.span_id]
            )
            return
        self.dropped += 1
        log_once(
            "queueing a span for OTLP export",
            RuntimeError(
                f"a span that belongs to no recorded run (no journal to send it from later) "
                f"found the export queue full ({self.limits.max_queue} spans) or its export "
                f"failed: dropped; raise OTEL_BSP_MAX_QUEUE_SIZE to queue more"
            ),
        )

    def _note(
        self,
        trace_id: int,
        resource: Resource,
        scope: InstrumentationScope | None,
        span_ids: list[int],
    ) -> None:
        with self._lock:
            entry = self._spill.get(trace_id)
            if entry is None:
                entry = self._spill[trace_id] = _Spilled(resource, scope)
            entry.span_ids.extend(span_ids)
            self.spilled += len(span_ids)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, name="sftrace-otlp-export", daemon=True
            )
            self._thread.start()

    # -- the worker thread ----------------------------------------------------------------
    def _run(self) -> None:
        with Quiet():
            while True:
                timeout = self.limits.delay_s
                pause = self._retry_at - time.monotonic()
                if 0 < pause < timeout:
                    timeout = pause  # wake up when the backoff is over
                woke = self._wake.wait(timeout)
                self._wake.clear()
                # Partial batches leave when the delay is over, or on flush and shutdown.
                drain = not woke or self._draining > 0 or self._stopping
                try:
                    self._work(drain)
                except Exception as exc:  # the worker must survive anything
                    log_once("exporting spans over OTLP", exc)
                with self._idle:
                    self._idle.notify_all()
                    if self._stopping and (self._done() or self._retry_at == float("inf")):
                        return

    def _work(self, drain: bool) -> None:
        """Send full batches (``drain``: and what is left), then the spill while the queue
        has room. Only full batches while the agent is busy: a thread that took a few
        spans at a time would fight the agent for the GIL at every span."""
        queue, size = self._queue, self.limits.batch_size
        posted: _Posted | None = None
        try:
            while True:
                if time.monotonic() < self._retry_at:
                    return  # backing off after a failure
                if len(queue) >= size or (queue and drain):
                    with self._lock:
                        batch = [queue.popleft() for _ in range(min(size, len(queue)))]
                        self._inflight.append(batch)
                    posted = self._send_next(batch, posted)
                elif posted is not None:
                    answered: _Posted = posted
                    posted = None
                    self._answered(answered)
                elif not (self._spill and len(queue) < size and self._send_spilled()):
                    return
                with self._idle:
                    self._idle.notify_all()
        finally:
            if posted is not None:
                self._answered(posted)

    def _send_next(self, batch: list[Item], posted: _Posted | None) -> _Posted | None:
        """Send ``batch``; with an exporter that can (``HttpSpanExporter``), encode it
        while the collector reads the ``posted`` one, and return it posted, unanswered."""
        exporter = self.exporter
        if not isinstance(exporter, Pipelined):
            self._send(batch)
            return None
        body = exporter.encode_items(batch)
        if posted is not None and not self._answered(posted):
            with self._lock:  # the collector failed: this one waits for the retry
                self._inflight = [b for b in self._inflight if b is not batch]
                self._queue.extendleft(reversed(batch))
            return None
        if isinstance(body, SpanExportResult):
            self._settle(batch, body)
            return None
        exporter.post(body)
        return _Posted(batch, body)

    def _answered(self, posted: _Posted) -> bool:
        exporter = self.exporter
        assert isinstance(exporter, Pipelined)
        return self._settle(posted.batch, exporter.answer(posted.body, posted.batch))

    def _send(self, batch: list[Item]) -> bool:
        export_items = getattr(self.exporter, "export_items", None)
        if export_items is not None:
            result = export_items(batch)
        else:
            result = self.exporter.export([span for span, _ in batch])
        return self._settle(batch, result)

    def _settle(self, batch: list[Item], result: SpanExportResult) -> bool:
        """Done with ``batch`` (in flight): True if it was sent; if not, its spans are
        spilled (or counted lost) and the worker backs off."""
        if result is not SpanExportResult.SUCCESS:
            for span, _ in batch:  # keep them: spill (or count them lost) and back off
                self._overflow(span)
        with self._lock:
            self._inflight = [b for b in self._inflight if b is not batch]
        if result is SpanExportResult.SUCCESS:
            self._backoff = _FIRST_BACKOFF_S
            self._retry_at = 0.0
            return True
        self._fail()
        return False

    def _fail(self) -> None:
        if self._stopping:
            self._retry_at = float("inf")  # at shutdown: no retry beyond the exporter's own
            return
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF_S)

    def _send_spilled(self) -> bool:
        """Read one trace's spilled spans back from disk and send them; False to stop."""
        with self._lock:
            if not self._spill:
                return False
            trace_id = next(iter(self._spill))
            entry = self._spill.pop(trace_id)
            self._reading = (trace_id, entry)
        try:
            return self._send_read_back(trace_id, entry)
        finally:
            with self._lock:
                self._reading = None

    def _send_read_back(self, trace_id: int, entry: _Spilled) -> bool:
        wanted = {span_id_hex(span_id).encode() for span_id in entry.span_ids}
        spans = self._read_back(trace_id, wanted, entry)
        if spans is None:  # not readable now (the bundle is being finished): later
            self._note(trace_id, entry.resource, entry.scope, entry.span_ids)
            self.spilled -= len(entry.span_ids)
            self._fail()
            return False
        size = self.limits.batch_size
        for start in range(0, len(spans), size):
            batch = spans[start : start + size]
            with self._lock:
                self._inflight.append(batch)
            if not self._send(batch):
                for span, _ in spans[start + size :]:
                    self._overflow(span)
                return False
        return True

    def _read_back(self, trace_id: int, wanted: set[bytes], entry: _Spilled) -> list[Item] | None:
        path = self.source.span_source(trace_id) if self.source is not None else None
        if path is None:
            self.dropped += len(wanted)
            log_once(
                "reading spilled spans back for OTLP export",
                RuntimeError(f"no journal or bundle for trace {trace_id_hex(trace_id)}"),
            )
            return []
        try:
            lines = self._lines(path, wanted)
        except OSError:
            return None
        spans: list[Item] = []
        for line in lines:
            try:
                spans.append((decode_span(orjson.loads(line), entry.resource, entry.scope), line))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                log_once("reading spilled spans back for OTLP export", exc)
        found = len(spans)
        if found < len(wanted):
            self.dropped += len(wanted) - found
        return spans

    def _lines(self, path: Path, wanted: set[bytes]) -> list[bytes]:
        """The lines of ``wanted`` spans in a bundle, or in a journal from where the last
        read-back of it stopped (spans spill in the order they ended, the order of the
        journal), so a long run is not read again from its start at every spill."""
        if path.is_dir():
            return list(_matching((path / SPANS_FILE).read_bytes().splitlines(), wanted))
        start = self._journal_read.get(path, 0)
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
        found = list(_matching(data.splitlines(), wanted))
        if len(found) < len(wanted) and start:  # some ended earlier (a failed batch)
            found = list(_matching(path.read_bytes().splitlines(), wanted))
        if len(found) == len(wanted):
            if len(self._journal_read) >= _JOURNALS_KEPT:
                del self._journal_read[next(iter(self._journal_read))]
            self._journal_read[path] = start + data.rfind(b"\n") + 1
        return found

    # -- flush and shutdown -------------------------------------------------------------
    def _done(self) -> bool:
        return not (self._queue or self._spill or self._inflight or self._reading)

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued or spilled was sent (True), or ``timeout_s``."""
        if self._thread is None:
            return self._done()
        deadline = time.monotonic() + timeout_s
        self._retry_at = 0.0  # a flush retries at once
        with self._idle:
            self._draining += 1
            try:
                while not self._done():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._retry_at == float("inf"):
                        return False  # out of time, or failed at shutdown
                    self._wake.set()
                    self._idle.wait(min(remaining, 0.05))
            finally:
                self._draining -= 1
        return True

    def shutdown(self, timeout_s: float, close: Callable[[], None]) -> None:
        """Send what is left within ``timeout_s``; then ``close`` the exporter and note
        what is still unsent beside its bundle."""
        self._stopping = True
        sent = self.flush(timeout_s)
        close()
        if sent:
            return
        if self._thread is not None:
            self._thread.join(0.5)
        self._note_unsent()

    def _note_unsent(self) -> None:
        with self._lock:
            left = [item for batch in self._inflight for item in batch] + list(self._queue)
            self._queue.clear()
            spill = dict(self._spill)
            self._spill.clear()
            if self._reading is not None:
                reading_id, reading = self._reading
                spill.setdefault(reading_id, _Spilled(reading.resource, reading.scope))
                spill[reading_id].span_ids.extend(reading.span_ids)
        by_trace: dict[int, set[str]] = {}
        for span, _ in left:
            if span.context is not None:
                by_trace.setdefault(span.context.trace_id, set()).add(
                    span_id_hex(span.context.span_id)
                )
        for trace_id, entry in spill.items():
            by_trace.setdefault(trace_id, set()).update(map(span_id_hex, entry.span_ids))
        for trace_id, ids in by_trace.items():
            self._write_note(trace_id, ids)

    def _write_note(self, trace_id: int, ids: set[str]) -> None:
        path = self.source.span_source(trace_id) if self.source is not None else None
        if path is None or not path.is_dir():
            self.dropped += len(ids)  # not a finished bundle: `sftrace recover` + push
            return
        try:
            write_unsent(path, trace_id_hex(trace_id), ids)
        except OSError as exc:
            log_once("noting the spans OTLP export did not send", exc)


def _matching(lines: list[bytes], wanted: set[bytes]) -> Iterator[bytes]:
    """The lines whose span id is in ``wanted`` (found without parsing every line)."""
    for line in lines:
        at = line.find(_SPAN_ID_KEY)
        if at >= 0 and line[at + 10 : at + 26] in wanted:
            yield line
