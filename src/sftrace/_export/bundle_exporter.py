"""``BundleSpanExporter``: an OpenTelemetry ``SpanExporter`` that writes ``.sftrace`` bundles.

Each recorded run is one trace whose root is the run span (``sftrace.kind = "run"``).
Spans are journaled into the run's bundle as they end; when the run span ends the
bundle is finished and renamed into place (see ``_bundle_writer``).

Two ways to use it:

- ``record()`` drives the exporter it configured: it registers each run with
  :meth:`BundleSpanExporter.begin_run` (the output path, whether to overwrite), so the
  journal exists from the first moment of the run.
- On any ``TracerProvider`` (``SimpleSpanProcessor(BundleSpanExporter(directory))``), it
  writes one bundle per sftrace run it sees, named ``<agent>-<run_id>.sftrace`` in
  ``directory``. Spans of traces that contain no sftrace span are ignored.

As the OpenTelemetry contract requires, ``export`` never raises: a failure is logged once
per cause and reported as ``SpanExportResult.FAILURE``; ``shutdown`` is idempotent.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from sftrace._bundle.format import JOURNAL_FILE
from sftrace._bundle.manifest import RunTotals, build_manifest, journal_header, utc_iso
from sftrace._bundle.names import bundle_name
from sftrace._bundle.writer import BundleWriter, partial_dir_for
from sftrace._errors import BundleError
from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._model.otlp_json import (
    encode_span,
    plain_attributes,
    trace_id_hex,
)
from sftrace._model.stored import stored_attributes

# Looked up once: an Enum member looked up on its class costs about ten times as much as
# a module global, and every span is exported.
_SUCCESS = SpanExportResult.SUCCESS

# How many finished runs span_source() still knows.
_PLACED_KEPT = 4096


@dataclass
class RunOutcome:
    """How writing one run's bundle ended: the path written, or the error."""

    path: Path | None = None
    error: BaseException | None = None


@dataclass
class _Run:
    writer: BundleWriter
    header: dict[str, Any]
    final_path: Path | None
    overwrite: bool
    totals: RunTotals = field(default_factory=RunTotals)
    outcome: RunOutcome = field(default_factory=RunOutcome)


