"""``replay_run``: replay a bundle against the agent's own entrypoint, get a ``ReplayResult``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import importlib.machinery
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from opentelemetry.sdk.trace import ReadableSpan

from sftrace._bundle.reader import Bundle
from sftrace._errors import (
    ConfigError,
    RecordedDependencyError,
    RecordingEndedError,
    ReplayError,
)
from sftrace._model import attributes as A
from sftrace._model.calls import Call, call_from_span, inner_calls
from sftrace._model.display import repr_html
from sftrace._model.markers import unmarked
from sftrace._model.normalize import message_key
from sftrace._model.otlp_json import encode_span
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._record.run import exception_type_name, run_failure
from sftrace._replay.controller import MatchedCall, ReplayController
from sftrace._replay.options import ManualHandler, ReplayOptions
from sftrace._replay.session import ControllerFactory, ReplaySession, as_bundle, end_with

Entrypoint = Callable[..., Any]


@dataclass
class ReplayResult:
    """What happened when a recorded run was replayed against an entrypoint.

    ``return_value`` is what the entrypoint returned (None when it raised). ``output``
    is the replayed run's output: the value it passed to ``set_output``, else the
    entrypoint's return value (``None`` included), as JSON, the form a bundle stores
    (the value itself when it cannot be converted). ``has_output`` says whether the
    replayed run called ``set_output`` itself. ``error`` is the entrypoint's exception.
    ``unused`` lists recorded calls the replay never reached; ``covered`` lists those
    recorded inside a call that was answered without running its body (a tool calling a
    tool): not reached and not expected to be, so no verdict counts them as missing.
    ``status`` is ``"interrupted"`` for a recording whose process died (status
    ``interrupted``) when the agent went past its last call after matching every one:
    the replay stopped it there (``recording_end`` says at which call), and reproduced
    all the recording holds.
    """

    status: Literal["completed", "failed", "diverged", "interrupted"]
    return_value: Any
    output: Any
    has_output: bool
    error: BaseException | None
    matched: list[MatchedCall]
    unused: list[Call]
    divergence: ReplayError | None
    reproduced_failure: bool
    spans: list[ReadableSpan]
    bundle: Bundle
    saved_path: Path | None = None
    agent_version: str | None = None
    options: ReplayOptions = field(default_factory=ReplayOptions, repr=False)
    covered: list[Call] = field(default_factory=list)
    # How many calls a strict replay took before earlier recorded calls that the recording
    # shows were made concurrently with them (README, "Matching").
    reordered: int = 0
    # For a fork (``sftrace.fork``): the ``number`` of the matched call at the fork point;
    # None for a replay, or a fork whose run never reached its fork point.
    fork_number: int | None = None
    # A reached call's ``number`` -> the ``seq`` of the replayed call, where they differ
    # (threads may take their seqs in one order and reach the replay in another).
    replayed_seqs: dict[int, int] = field(default_factory=dict, repr=False)
    recording_end: RecordingEndedError | None = None
    _calls: list[Call] | None = field(default=None, repr=False)

    def replayed_seq(self, number: int) -> int:
        """The ``seq`` of the replayed call that reached call ``number`` (MatchedCall's)."""
        return self.replayed_seqs.get(number, number)

    @property
    def calls(self) -> list[Call]:
        """The calls the replayed run made, in the order they were reached."""
        if self._calls is None:
            calls = []
            for span in self.spans:
                attributes = span.attributes or {}
                if attributes.get(A.KIND) in (A.KIND_TOOL, A.KIND_LLM):
                    calls.append(call_from_span(encode_span(span), dict(attributes)))
            calls.sort(key=lambda call: call.seq)
            self._calls = calls
        return self._calls

    @property
    def made_calls(self) -> list[Call]:
        """The calls the replayed run made, as expectations judge them: ``calls`` with the
        ``covered`` ones (made inside a call answered from the recording, so not run
        again) after the call that covers them, as the recording has them. A tool that
        called ``issue_refund`` in the recorded run still did in its replay."""
        if not self.covered:
            return self.calls
        recorded = list(self.bundle.calls)
        inner = inner_calls(recorded, self.bundle.span_parents)
        index_of = {call.seq: index for index, call in enumerate(recorded)}
        covered = {call.seq for call in self.covered}
        answered = {
            self.replayed_seq(m.number): m.recorded.seq for m in self.matched if m.action != "live"
        }
        made: list[Call] = []
        placed: set[int] = set()
        for call in self.calls:
            made.append(call)
            index = index_of.get(answered.get(call.seq, -1))
            pending = list(inner.get(index, ())) if index is not None else []
            inside: list[Call] = []
            while pending:
                nested = recorded[pending.pop()]
                if nested.seq in covered and nested.seq not in placed:
                    placed.add(nested.seq)
                    inside.append(nested)
                    pending.extend(inner.get(index_of[nested.seq], ()))
            made.extend(sorted(inside, key=lambda c: c.seq))
        # covered without a call that answered them (an interrupted recording's last call)
        made.extend(call for call in self.covered if call.seq not in placed)
        return made

    @property
    def failure_message(self) -> str | None:
        """The replayed run's failure message as its run span records it (redacted as a
        recording's is, so it compares with ``bundle.failure.message``); None when the
        replayed run did not fail."""
        return run_failure_message(self.spans)

    def _repr_html_(self) -> str | None:
        """In a notebook, the replay's HTML report (see ``sftrace.render_html``)."""
        return repr_html(self)

    @property
    def match_counts(self) -> dict[str, int]:
        """How many reached calls matched at each tier, ran live, and how many recorded
        calls went unused: ``{"exact", "normalized", "relaxed", "live", "unused"}``."""
        counts = dict.fromkeys(("exact", "normalized", "relaxed", "live"), 0)
        for matched in self.matched:
            if matched.action == "live":
                counts["live"] += 1
            elif matched.tier is not None:
                counts[matched.tier] += 1
        counts["unused"] = len(self.unused)
        return counts

    @property
    def reproduced(self) -> bool:
        """The recorded behaviour came back: the same failure, or the same output.

        When the replayed run set no output, the entrypoint's return value stands in for
        it (see ``output``): recordings usually do ``session.set_output(run_agent(...))``
        around the very entrypoint that the replay calls.
        """
        recorded = self.bundle
        if recorded.status == "failed":
            return self.reproduced_failure
        if recorded.status == "interrupted":
            # every recorded call matched, and the agent went on past them: a run that
            # ends short of where the recorded process died did something else
            return self.status == "interrupted" and not self.unused
        if self.status != "completed":
            return False
        if recorded.has_output:
            try:
                return _canonical(self.output) == _canonical(recorded.output)
            except TypeError:  # a return value that JSON cannot hold
                return False
        return True


def _canonical(value: Any) -> str:
    """``value`` as canonical JSON with its redaction markers unnamed (``unmarked``): a
    replayed output holds the markers the recording's outputs hold, not always of the
    rule that wrote the recorded one."""
    return unmarked(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())


def resolve_entrypoint(
    entrypoint: str | Entrypoint, *, search_path: Iterable[str | os.PathLike[str]] | None = None
) -> Entrypoint:
    """Turn ``"package.module:function"`` (or ``"module:Class.method"``) into a callable.

    ``search_path``: the directories the agent is imported from (a suite's
    ``pythonpath``, an exported test's agent directory). A module of that name imported
    from elsewhere before (another suite's agent of the same name, in one process) is a
    ``ConfigError``: Python would hand back that other agent, and its test would judge it.
    """
    if callable(entrypoint):
        return entrypoint
    if not isinstance(entrypoint, str) or ":" not in entrypoint:
        raise ConfigError(f"entrypoint must be 'module:function' or a callable, got {entrypoint!r}")
    module_name, _, attribute_path = entrypoint.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    importlib.invalidate_caches()  # modules written since start-up (generated tests)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        missing = isinstance(exc, ModuleNotFoundError) and (
            exc.name is None or module_name == exc.name or module_name.startswith(exc.name + ".")
        )
        hint = (
            "check the name and that it is importable from the working directory"
            if missing
            else f"the module itself raised while it was imported (`python -c 'import "
            f"{module_name}'` shows the traceback)"
        )
        raise ConfigError(
            f"cannot import the entrypoint module {module_name!r} of {entrypoint!r}: "
            f"{type(exc).__name__}: {exc}; {hint}"
        ) from exc
    if search_path is not None:
        _check_imported_from(module_name, target, search_path)
    for part in attribute_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(
                f"entrypoint {entrypoint!r}: module {module_name!r} has no attribute "
                f"{attribute_path!r}"
            ) from None
    if not callable(target):
        raise ConfigError(f"entrypoint {entrypoint!r} is not callable ({type(target).__name__})")
    return target  # type: ignore[no-any-return]


