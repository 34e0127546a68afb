"""``record()``: record one agent run into a ``.sftrace`` bundle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span

from sftrace._bundle.format import BUNDLE_SUFFIX
from sftrace._bundle.manifest import run_identity, utc_iso
from sftrace._bundle.names import new_run_id, safe_file_stem
from sftrace._bundle.writer import check_bundle_target
from sftrace._errors import BundleError, ConfigError
from sftrace._internal import internal_error, log_once, logger
from sftrace._model import attributes as A
from sftrace._model.otlp_json import trace_id_hex
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import Serializer, dumps
from sftrace._record.config import State, get_state
from sftrace._record.llm import ManualLLMCall
from sftrace._record.manual import UNSET, check_agent_version, record_llm_call, record_tool_call
from sftrace._record.redaction import KnownSecrets, current_redactor
from sftrace._record.run import ActiveRun, context_run, enter_run, exit_run, mark_run_end
from sftrace._record.run_span import set_run_output, start_run


class RecordingSession:
    """One recorded run. Use as ``with record(...) as session`` or ``async with``.

    Inside an active replay the session is inert: the block runs, nothing is written,
    and ``set_output`` reports to the replay.
    """

    def __init__(
        self,
        agent_name: str,
        *,
        output: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
        serializer: Serializer | None = None,
        run_input: Any = None,
        metadata: dict[str, Any] | None = None,
        agent_version: str | None = None,
    ) -> None:
        if not isinstance(agent_name, str) or not agent_name.strip():
            raise ConfigError(f"agent_name must be a non-empty string, got {agent_name!r}")
        self.agent_version = check_agent_version(agent_version)
        if metadata is not None and not isinstance(metadata, dict):
            raise ConfigError(f"metadata must be a dict, got {type(metadata).__qualname__}")
        self.agent_name = agent_name
        self._output = Path(output) if output is not None else None
        self._overwrite = overwrite
        self._serializer = serializer
        self._run_input_json = (
            dumps(run_input, serializer=serializer, what="run_input")
            if run_input is not None
            else None
        )
        self._metadata_json = dumps(metadata, what="metadata") if metadata else None
        self._run: ActiveRun | None = None
        self._inert = False
        self._tokens: tuple[Any, Any] | None = None
        self._path: Path | None = None
        self._planned_path: Path | None = None
        self._run_id: str | None = None
        self._state: State | None = None
        self._registered = False

    # -- public properties -------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        """The bundle's path (where it will be written while the run goes on)."""
        return self._path or self._planned_path

    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def trace_id(self) -> str | None:
        """The run's OpenTelemetry trace id, as 32 hex digits."""
        return trace_id_hex(self._run.trace_id) if self._run is not None else None

    @property
    def inert(self) -> bool:
        """True inside an active replay: nothing is recorded by this session."""
        return self._inert

    # -- what the agent reports ---------------------------------------------------------
    def set_output(self, value: Any) -> None:
        """Record the run's final output (what a replay is compared against)."""
        set_run_output(self._require_run("set_output"), value, self._serializer)

    def record_state_change(self, *, key: str, before: Any = UNSET, after: Any = UNSET) -> None:
        """Record that a piece of agent state changed (a span event on the run).

        ``before`` and ``after`` are optional: one left out is not recorded (``None`` is
        recorded as JSON null).
        """
        run = self._require_run("record_state_change")
        redactor, known = run.redactor, run.known_secrets
        key_text, key_found = redactor.redact_text(str(key), known=known)
        attributes = {A.EVENT_KEY: key_text}
        records = [r.record("state.key", key=key_text) for r in key_found]
        for value, field, attribute in (
            (before, "before", A.EVENT_BEFORE),
            (after, "after", A.EVENT_AFTER),
        ):
            if value is UNSET:
                continue
            # The key names the value: a sensitive one (``openai_api_key``) redacts it whole.
            value_json, found = redactor.redact_json(
                dumps(value, serializer=self._serializer, what=f"state {field}"),
                known=known,
                key=key,
            )
            attributes[attribute] = value_json
            records += [r.record(f"state.{field}", key=key_text) for r in found]
        run.note_redactions(0, records)
        run.span.add_event(A.EVENT_STATE_CHANGE, attributes)

    def llm_call(
        self,
        *,
        model: str,
        input: Any,
        provider: str = "unknown",
        replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ) -> ManualLLMCall:
        """A manual LLM call: ``with session.llm_call(...) as handle: handle.set_output(r)``.

        ``replay_policy`` as in ``llm_request``.
        """
        return ManualLLMCall(
            self._require_run("llm_call"),
            provider=provider,
            model=model,
            input=input,
            replay_policy=replay_policy,
        )

    def record_tool_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        result: Any = UNSET,
        error: BaseException | None = None,
        duration_s: float | None = None,
    ) -> None:
        """Record a tool call made by code that cannot be decorated.

        The call is recorded as ``@trace_tool(name=name)`` would record it (so a later
        decorated tool of that name is answered from it on replay): ``arguments`` by
        parameter name, then ``result`` or the exception instance ``error``.
        ``duration_s``: how long the call took (it ended now); default 0.
        """
        record_tool_call(
            self._require_run("record_tool_call"),
            name,
            arguments,
            result=result,
            error=error,
            duration_s=duration_s,
        )

    def record_llm_call(
        self,
        *,
        provider: str,
        model: str,
        input: Any,
        output: Any = UNSET,
        error: BaseException | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
        duration_s: float | None = None,
    ) -> None:
        """Record an LLM call made by code that cannot be wrapped, as ``llm_request``
        records one: the request ``input``, then the response ``output`` or the exception
        instance ``error``. ``usage``: token counts (``input_tokens``/``prompt_tokens``,
        ``output_tokens``/``completion_tokens``, ``total_tokens``).
        """
        record_llm_call(
            self._require_run("record_llm_call"),
            provider=provider,
            model=model,
            input=input,
            output=output,
            error=error,
            usage=usage,
            cost_usd=cost_usd,
            duration_s=duration_s,
        )

    def _require_run(self, what: str) -> ActiveRun:
        if self._run is None:
            raise ConfigError(
                f"session.{what}() called outside the recording; call it inside the "
                f"`with record(...)` block"
            )
        return self._run

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> RecordingSession:
        span = self._begin()
        if span is not None:
            self._register()
        self._activate()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._deactivate(exc):
            self._end_span()
            self._collect(exc)

    async def __aenter__(self) -> RecordingSession:
        span = self._begin()
        if span is not None:
            # Creating the journal is disk I/O, in a thread. A cancellation meanwhile (a
            # client gone, a server shutting down) must not leave a locked journal of a
            # run that never started: it is removed once created.
            registered = _in_thread(self._register)
            try:
                await asyncio.shield(registered)
            except asyncio.CancelledError:
                registered.add_done_callback(lambda _: self._discard())
                raise
        self._activate()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._deactivate(exc):
            # Finishing the bundle is disk I/O, in a thread that finishes it whatever
            # happens here: a cancellation while it runs (asyncio, anyio cancel scopes
            # cancelling again at every await) left runs unfinished, their journals locked.
            ended = _in_thread(self._end_span)
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError:
                ended.add_done_callback(lambda _: self._collect_quietly(exc))
                raise
            self._collect(exc)

    # -- internals ---------------------------------------------------------------------
    def _begin(self) -> Span | None:
        """Start the run span; return None when inert (inside a replay)."""
        if self._run is not None:
            raise ConfigError("a RecordingSession can be entered only once; call record() again")
        outer = context_run()
        if outer is not None and outer.replay is None and not outer.nesting_warned:
            outer.nesting_warned = True
            logger.warning(
                "sftrace: record(%r) started inside the recording of run %s: the calls of its "
                "block go to its own bundle, not to run %s's. A replay of run %s answers "
                "every call of its block (a record() inside a replay writes nothing), so it "
                "will reach those calls and diverge. Record the outer run only, or keep the "
                "two runs apart (not nested)",
                self.agent_name,
                outer.run_id,
                outer.run_id,
                outer.run_id,
            )
        if outer is not None and outer.replay is not None:
            self._inert = True
            self._run = outer
            if outer.serializer is None:
                # The agent's values are the same in the replay: so is their serializer.
                outer.serializer = self._serializer
            return None
        state = self._state = get_state()
        self._run_id = run_id = new_run_id()
        self._planned_path = self._choose_path(state, run_id)
        redactor, known = current_redactor(), KnownSecrets()
        redactions: list[dict[str, Any]] = []
        run_input_json = metadata_json = None
        if self._run_input_json is not None:
            run_input_json, found = redactor.redact_json(self._run_input_json, known=known)
            redactions.extend(redaction.record("run.input") for redaction in found)
        if self._metadata_json is not None:
            metadata_json, found = redactor.redact_json(self._metadata_json, known=known)
            redactions.extend(redaction.record("run.metadata") for redaction in found)
        attributes: dict[str, Any] = {}
        if run_input_json is not None:
            attributes[A.RUN_INPUT] = run_input_json
        if metadata_json is not None:
            attributes[A.METADATA] = metadata_json
        if self.agent_version is not None:
            attributes[A.AGENT_VERSION] = self.agent_version
        self._run = start_run(
            state.tracer,
            agent_name=self.agent_name,
            run_id=run_id,
            attributes=attributes,
            redactor=redactor,
            known_secrets=known,
            serializer=self._serializer,
        )
        self._run.note_redactions(0, redactions)
        return self._run.span

    def _choose_path(self, state: State, run_id: str) -> Path:
        if self._output is not None:
            path = self._output
        else:
            path = state.resolved_bundle_dir() / (
                f"{safe_file_stem(self.agent_name)}-{run_id}{BUNDLE_SUFFIX}"
            )
        check_bundle_target(path, overwrite=self._overwrite, purpose="write the bundle")
        return path

    def _register(self) -> None:
        run, state, path = self._run, self._state, self._planned_path
        assert run is not None
        assert state is not None
        assert path is not None
        if not run.span.is_recording():
            log_once(
                "recording a run",
                RuntimeError(
                    "the run span is not recorded (OTEL_SDK_DISABLED, or a sampler dropped "
                    "it); no bundle will be written"
                ),
            )
            return
        try:
            state.bundle_exporter.begin_run(
                run.trace_id,
                path=path,
                overwrite=self._overwrite,
                header={
                    "run_id": run.run_id,
                    "agent_name": self.agent_name,
                    "created_at": utc_iso(),
                    # What `sftrace recover` needs if the process dies before the run ends.
                    **run_identity(run.span),
                    "redactions": run.sorted_redactions(),
                },
            )
            self._registered = True
        except OSError as exc:
            # One cause, one log line (the error names the path), however many runs.
            error = BundleError(
                f"cannot write the bundle {str(path)!r} ({type(exc).__name__}: "
                f"{exc.strerror or exc}), so this run is not recorded; give "
                f"record(output=...), configure(bundle_dir=...) or $SFTRACE_DIR a "
                f"writable directory",
                path=str(path),
            )
            error.__cause__ = exc
            internal_error("creating a bundle journal", error)

    def _activate(self) -> None:
        run = self._run
        assert run is not None
        if self._inert:
            return
        self._tokens = (enter_run(run), otel_context.attach(run.context))

    def _deactivate(self, exc: BaseException | None) -> bool:
        """Close the run in the caller's context; return False when inert."""
        run = self._run
        if self._inert or run is None or self._tokens is None:
            return False
        run_token, context_token = self._tokens
        try:
            otel_context.detach(context_token)
        finally:
            exit_run(run, run_token)
        mark_run_end(run, exc)
        return True

    def _end_span(self) -> None:
        assert self._run is not None
        self._run.span.end()

    def _discard(self) -> None:
        """The block never ran (cancelled while its journal was created): no bundle."""
        run, state = self._run, self._state
        if run is None or state is None:
            return
        if self._registered:
            state.bundle_exporter.discard_run(run.trace_id)
        run.span.end()

    def _collect_quietly(self, exc: BaseException | None) -> None:
        """:meth:`_collect` where nothing may raise (a callback of the event loop)."""
        try:
            self._collect(exc)
        except Exception as error:  # strict mode's BundleError: logged, not raised
            log_once("writing the bundle", error)

    def _collect(self, exc: BaseException | None) -> None:
        """Find out whether the bundle was written; report a failure to write it."""
        run, state = self._run, self._state
        if run is None or state is None or not self._registered:
            return
        outcome = state.bundle_exporter.pop_outcome(run.trace_id)
        error: BaseException | None
        if outcome is None:
            state.bundle_exporter.abandon_run(run.trace_id)
            error = BundleError(
                f"the bundle {self._planned_path} was not finished: the run span never reached "
                f"sftrace's exporter (was the tracer provider shut down?); its journal was kept "
                f"for `sftrace recover`"
            )
        else:
            error = outcome.error
            self._path = outcome.path
        if error is None:
            return
        if exc is not None:
            # Never replace the agent's own exception with ours; tell its reader.
            log_once("writing the bundle", error)
            exc.add_note(f"sftrace: the bundle of this run could not be saved: {error}")
        else:
            internal_error("writing the bundle", error)