class BundleSpanExporter(SpanExporter):
    """Write the spans of sftrace runs into ``.sftrace`` bundles.

    ``directory``: where bundles of runs not registered by ``record()`` go. With
    ``None`` only registered runs are written. ``fsync``: force each finished bundle to
    disk before it is renamed into place (the default); False leaves that to the OS,
    which a killed process does not affect but an OS crash or power cut may (see
    ``sftrace.configure``). Read as each run starts.
    """

    def __init__(self, directory: str | Path | None = None, *, fsync: bool = True) -> None:
        self._directory = Path(directory) if directory is not None else None
        self.fsync = fsync
        self._runs: dict[int, _Run] = {}
        self._outcomes: dict[int, RunOutcome] = {}
        # Bundles of the latest finished runs, for OTLP export reading spans back.
        self._placed: dict[int, Path] = {}
        # The line of the span this thread journaled last (see journaled_line).
        self._last = threading.local()
        self._lock = threading.Lock()
        self._shutdown = False
        _exporters.add(self)

    def _forget_runs(self) -> None:
        """In a forked child: the runs being journaled are the parent's (their journal
        offsets are the parent's to keep); this process writes none of them."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._runs = {}
        self._outcomes = {}

    # -- registration by record() ------------------------------------------------------
    def begin_run(
        self, trace_id: int, *, path: Path, overwrite: bool, header: dict[str, Any]
    ) -> None:
        """Start the journal of a run whose bundle will be ``path``.

        Raises ``OSError`` when the journal cannot be created (the caller reports it).
        """
        full_header = journal_header(trace_id, final_name=path.name, overwrite=overwrite, **header)
        writer = BundleWriter(
            partial_dir_for(path, str(header.get("run_id"))), full_header, fsync=self.fsync
        )
        with self._lock:
            self._runs[trace_id] = _Run(writer, full_header, path, overwrite)

    def pop_outcome(self, trace_id: int) -> RunOutcome | None:
        """The outcome of a finished run (once), or None if it has not finished."""
        with self._lock:
            return self._outcomes.pop(trace_id, None)

    def abandon_run(self, trace_id: int) -> None:
        """Forget a registered run, keeping its journal on disk for ``sftrace recover``."""
        with self._lock:
            run = self._runs.pop(trace_id, None)
        if run is not None:
            run.writer.close()

    def discard_run(self, trace_id: int) -> None:
        """Forget a registered run and delete its journal: no bundle is written for it (a
        replay that diverged is no run of the agent to keep). Spans of it that end later
        are ignored, as for any trace that is not a registered run."""
        with self._lock:
            run = self._runs.pop(trace_id, None)
        if run is not None:
            run.writer.discard()

    def span_source(self, trace_id: int) -> Path | None:
        """Where a run's spans are on disk: its journal file while it is recorded, its
        bundle once finished (for the latest runs); None for other traces."""
        with self._lock:
            run = self._runs.get(trace_id)
            if run is not None:
                return run.writer.partial_dir / JOURNAL_FILE
            return self._placed.get(trace_id)

    def journaled_line(self, span: ReadableSpan) -> bytes | None:
        """The bundle line of ``span`` if it is the span this thread journaled last
        (OTLP export reuses its encoding; span processors run one after the other)."""
        last = getattr(self._last, "entry", None)
        if last is not None and last[0] is span:
            return last[1]  # type: ignore[no-any-return]
        return None

    def has_spans(self, trace_id: int) -> bool:
        """True if the trace is a run whose spans are journaled (cheap, no lock)."""
        return trace_id in self._runs or trace_id in self._placed

    # -- SpanExporter ----------------------------------------------------------------
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        result = _SUCCESS
        for span in spans:
            try:
                self._export_one(span)
            except Exception as exc:  # the exporter contract: never raise
                log_once("writing a span to its bundle", exc)
                self._fail_run(span, exc)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        """Close open journals (they stay on disk, recoverable). Idempotent."""
        if self._shutdown:
            return
        self._shutdown = True
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            run.writer.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Every span is handed to the OS as it is exported: nothing is buffered here.
        return True

    # -- internals -------------------------------------------------------------------
    def _export_one(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        trace_id = context.trace_id
        if self._directory is None and trace_id not in self._runs:
            return  # not a run being recorded (a replay, the application's own traces)
        attributes = plain_attributes(span)
        with self._lock:
            run = self._runs.get(trace_id)
            if run is None:
                if self._directory is None or A.KIND not in attributes:
                    return
                run = self._open_unregistered(trace_id)
            line = orjson.dumps(
                encode_span(span, attributes=stored_attributes(attributes)),
                option=orjson.OPT_APPEND_NEWLINE,
            )
            self._last.entry = (span, line)
            seq = attributes.get(A.SEQ)
            run.writer.append(line, span.start_time or 0, seq if isinstance(seq, int) else None)
            run.totals.add(attributes)
            if attributes.get(A.KIND) == A.KIND_RUN:  # the run span is the trace's root
                del self._runs[trace_id]
                # While the bundle is being finished its spans are still in the journal.
                self._remember(trace_id, run.writer.partial_dir / JOURNAL_FILE)
                if run.final_path is not None:
                    # A registered run: record() collects its outcome. Runs this exporter
                    # opened by itself keep none (nobody asks; a long-lived process would
                    # otherwise hold one per run).
                    self._outcomes[trace_id] = run.outcome
            else:
                return
        self._finish(run, span)

    def _remember(self, trace_id: int, path: Path) -> None:
        """Note where a finished run's spans are (under the lock; the latest runs only)."""
        self._placed.pop(trace_id, None)
        if len(self._placed) >= _PLACED_KEPT:
            del self._placed[next(iter(self._placed))]
        self._placed[trace_id] = path

    def _open_unregistered(self, trace_id: int) -> _Run:
        assert self._directory is not None
        tid = trace_id_hex(trace_id)
        header = journal_header(trace_id, run_id=tid, created_at=utc_iso())
        writer = BundleWriter(
            partial_dir_for(self._directory / f"trace-{tid}", tid), header, fsync=self.fsync
        )
        run = _Run(writer, header, None, False)
        self._runs[trace_id] = run
        return run

    def _finish(self, run: _Run, root: ReadableSpan) -> None:
        if run.outcome.error is not None:
            # A span of the run could not be journaled (a full disk...): a bundle written
            # now would lack it. The journal stays for `sftrace recover`, which says what
            # is missing.
            run.writer.close()
            return
        try:
            manifest = build_manifest(run.header, root, run.totals)
            path = run.final_path
            if path is None:
                assert self._directory is not None
                path = self._directory / bundle_name(manifest.agent_name, manifest.run_id)
            run.outcome.path = run.writer.finalize(manifest, path, overwrite=run.overwrite)
            if root.context is not None:
                with self._lock:
                    self._remember(root.context.trace_id, run.outcome.path)
        except Exception as exc:
            run.writer.close()  # the journal stays: `sftrace recover` can rebuild the run
            run.outcome.error = exc
            raise

    def _fail_run(self, span: ReadableSpan, exc: BaseException) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            run = self._runs.get(context.trace_id)
            if run is not None and run.outcome.error is None:
                run.outcome.error = _journal_error(run, exc)
            outcome = self._outcomes.get(context.trace_id)
            if outcome is not None and outcome.error is None:
                outcome.error = exc
            if run is not None and (span.attributes or {}).get(A.KIND) == A.KIND_RUN:
                # The run span itself could not be journaled: the run is over all the same.
                del self._runs[context.trace_id]
                if run.final_path is not None:
                    self._outcomes[context.trace_id] = run.outcome
                run.writer.close()


# Every exporter, so that a forked child forgets the parent's runs in each (see
# ``_forget_runs``): without it a child's spans went into the parent's journal, and the
# parent's bundle, written from the offsets it knew, was unreadable.
_exporters: weakref.WeakSet[BundleSpanExporter] = weakref.WeakSet()


def _forget_runs_in_child() -> None:
    for exporter in list(_exporters):
        exporter._forget_runs()


os.register_at_fork(after_in_child=_forget_runs_in_child)


def _journal_error(run: _Run, exc: BaseException) -> BaseException:
    """The error record() reports when a span of the run could not be journaled."""
    if not isinstance(exc, OSError):
        return exc
    target = run.final_path or run.writer.partial_dir
    error = BundleError(
        f"could not write the bundle {str(target)!r}: a span could not be saved "
        f"({type(exc).__name__}: {exc}); what was saved is kept in "
        f"{str(run.writer.partial_dir)!r}: run `sftrace recover {target}` to turn it into "
        f"a bundle",
        path=str(target),
    )
    error.__cause__ = exc
    return error