def _check_imported_from(
    module_name: str, module: Any, search_path: Iterable[str | os.PathLike[str]]
) -> None:
    """Refuse ``module`` when ``search_path`` holds a module of that name but ``module``
    was imported from somewhere else (an agent installed elsewhere is fine)."""
    location = getattr(module, "__file__", None)
    if not isinstance(location, str):
        return  # a namespace package or a built-in: nothing to tell
    top = module_name.partition(".")[0]
    directories = [str(Path(directory).resolve()) for directory in search_path]
    spec = importlib.machinery.PathFinder.find_spec(top, directories)
    if spec is None or spec.origin is None:
        return  # nothing of that name there: imported from where Python finds it
    top_module = sys.modules.get(top)
    top_file = getattr(top_module, "__file__", None)
    if isinstance(top_file, str) and _same_file(Path(top_file), Path(spec.origin)):
        return
    raise ConfigError(
        f"the entrypoint module {module_name!r} was already imported from "
        f"{str(Path(location).resolve())!r}, not from {spec.origin!r}: two agents whose "
        f"modules share a name cannot be replayed in one process (each gets the one "
        f"imported first); give their modules distinct names, or run them in separate "
        f"processes"
    )


def _same_file(imported: Path, wanted: Path) -> bool:
    """The same file, or two files with the same text (a copy: the same agent)."""
    if imported.resolve() == wanted.resolve():
        return True
    try:
        return imported.read_bytes() == wanted.read_bytes()
    except OSError:
        return False


