"""The run in progress: where instrumented calls find their recording or replay.

A run (``record()`` or ``replay()``) sits in the OpenTelemetry context it attaches, so
asyncio tasks see the run that created them, and (see :mod:`sftrace._record.threads`)
so do threads and executor work started inside the run. A call that carries no run of
its own is never answered by a replay: it runs for real. A recording adopts it only when
it is the one run active in the process; otherwise it is recorded nowhere and a warning
is logged once.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from sftrace._bundle.format import STATUS_COMPLETED, STATUS_FAILED
from sftrace._errors import RecordedDependencyError
from sftrace._internal import logger
from sftrace._model import attributes as A
from sftrace._model.serialize import Serializer, canonical, register_bytes_filter
from sftrace._record import threads
from sftrace._record.redaction import KnownSecrets, Redactor, current_redactor

if TYPE_CHECKING:
    from sftrace._record.intercept import Interceptor


class ActiveRun:
    """One run being recorded or replayed."""

    def __init__(
        self,
        *,
        tracer: Tracer,
        agent_name: str,
        run_id: str,
        span: Span,
        replay: Interceptor | None = None,
        redactor: Redactor | None = None,
        known_secrets: KnownSecrets | None = None,
        serializer: Serializer | None = None,
    ) -> None:
        self.tracer = tracer
        # ``record(serializer=)``: for the values of the run's calls whose own boundary
        # has no serializer (a replay takes the one of the inert recording inside it).
        self.serializer = serializer
        self.agent_name = agent_name
        self.run_id = run_id
        self.span = span
        self.trace_id = span.get_span_context().trace_id
        # Where the run's calls find it: the run span, and the run itself.
        self.context = otel_context.set_value(
            threads.RUN_KEY, self, own_span_context(span, Context())
        )
        self.replay = replay
        self.closed = False
        self.fork_warned = False  # see _warn_before_fork
        self.nesting_warned = False  # a record() was started inside this recording
        self.adoption_noted = False  # a call without context was recorded into this run
        # seq -> the BoundarySpec of each call started and not yet ended (see exit_run),
        # and those still running when the run ended
        self.open_calls: dict[int, Any] = {}
        self.unfinished: dict[int, Any] = {}
        self.output_json: str | None = None
        self.has_output = False
        # id(exception) -> (exception, seq of the innermost call it was raised through)
        self._failures: dict[int, tuple[BaseException, int]] = {}
        self._lock = threading.Lock()
        self.next_seq = itertools.count(1).__next__
        # One redactor for the whole run; every redaction of the run, for its span.
        self.redactor = redactor if redactor is not None else current_redactor()
        self.known_secrets = known_secrets if known_secrets is not None else KnownSecrets()
        self.redactions: list[dict[str, Any]] = []

    def note_redactions(self, seq: int, records: list[dict[str, Any]]) -> None:
        """Remember where values of call ``seq`` (0: the run itself) were redacted."""
        if records:
            with self._lock:
                self.redactions.extend({"seq": seq, **record} for record in records)

    def sorted_redactions(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self.redactions, key=lambda r: (r["seq"], r["field"], r["path"]))

    def parent_context(self, context: Context) -> Context:
        """``context`` (the current one, read once by the caller) when its span is a
        recorded span of this run; else the context of the innermost span of the run
        sftrace started.

        The second case is a call without context, adopted by the one recording, or one
        inside another instrumentation's span that the application's sampler dropped
        (Pydantic AI's through Logfire, say): such a span is in no bundle, so a span
        parented on it would point at a parent the bundle lacks.
        """
        if context is self.context:  # a call made in the run itself: under the run span
            return context
        current = trace.get_current_span(context)
        if current.get_span_context().trace_id != self.trace_id:
            return self.context
        if current.is_recording():
            return context
        own = context.get(_OWN_SPAN_KEY)
        return trace.set_span_in_context(own, context) if isinstance(own, Span) else self.context

    def note_failure(self, exc: BaseException, seq: int) -> None:
        """Remember the innermost call an exception was raised through (the failing step)."""
        with self._lock:
            self._failures.setdefault(id(exc), (exc, seq))

    def failure_step(self, exc: BaseException) -> int | None:
        with self._lock:
            entry = self._failures.get(id(exc))
        if entry is not None and entry[0] is exc:
            return entry[1]
        return None


# The innermost span sftrace started in the current context (a run's or a call's).
_OWN_SPAN_KEY = otel_context.create_key("sftrace.own_span")


def own_span_context(span: Span, context: Context | None = None) -> Context:
    """``context`` (default: the current one) with ``span``, one of sftrace's own, as the
    current span: the span :meth:`ActiveRun.parent_context` falls back to."""
    return otel_context.set_value(_OWN_SPAN_KEY, span, trace.set_span_in_context(span, context))


_active: list[ActiveRun] = []
_active_lock = threading.Lock()
# (agent, the kinds and names of the calls) of the runs that ended with calls running,
# already said at WARNING level (see exit_run)
_unfinished_said: set[tuple[str, frozenset[tuple[str, str]]]] = set()


def _warn_before_fork() -> None:
    """In a process about to fork while runs are active (``multiprocessing`` with the
    fork start method): say once per run that the child's calls are not the run's."""
    for run in list(_active):
        if not run.fork_warned:
            run.fork_warned = True
            logger.warning(
                "sftrace: the process forked while run %s was %s (multiprocessing with "
                "the 'fork' start method?): calls made in the child process are not "
                "recorded%s. Run that work in threads, or record in the child process",
                run.run_id,
                "replaying" if run.replay is not None else "recording",
                " and run for real, not answered from the recording"
                if run.replay is not None
                else ", and a replay runs them for real",
            )


def _forget_runs_in_child() -> None:
    """In a forked child: the parent's runs are not this process's. Its calls run as
    outside any run (a child writing into the parent's journal corrupted its bundle)."""
    global _active_lock
    _active_lock = threading.Lock()  # another thread may have held it at the fork
    for run in _active:
        run.closed = True  # the copy the child's contexts still hold
    _active.clear()


os.register_at_fork(before=_warn_before_fork, after_in_child=_forget_runs_in_child)


def current_run() -> ActiveRun | None:
    """The run the caller belongs to, or None outside any recording and replay."""
    if not _active:  # no run in the process: the common case in production
        return None
    # (the context read as a dict, and no typing.cast: both Python calls, on every call)
    run = otel_context.get_current().get(threads.RUN_KEY)
    if isinstance(run, ActiveRun):  # (nothing else is ever stored under RUN_KEY)
        return None if run.closed else run
    return _adopt()


def context_run() -> ActiveRun | None:
    """The open run of the caller's context only (no adoption of context-less calls)."""
    run = otel_context.get_value(threads.RUN_KEY)
    if isinstance(run, ActiveRun) and not run.closed:
        return run
    return None


def _adopt() -> ActiveRun | None:
    """The run of a call that carries none: the one recording, if it is the only run and
    the call is made in a bare thread (see :func:`_bare_thread`)."""
    with _active_lock:
        recordings = [run for run in _active if run.replay is None]
        replays = len(_active) - len(recordings)
    if len(recordings) == 1 and replays == 0 and _bare_thread():
        run = recordings[0]
        if not run.adoption_noted:
            run.adoption_noted = True
            logger.info(
                "sftrace: a call made in a thread that carries no run's context (a thread "
                "started before the run, fed through a queue?) was recorded into run %s, "
                "the only run recording",
                run.run_id,
            )
        return run
    if recordings or replays:
        threads.warn_unattributed(len(recordings), replays)
    return None


def _bare_thread() -> bool:
    """Whether the caller runs in a thread with a context of its own making: no event
    loop running in it, and no context variable set (a thread started with
    ``threading.Thread`` before the run). An asyncio task, or work run in a context copied
    from one (a web server's request handlers, their background tasks, a sync endpoint
    in a worker thread), belongs to whoever started it, not to the one run recording at
    that moment: adopting such calls put one request's calls into another's bundle."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return len(contextvars.copy_context()) == 0
    return False


def enter_run(run: ActiveRun) -> object:
    """Make ``run`` active in the process; the caller attaches ``run.context``.

    Returns the token :func:`exit_run` takes.
    """
    threads.install()
    with _active_lock:
        _active.append(run)
    return run


def exit_run(run: ActiveRun, token: object = None) -> None:
    """Close ``run``: from now on its context holds no run (its calls run for real).

    Calls of the run still running then (work handed to a thread pool or a task that the
    run did not wait for) end after the run and its bundle: say so, naming them."""
    run.closed = True
    with _active_lock:
        if run in _active:
            _active.remove(run)
    still_open = run.open_calls.copy()  # one step: other threads may end calls meanwhile
    run.unfinished = still_open
    if still_open:
        shown = ", ".join(
            f"{spec.kind} {spec.name} (call {seq})" for seq, spec in sorted(still_open.items())[:5]
        )
        more = f" and {len(still_open) - 5} more" if len(still_open) > 5 else ""
        # Said once per agent and calls left running: a server leaving the same work
        # running on every request would say it on every request (then: at INFO).
        shape = (run.agent_name, frozenset((spec.kind, spec.name) for spec in still_open.values()))
        with _active_lock:
            repeated = shape in _unfinished_said
            if not repeated and len(_unfinished_said) < 1024:
                _unfinished_said.add(shape)
        logger.log(
            logging.INFO if repeated else logging.WARNING,
            "sftrace: run %s ended while %d of its calls were still running: %s%s. They "
            "end after the run and are not in its bundle, so a replay may reach them or "
            "not. Wait for work the run hands to threads or tasks before leaving it "
            "(future.result(), executor.shutdown(wait=True), awaiting the task)",
            run.run_id,
            len(still_open),
            shown,
            more,
        )


def _redact_bytes(data: bytes) -> bytes:
    """Bytes holding text are redacted before they are base64-encoded (where no rule
    could see the secret any more), by the current run's rules and known secrets."""
    run = current_run()
    redactor = run.redactor if run is not None else current_redactor()
    redacted, found = redactor.redact_bytes(data, known=run.known_secrets if run else None)
    if found and run is not None:
        run.note_redactions(0, [redaction.record("bytes") for redaction in found])
    return redacted


register_bytes_filter(_redact_bytes)


def exception_type_name(exc: BaseException) -> tuple[str, bool]:
    """``("ValueError", True)`` for builtins, ``("pkg.mod.Error", False)`` otherwise.

    A replayed failure that could not be rebuilt (``RecordedDependencyError``) is named
    by the type it stands for, so the replayed run fails with the recorded failure.
    """
    if isinstance(exc, RecordedDependencyError):
        return exc.type_name, "." not in exc.type_name
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__, True
    return qualified_name(cls), False


def qualified_name(cls: type) -> str:
    """How a bundle names a class: ``pkg.mod.Outer.Name``, a class of the program's
    ``__main__`` under the name its module can be imported by (:func:`main_module_name`).
    :func:`imported_object` finds it again."""
    module = cls.__module__
    if module == "__main__":
        module = main_module_name()
    return f"{module}.{cls.__qualname__}"


# The longest qualified class name, and the most dotted parts, looked up.
_MAX_QUALIFIED = 1024
_MAX_PARTS = 64


def imported_object(qualified: str) -> Any:
    """What ``pkg.mod.Outer.Name`` (as :func:`qualified_name` wrote it) names, looked up
    in ``sys.modules`` only, longest module name first; None when no imported module
    holds it. Nothing is imported, and only what the module and classes already hold
    (their ``__dict__``) is read: a module-level ``__getattr__`` (a lazily importing
    package) is never triggered."""
    parts = qualified.split(".")
    if len(qualified) > _MAX_QUALIFIED or len(parts) > _MAX_PARTS:
        return None  # no real class is named so (a crafted bundle: bounded work)
    main_name = main_module_name()
    for split in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:split])
        module = sys.modules.get(name)
        if module is None and name == main_name:  # recorded and replayed by one file
            module = sys.modules.get("__main__")
        if module is None:
            continue
        target: Any = module
        for name in parts[split:]:
            try:
                target = vars(target).get(name)
            except TypeError:  # an object without a __dict__
                return None
            if target is None:
                return None
        return target
    return None