# The threads async runs hand their disk work to (creating a journal, finishing a
# bundle). Kept, not started per run: Thread.start() makes the event loop wait until the
# new thread runs, twice a run, which on a busy server cost about as much as the rest of
# the run. Several, so that one run's fsyncs do not queue every other run behind them.
_DISK_THREADS = 4
_disk_pool: ThreadPoolExecutor | None = None
_disk_pool_lock = threading.Lock()


def _disk_workers() -> ThreadPoolExecutor:
    global _disk_pool
    pool = _disk_pool
    if pool is None:
        with _disk_pool_lock:
            if _disk_pool is None:
                _disk_pool = ThreadPoolExecutor(_DISK_THREADS, thread_name_prefix="sftrace-bundle")
            pool = _disk_pool
    return pool


def _forget_disk_workers() -> None:
    """In a forked child: the parent's threads are not there (a job would wait forever)."""
    global _disk_pool, _disk_pool_lock
    _disk_pool, _disk_pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_disk_workers)


def _in_thread(work: Callable[[], None]) -> asyncio.Future[None]:
    """Run ``work`` in one of sftrace's disk threads; the future ends with it. Unlike
    ``asyncio.to_thread``, cancelling the awaiting task never stops ``work`` from running
    (a job queued in the loop's executor can be dropped: its future is cancelled with the
    task's; this one is never cancelled), and the threads are not daemons: the process
    finishes the jobs queued before it exits."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            work()
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, error)

    _disk_workers().submit(run)
    return done


def record(
    agent_name: str,
    *,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    serializer: Serializer | None = None,
    run_input: Any = None,
    metadata: dict[str, Any] | None = None,
    agent_version: str | None = None,
) -> RecordingSession:
    """Record one agent run into a ``.sftrace`` bundle.

    ::

        with record("booking-agent", output="failure.sftrace") as session:
            result = agent.run("Book the cheapest flight to Lisbon")
            session.set_output(result)

    The bundle is written when the block exits, also when it raises: the run is then
    marked failed with the exception's type, message and step, and the exception is
    re-raised unchanged. Use ``async with`` in async code (disk I/O then runs in a thread).

    Args:
        agent_name: the agent's name (``gen_ai.agent.name``), also in the bundle name.
        output: the bundle path. Default: ``<bundle_dir>/<agent>-<run_id>.sftrace`` where
            ``bundle_dir`` is ``configure(bundle_dir=...)``, else ``$SFTRACE_DIR``, else
            ``.sftrace/traces``.
        overwrite: replace an existing bundle at ``output`` (refused otherwise).
        serializer: converts values JSON cannot hold: the run's input and output, state
            changes, and the values of tool and LLM calls whose own ``serializer`` is unset.
        run_input: the run's input; ``replay_run`` calls the entrypoint with it.
        metadata: a JSON object stored with the run.
        agent_version: the agent's version (free text, e.g. ``"1.4.2"`` or a commit),
            stored in the manifest and on the run span; a replay may override it.
    """
    return RecordingSession(
        agent_name,
        output=output,
        overwrite=overwrite,
        serializer=serializer,
        run_input=run_input,
        metadata=metadata,
        agent_version=agent_version,
    )