def ended_by_divergence(error: BaseException | None, divergence: ReplayError | None) -> bool:
    """Whether a replayed run failed because the replay left the recording: its failure
    (seen through single-exception groups) is the divergence, another error the replay
    raised after it (a concurrent call in another thread or task, reaching a recording
    the replay had already left), or an exception raised from one of those."""
    if error is None or divergence is None:
        return False
    seen: set[int] = set()
    current: BaseException | None = run_failure(error)
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current is divergence or (
            isinstance(current, ReplayError) and not isinstance(current, RecordedDependencyError)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def _call_args(bundle: Bundle) -> tuple[Any, ...]:
    return (bundle.run_input,) if bundle.has_run_input else ()


def _run_coroutine(coroutine: Any) -> Any:
    """Run a coroutine to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block: the agent's errors get no __context__ here
        return asyncio.run(coroutine)
    # A loop is running in this thread: run ours in a worker thread with the same context.
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, coroutine).result()


def run_span_attributes(spans: Iterable[ReadableSpan]) -> Mapping[str, Any]:
    """The attributes of a replay's run span (empty when it has none)."""
    for span in spans:
        attributes = span.attributes or {}
        if attributes.get(A.KIND) == A.KIND_RUN:
            return attributes
    return {}


def run_failure_message(spans: Iterable[ReadableSpan]) -> str | None:
    """The failure message on a replay's run span, None when the run did not fail."""
    message = run_span_attributes(spans).get(A.ERROR_MESSAGE)
    return message if isinstance(message, str) else None


def _cancelled_for_real() -> bool:
    """Whether the task awaiting the replay is being cancelled (``task.cancel()``, a
    timeout around ``areplay_run``): that cancellation propagates. Otherwise a
    ``CancelledError`` the entrypoint ended with is the agent's own (a recorded
    cancellation it let through), its result's ``error``."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _result(
    session: ReplaySession, value: Any, error: BaseException | None, has_output: bool
) -> ReplayResult:
    recorded = session.bundle
    status: Literal["completed", "failed", "diverged", "interrupted"]
    if session.divergence is not None:
        status = "diverged"
    elif session.recording_end is not None:
        status = "interrupted"
    elif error is not None:
        status = "failed"
    else:
        status = "completed"
    reproduced_failure = False
    failure = recorded.failure
    if (
        recorded.status == "failed"
        and error is not None
        and failure is not None
        and session.divergence is None  # a replay that left the recording reproduced nothing
    ):
        if failure.type == exception_type_name(run_failure(error))[0]:
            message = run_failure_message(session.spans)
            reproduced_failure = message is None or message_key(message) == message_key(
                failure.message or ""
            )
        else:
            # A bundle recorded before run_failure named an exception group itself (its
            # message is the group's, which the replay's run span does not record).
            reproduced_failure = failure.type == exception_type_name(error)[0]
    return ReplayResult(
        status=status,
        # nothing was returned when the entrypoint raised (an awaited one left its coroutine)
        return_value=None if error is not None else value,
        # set_output's value, else the return value (as JSON, when it converts)
        output=session.output if session.has_output or error is not None else value,
        has_output=has_output,
        error=error,
        matched=session.matched,
        unused=session.unused,
        divergence=session.divergence,
        reproduced_failure=reproduced_failure,
        spans=list(session.spans),
        bundle=recorded,
        saved_path=session.saved_path,
        agent_version=session.options.agent_version or recorded.manifest.agent_version,
        options=session.options,
        covered=session.covered,
        reordered=session.controller.reordered,
        replayed_seqs=session.controller.replayed_seqs,
        recording_end=session.recording_end,
    )


def replay_run(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    mode: ReplayMode | str = ReplayMode.FROZEN,
    live_llms: Iterable[str] | None = None,
    allow_live_tools: Iterable[str] | None = None,
    match: MatchMode | str = MatchMode.STRICT,
    manual: ManualHandler | None = None,
    save: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    agent_version: str | None = None,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
    on_miss: str = "error",
) -> ReplayResult:
    """Replay ``bundle`` by calling the agent's own ``entrypoint``; never raises its errors.

    The entrypoint (``"module:function"`` or a callable) is called with the recorded
    ``run_input`` as its one argument when one was recorded, else with no arguments; an
    async entrypoint is awaited (also when called from inside a running event loop: it
    then runs in a worker thread; in async code prefer :func:`areplay_run`). The agent's
    exception, if any, is in ``result.error`` (a ``CancelledError`` too: an entrypoint
    ending in one is a ``failed`` result). ``save``: also write the replayed run as a
    bundle at this path (``overwrite`` to replace one). ``agent_version``: the version
    of the agent replayed, carried by the replayed run (default: the recorded one). Other
    options as in ``replay()``.
    """
    target = resolve_entrypoint(entrypoint)
    options = ReplayOptions.build(
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        match=match,
        manual=manual,
        save=save,
        overwrite=overwrite,
        agent_version=agent_version,
        tiers=tiers,
        match_ignore=match_ignore,
        on_miss=on_miss,
    )
    return run_replay(bundle, target, options)


def run_replay(
    bundle: Bundle | str | os.PathLike[str],
    target: Entrypoint,
    options: ReplayOptions,
    *,
    controller: ControllerFactory = ReplayController,
) -> ReplayResult:
    """:func:`replay_run` with its options already checked (for the CLI and suites);
    ``controller`` makes the replay's controller (a fork passes its own)."""
    session = ReplaySession(as_bundle(bundle), options, controller=controller)
    value: Any = None
    error: BaseException | None = None
    with session:
        try:
            value = target(*_call_args(session.bundle))
            if inspect.isawaitable(value):
                value = _run_coroutine(value)
        # A CancelledError here is the agent's own: nothing can cancel this synchronous
        # caller, and asyncio.run turns a Ctrl-C of its task into KeyboardInterrupt.
        except (Exception, SystemExit, asyncio.CancelledError) as exc:
            error = exc
        has_output = session.has_output
        end_with(session, value, error)
    return _result(session, value, error, has_output)


async def areplay_run(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    mode: ReplayMode | str = ReplayMode.FROZEN,
    live_llms: Iterable[str] | None = None,
    allow_live_tools: Iterable[str] | None = None,
    match: MatchMode | str = MatchMode.STRICT,
    manual: ManualHandler | None = None,
    save: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    agent_version: str | None = None,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
    on_miss: str = "error",
) -> ReplayResult:
    """The async twin of :func:`replay_run`, awaiting an async entrypoint in this loop.

    A real cancellation of the task awaiting it (``task.cancel()``, a timeout around
    it) propagates; any other ``CancelledError`` of the entrypoint is ``result.error``."""
    target = resolve_entrypoint(entrypoint)
    options = ReplayOptions.build(
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        match=match,
        manual=manual,
        save=save,
        overwrite=overwrite,
        agent_version=agent_version,
        tiers=tiers,
        match_ignore=match_ignore,
        on_miss=on_miss,
    )
    return await arun_replay(bundle, target, options)


async def arun_replay(
    bundle: Bundle | str | os.PathLike[str],
    target: Entrypoint,
    options: ReplayOptions,
    *,
    controller: ControllerFactory = ReplayController,
) -> ReplayResult:
    """The async twin of :func:`run_replay`."""
    session = ReplaySession(as_bundle(bundle), options, controller=controller)
    value: Any = None
    error: BaseException | None = None
    async with session:
        try:
            value = target(*_call_args(session.bundle))
            if inspect.isawaitable(value):
                value = await value
        except (Exception, SystemExit) as exc:
            error = exc
        except asyncio.CancelledError as exc:
            if _cancelled_for_real():
                raise
            error = exc
        has_output = session.has_output
        end_with(session, value, error)
    return _result(session, value, error, has_output)