def main_module_name() -> str:
    """The name under which the program's ``__main__`` module can be imported.

    An agent recorded by running its own file (``python agent.py``, ``python -m agent``)
    raises ``__main__.QuotaExceeded``; its replay imports the entrypoint ``agent:run``,
    whose class is ``agent.QuotaExceeded``. Named ``agent.QuotaExceeded`` in the
    recording, the class is found, and the failures compare, either way round.
    ``"__main__"`` when the module has no such name (an interactive session).
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name and name != "__main__":
        return name.removesuffix(".__main__")
    file = getattr(main, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return "__main__"
    path = Path(file).resolve()
    for entry in sys.path:
        try:
            relative = path.relative_to(Path(entry or ".").resolve())
        except (ValueError, OSError):
            continue
        parts = relative.with_suffix("").parts
        if parts and all(part.isidentifier() for part in parts):
            return ".".join(parts)
    return "__main__"


def run_failure(exc: BaseException) -> BaseException:
    """The exception a run failed with, seen through exception groups that hold exactly
    one exception.

    Task groups (asyncio's, anyio's, those an MCP client's transport opens) wrap the
    agent's own exception, as many times as the transport nests them; a replay opens no
    transport, so its run raises the agent's exception bare. Reading both through the
    groups, a recorded run and its replay fail with the same exception.
    """
    depth = 0
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 and depth < 100:
        exc = exc.exceptions[0]
        depth += 1
    return exc


def safe_str(exc: BaseException) -> str:
    """The exception's message (a replayed failure's: the recorded one)."""
    if isinstance(exc, RecordedDependencyError):
        return exc.recorded_message
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__qualname__}: str() failed>"


def record_failure(
    span: Span, exc: BaseException, redactor: Redactor, known: KnownSecrets | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Add the ``exception`` event for ``exc`` to ``span``, message and stack trace redacted.

    Returns the redacted message and where it and the stack trace were redacted. (The
    SDK's ``record_exception`` would store both as they are.)
    """
    message, found = redactor.redact_text(safe_str(exc), known=known)
    records = [redaction.record("error.message") for redaction in found]
    try:
        stacktrace = "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ or __repr__ somewhere in the chain
        stacktrace = f"{type(exc).__qualname__}: {message}"
    stacktrace, found = redactor.redact_text(stacktrace, known=known)
    records.extend(redaction.record("error.stacktrace") for redaction in found)
    span.add_event(
        A.EVENT_EXCEPTION,
        {
            A.EXCEPTION_TYPE: exception_type_name(exc)[0],
            A.EXCEPTION_MESSAGE: message,
            A.EXCEPTION_STACKTRACE: stacktrace,
            A.EXCEPTION_ESCAPED: "True",
        },
    )
    return message, records


