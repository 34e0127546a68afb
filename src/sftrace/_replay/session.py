"""``replay()``: re-run an agent with its instrumented calls answered from a bundle."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Link, SpanContext, TraceFlags

from sftrace._bundle.load import load_bundle
from sftrace._bundle.names import new_run_id
from sftrace._bundle.reader import Bundle
from sftrace._bundle.writer import check_bundle_target
from sftrace._errors import (
    ConfigError,
    IncompleteReplayError,
    RecordingEndedError,
    ReplayError,
    TraceSerializationError,
)
from sftrace._internal import internal_error, log_once, warn_once
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._model.serialize import dumps, loads
from sftrace._model.text import pluralize, shorten, were
from sftrace._record.config import State, get_state
from sftrace._record.run import ActiveRun, enter_run, exit_run, mark_run_end
from sftrace._record.run_span import set_run_output, start_run
from sftrace._replay import processor as _replay_processor
from sftrace._replay.controller import MatchedCall, ReplayController
from sftrace._replay.options import ManualHandler, ReplayOptions

# Makes the controller of a replay (a fork's makes a ForkController), called like
# ReplayController(calls, options, recorded_run_id=..., span_parents=...).
ControllerFactory = Callable[..., ReplayController]


def as_bundle(bundle_or_path: Bundle | str | os.PathLike[str]) -> Bundle:
    if isinstance(bundle_or_path, Bundle):
        return bundle_or_path
    return load_bundle(bundle_or_path)


def unfinished_calls(bundle: Bundle) -> dict[tuple[str, str], int]:
    """(kind, name) -> seq of the recorded calls still running when the recorded run
    ended (``sftrace.unfinished``): the bundle lacks them."""
    found: dict[tuple[str, str], int] = {}
    calls = bundle.run_json(A.UNFINISHED)
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict) and isinstance(call.get("seq"), int):
            found.setdefault((str(call.get("kind")), str(call.get("name"))), call["seq"])
    return found


def inside_unfinished(bundle: Bundle) -> frozenset[int]:
    """The seqs of recorded calls made inside a span the recorded process died in
    (``sftrace.inside_unfinished``, on the run span of a recovered bundle)."""
    seqs = bundle.run_json(A.INSIDE_UNFINISHED)
    if not isinstance(seqs, list):
        return frozenset()
    return frozenset(seq for seq in seqs if isinstance(seq, int) and not isinstance(seq, bool))


def warn_unmatched_ignores(match_ignore: Mapping[str, Any], calls: Sequence[Call]) -> None:
    """Say which ``match_ignore`` keys name no call of the recording: they can never apply
    (a typo, or a model named without its provider), and the replay would be as strict
    as without them with nothing said."""
    tools = {call.name for call in calls if call.kind == A.KIND_TOOL}
    models = {f"{call.provider}/{call.name}" for call in calls if call.kind == A.KIND_LLM}
    for key in match_ignore:
        if key in ("*", "llm") or key in tools or key in models:
            continue
        bare = sorted(model for model in models if model.partition("/")[2] == key)
        hint = (
            f"an LLM is named as 'provider/model': {bare[0]!r}"
            if bare
            else f"the recording's tools are {sorted(tools)}, its models {sorted(models)}, "
            f"and '*' or 'llm' name all calls or all LLM calls"
        )
        warn_once(
            f"match_ignore key {key!r}",
            f"match_ignore names {key!r}, which no call of the recording has, so it ignores "
            f"nothing; {hint}",
        )


class ReplaySession:
    """One replay of a recorded run. Use as ``with replay(...) as session`` or ``async with``.

    After the block: ``matched`` (the recorded calls reached and what each did),
    ``unused`` (recorded calls never reached), ``divergence`` (the first mismatch, kept
    even if the agent caught it), ``output`` (what the replayed run passed to
    ``set_output``) and ``spans`` (the replay's own finished spans).
    """

    def __init__(
        self,
        bundle_or_path: Bundle | str | os.PathLike[str],
        options: ReplayOptions | None = None,
        *,
        controller: ControllerFactory = ReplayController,
    ) -> None:
        self.options = options = options if options is not None else ReplayOptions()
        self.bundle = as_bundle(bundle_or_path)
        self.controller = controller(
            self.bundle.calls,
            options,
            recorded_run_id=self.bundle.run_id,
            span_parents=self.bundle.span_parents
            or {span["spanId"]: span.get("parentSpanId") or None for span in self.bundle.spans},
        )
        self.controller.unfinished = unfinished_calls(self.bundle)
        if options.match_ignore:
            warn_unmatched_ignores(options.match_ignore, self.bundle.calls)
        if self.bundle.status == "interrupted":
            self.controller.end_at_interruption(inside_unfinished(self.bundle))
        self._save = options.save
        self._overwrite = options.overwrite
        self._run: ActiveRun | None = None
        self._tokens: tuple[Any, Any] | None = None
        self._state: State | None = None
        self.spans: list[ReadableSpan] = []
        self.saved_path: Path | None = None
        # save= was given but the replay diverged, so nothing was saved
        self.save_refused = False
        self.error: BaseException | None = None
        self._failure: BaseException | None = None  # the entrypoint's, see end_with

    # -- results -------------------------------------------------------------------------
    @property
    def matched(self) -> list[MatchedCall]:
        return self.controller.matched

    @property
    def unused(self) -> list[Call]:
        return self.controller.unused

    @property
    def covered(self) -> list[Call]:
        """Recorded calls made inside a call the replay answered without running its body:
        not reached, and not expected to be (they are not ``unused``)."""
        with self.controller.lock:
            return sorted(self.controller.covered, key=lambda call: call.seq)

    @property
    def divergence(self) -> ReplayError | None:
        return self.controller.divergence

    @property
    def recording_end(self) -> RecordingEndedError | None:
        """Where the agent went past the end of an ``interrupted`` recording (None when
        it did not): the replay stopped it there."""
        return self.controller.recording_end

    @property
    def has_output(self) -> bool:
        return self._run is not None and self._run.has_output

    @property
    def output(self) -> Any:
        """What the replayed run passed to ``session.set_output`` (None if nothing)."""
        run = self._run
        if run is None or run.output_json is None:
            return None
        return loads(run.output_json)

    @property
    def run_id(self) -> str | None:
        return self._run.run_id if self._run is not None else None

    def verify_complete(self) -> None:
        """Raise ``IncompleteReplayError`` if recorded calls were never reached."""
        unused = self.unused
        if not unused:
            return
        listed = "\n".join(
            f"  call {call.seq}: {call.label} {shorten(call.input_json, 120)}"
            for call in unused[:10]
        )
        more = f"\n  ... and {len(unused) - 10} more" if len(unused) > 10 else ""
        raise IncompleteReplayError(
            f"replay incomplete: {len(unused)} of "
            f"{pluralize(len(self.bundle.calls), 'recorded call')} {were(len(unused))} never "
            f"reached:\n{listed}{more}",
            unused=unused,
        )

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ReplaySession:
        self._check_save()
        self._start()
        if self._save is not None:
            self._begin_save()
        self._activate()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._deactivate(exc)
        self._end()

    async def __aenter__(self) -> ReplaySession:
        self._check_save()
        self._start()
        if self._save is not None:
            await asyncio.to_thread(self._begin_save)
        self._activate()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._deactivate(exc)
        await asyncio.to_thread(self._end)

    def _start(self) -> None:
        if self._run is not None:
            raise ConfigError("a ReplaySession can be entered only once; call replay() again")
        state = self._state = get_state()
        manifest = self.bundle.manifest
        links = []
        if manifest.root_span_id:
            recorded_context = SpanContext(
                trace_id=int(manifest.trace_id, 16),
                span_id=int(manifest.root_span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            links.append(Link(recorded_context, {A.REPLAY_OF: manifest.run_id}))
        attributes: dict[str, Any] = {
            A.REPLAY_OF: manifest.run_id,
            A.DERIVED_FROM: dumps({"run_id": manifest.run_id, **self.controller.provenance()}),
        }
        for item in self.bundle.run_span.get("attributes", ()):
            if item.get("key") in (A.RUN_INPUT, A.METADATA):
                value = item.get("value", {}).get("stringValue")
                if isinstance(value, str):
                    attributes[item["key"]] = value
        # The replayed run is of the agent version asked for, else of the recorded one.
        version = self.options.agent_version or manifest.agent_version
        if version is not None:
            attributes[A.AGENT_VERSION] = version
        self._run = start_run(
            state.tracer,
            agent_name=manifest.agent_name,
            run_id=new_run_id(),
            attributes=attributes,
            links=links,
            replay=self.controller,
        )
        _replay_processor.register(self._run.trace_id, self.controller)

    def _check_save(self) -> None:
        """Refuse an existing save target before anything starts."""
        path = self._save
        if path is None:
            return
        check_bundle_target(path, overwrite=self._overwrite, purpose="save the replay")

    def _begin_save(self) -> None:
        run, state, path = self._run, self._state, self._save
        assert run is not None
        assert state is not None
        assert path is not None
        state.bundle_exporter.begin_run(
            run.trace_id,
            path=path,
            overwrite=self._overwrite,
            header={"run_id": run.run_id, "agent_name": run.agent_name},
        )

    def _activate(self) -> None:
        run = self._run
        assert run is not None
        self._tokens = (enter_run(run), otel_context.attach(run.context))

    def _deactivate(self, exc: BaseException | None) -> None:
        run, tokens = self._run, self._tokens
        assert run is not None
        assert tokens is not None
        try:
            otel_context.detach(tokens[1])
        finally:
            exit_run(run, tokens[0])
        if exc is None:
            exc = self._failure
        self.error = exc
        mark_run_end(run, exc)

    def _end(self) -> None:
        run, state = self._run, self._state
        assert run is not None
        assert state is not None
        if self._save is not None and self.divergence is not None:
            # A diverged replay saved would be a bundle whose "recorded" failure is the
            # replay's own error, and which every later replay "reproduces": not saved.
            state.bundle_exporter.discard_run(run.trace_id)
            self.save_refused = True
        try:
            run.span.end()
        finally:
            _replay_processor.unregister(run.trace_id)
        self.spans = self.controller.spans
        if self._save is not None and not self.save_refused:
            outcome = state.bundle_exporter.pop_outcome(run.trace_id)
            if outcome is not None and outcome.path is not None:
                self.saved_path = outcome.path
            elif outcome is not None and outcome.error is not None:
                internal_error("saving the replayed run", outcome.error)


def end_with(session: ReplaySession, value: Any, error: BaseException | None) -> None:
    """Give the replayed run what the entrypoint did, before the session ends.

    Its exception becomes the run's failure; when the run set no output, its return
    value becomes the output, as in a recording made with ``set_output(entrypoint(...))``.
    A saved replay then holds the run's status, output and failure.
    """
    run = session._run
    assert run is not None
    session._failure = error
    if error is not None or run.has_output:
        return
    try:
        set_run_output(run, value)
    except TraceSerializationError as exc:
        log_once("recording the replayed run's output", exc)


def replay(
    bundle_or_path: Bundle | str | os.PathLike[str],
    *,
    mode: ReplayMode | str = ReplayMode.FROZEN,
    live_llms: Iterable[str] | None = None,
    allow_live_tools: Iterable[str] | None = None,
    match: MatchMode | str = MatchMode.STRICT,
    manual: ManualHandler | None = None,
    agent_version: str | None = None,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
    on_miss: str = "error",
) -> ReplaySession:
    """Replay a recorded run: every instrumented call is answered from the bundle.

    ::

        with replay("failure.sftrace") as session:
            run_agent()
        session.verify_complete()

    Args:
        bundle_or_path: a ``Bundle`` or the path of a ``.sftrace`` bundle.
        mode: ``"frozen"`` (default): every call answered from the recording, no body
            runs. ``"live"``: calls must still match in order; LLM calls run for real and
            tools run only if named in ``allow_live_tools``. ``"hybrid"``: tools frozen,
            the LLM calls named in ``live_llms`` run for real (their inputs may change).
        live_llms: ``"provider/model"`` names of LLMs to call live in hybrid mode.
        allow_live_tools: tool names allowed to run for real in live mode.
        match: ``"strict"`` (default): the Nth call reached must match the Nth recorded
            call, except that calls the recording shows were concurrent (overlapping
            spans, such as a thread pool's tasks) may be reached in any order.
            ``"unordered"``: each call takes the earliest unused recorded call with
            the same kind, name and input (for agents whose concurrency varies the order).
        manual: answers calls recorded with ``replay_policy="manual"``: called with the
            recorded ``Call``, returns the value to use.
        agent_version: the version of the agent being replayed (the code under test),
            carried by the replayed run; default: the recorded run's version.
        tiers: how a reached call's input may differ from the recorded one, tried in
            order: ``"exact"`` (the same canonical JSON), ``"normalized"`` (equal after
            stripping strings, ``2.0 == 2`` and a ``None``-valued key == a missing key),
            ``"relaxed"`` (equal once the ``match_ignore`` paths are removed). Default
            ``("exact", "normalized")``, plus ``"relaxed"`` when ``match_ignore`` is
            given; ``("exact",)`` turns tolerance off. Each matched call records its tier.
        match_ignore: input paths the relaxed tier ignores, keyed by tool name, by
            ``"llm"`` or ``"provider/model"`` for LLM calls, or ``"*"`` for every call:
            ``{"llm": ["$.messages[0].content"], "*": ["$.request_id"]}``. The path
            ``"$"`` ignores the whole input: calls of that kind and name match in order.
        on_miss: ``"error"`` (default): a call no recorded call matches diverges.
            ``"live"``: it runs for real instead, under live mode's rules (LLM calls, or
            only those in ``live_llms``; tools only if named in ``allow_live_tools``,
            ``"*"`` for all; anything else still diverges) and appears in ``matched``
            with action ``"live"``. In strict order a miss uses up no recorded call;
            matching resumes at the next recorded call that matches, and those skipped
            over become unused.
    """
    options = ReplayOptions.build(
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        match=match,
        manual=manual,
        agent_version=agent_version,
        tiers=tiers,
        match_ignore=match_ignore,
        on_miss=on_miss,
    )
    return ReplaySession(bundle_or_path, options)
