"""``record()``: record one agent run into a ``.sftrace`` bundle."""

from __future__ import annotations

import asyncio
import os
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
from sftrace._internal import internal_error, log_once
from sftrace._model import attributes as A
from sftrace._model.otlp_json import trace_id_hex
from sftrace._model.serialize import Serializer, dumps
from sftrace._record.config import State, get_state
from sftrace._record.llm import ManualLLMCall
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
    ) -> None:
        if not isinstance(agent_name, str) or not agent_name.strip():
            raise ConfigError(f"agent_name must be a non-empty string, got {agent_name!r}")
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

    def record_state_change(self, *, key: str, before: Any, after: Any) -> None:
        """Record that a piece of agent state changed (a span event on the run)."""
        run = self._require_run("record_state_change")
        redactor, known = run.redactor, run.known_secrets
        key_text, key_found = redactor.redact_text(str(key), known=known)
        # The key names the value: a sensitive one (``openai_api_key``) redacts it whole.
        before_json, before_found = redactor.redact_json(
            dumps(before, serializer=self._serializer, what="state before"), known=known, key=key
        )
        after_json, after_found = redactor.redact_json(
            dumps(after, serializer=self._serializer, what="state after"), known=known, key=key
        )
        run.note_redactions(
            0,
            [r.record("state.key", key=key_text) for r in key_found]
            + [r.record("state.before", key=key_text) for r in before_found]
            + [r.record("state.after", key=key_text) for r in after_found],
        )
        run.span.add_event(
            A.EVENT_STATE_CHANGE,
            {A.EVENT_KEY: key_text, A.EVENT_BEFORE: before_json, A.EVENT_AFTER: after_json},
        )

    def llm_call(self, *, model: str, input: Any, provider: str = "unknown") -> ManualLLMCall:
        """A manual LLM call: ``with session.llm_call(...) as handle: handle.set_output(r)``."""
        return ManualLLMCall(
            self._require_run("llm_call"), provider=provider, model=model, input=input
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
            await asyncio.to_thread(self._register)  # creating the journal is disk I/O
        self._activate()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._deactivate(exc):
            await asyncio.to_thread(self._end_span)  # finishing the bundle is disk I/O
            self._collect(exc)

    # -- internals ---------------------------------------------------------------------
    def _begin(self) -> Span | None:
        """Start the run span; return None when inert (inside a replay)."""
        if self._run is not None:
            raise ConfigError("a RecordingSession can be entered only once; call record() again")
        outer = context_run()
        if outer is not None and outer.replay is not None:
            self._inert = True
            self._run = outer
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
        self._run = start_run(
            state.tracer,
            agent_name=self.agent_name,
            run_id=run_id,
            attributes=attributes,
            redactor=redactor,
            known_secrets=known,
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
            internal_error("creating a bundle journal", exc)

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
            # Never replace the agent's own exception with ours.
            log_once("writing the bundle", error)
        else:
            internal_error("writing the bundle", error)


def record(
    agent_name: str,
    *,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    serializer: Serializer | None = None,
    run_input: Any = None,
    metadata: dict[str, Any] | None = None,
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
        serializer: converts values JSON cannot hold, for the run's input and output.
        run_input: the run's input; ``replay_run`` calls the entrypoint with it.
        metadata: a JSON object stored with the run.
    """
    return RecordingSession(
        agent_name,
        output=output,
        overwrite=overwrite,
        serializer=serializer,
        run_input=run_input,
        metadata=metadata,
    )