def mark_run_end(run: ActiveRun, exc: BaseException | None) -> None:
    """Put the run's status, failure, output and redactions on its span (before it ends)."""
    span = run.span
    if exc is not None:
        exc = run_failure(exc)
        error_type, _ = exception_type_name(exc)
        message, records = record_failure(span, exc, run.redactor, run.known_secrets)
        run.note_redactions(0, records)
        attributes: dict[str, Any] = {
            A.STATUS: STATUS_FAILED,
            A.ERROR_TYPE: error_type,
            A.ERROR_MESSAGE: message,
        }
        step = run.failure_step(exc)
        if step is not None:
            attributes[A.ERROR_STEP] = step
        span.set_attributes(attributes)
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"))
    else:
        span.set_attribute(A.STATUS, STATUS_COMPLETED)
    if run.unfinished:
        unfinished = [
            {"seq": seq, "kind": spec.kind, "name": spec.name}
            for seq, spec in sorted(run.unfinished.items())
        ]
        span.set_attribute(A.UNFINISHED, canonical(unfinished))
    if run.has_output and run.output_json is not None:
        span.set_attribute(A.RUN_OUTPUT, run.output_json)
    redactions = run.sorted_redactions()
    if redactions:
        span.set_attribute(A.REDACTIONS, canonical(redactions))
