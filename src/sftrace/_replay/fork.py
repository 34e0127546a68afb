"""``fork()``: replay a recorded run up to a step, then let the agent run for real.

The fork point is the ``at``-th recorded call (1-based, in recorded order). Every call
before it is answered from the recording, as in a strict replay. The call at the fork
point is answered with ``override`` when one is given, through the very path a recorded
answer takes (so an SDK integration builds its response object from it), or else runs
for real. Every call after it runs for real: tool bodies run and LLM calls are made,
whatever their recorded replay policy and whatever live mode would allow, since running
the other branch is what a fork is for. With ``save=`` the forked run is written as a new
bundle (the saving path of every replay) whose manifest's ``derived_from`` is
``{"run_id", "how": "fork", "step", "overridden"}``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sftrace._bundle.reader import Bundle
from sftrace._errors import (
    ConfigError,
    ForkPointError,
    IncompleteReplayError,
    TraceSerializationError,
)
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._model.serialize import dumps
from sftrace._model.text import pluralize, shorten
from sftrace._record.intercept import Action, Decision, Reached
from sftrace._replay.controller import ReplayController, call_identity, unrecorded_call
from sftrace._replay.options import ManualHandler, ReplayOptions
from sftrace._replay.run import (
    Entrypoint,
    ReplayResult,
    arun_replay,
    resolve_entrypoint,
    run_replay,
)
from sftrace._replay.session import as_bundle


class _NoOverride(enum.Enum):
    TOKEN = "no override"


# The default of ``override``: the call at the fork point runs for real. (``None`` is an
# override: the JSON value null.)
NO_OVERRIDE: Final = _NoOverride.TOKEN


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """Where a fork starts and what the call there answers: ``index`` is the 0-based
    position of the fork point among the recorded calls, ``override_json`` the JSON text
    it answers with (None: it runs for real)."""

    index: int
    override_json: str | None = None

    @property
    def step(self) -> int:
        """The fork point as users name it: 1-based, in recorded order."""
        return self.index + 1

    @property
    def overridden(self) -> bool:
        return self.override_json is not None


def _names_of(call: Call) -> tuple[str, ...]:
    """What ``NAME`` in ``at="NAME#K"`` may say for this call."""
    if call.kind == A.KIND_LLM and call.provider:
        return (call.name, f"{call.provider}/{call.name}")
    return (call.name,)


def resolve_at(calls: Sequence[Call], at: int | str) -> int:
    """The 0-based index of the call ``at`` names: a 1-based number in recorded order
    (an ``int`` or its digits), or ``"NAME#K"``, the K-th call (1-based) of the tool or
    model NAME (``"gpt-4o#2"``, ``"openai/gpt-4o#2"``). Raises ``ForkPointError``."""
    count = len(calls)
    if count == 0:
        raise ForkPointError("the recording has no calls: there is nothing to fork at")
    if isinstance(at, bool) or not isinstance(at, int | str):
        raise ForkPointError(
            f"at must be a call number (1-based) or 'NAME#K', got {at!r} ({type(at).__name__})"
        )
    text = at.strip() if isinstance(at, str) else str(at)
    if isinstance(at, int) or (text.isascii() and text.isdigit()):
        step = int(text)
        if not 1 <= step <= count:
            raise ForkPointError(
                f"at={at!r} is out of range: the recording has {pluralize(count, 'call')}, "
                f"numbered 1 to {count} in recorded order (`sftrace inspect BUNDLE` lists "
                f"them)",
                step=step,
            )
        return step - 1
    name, sep, nth = text.rpartition("#")
    if not sep or not name or not (nth.isascii() and nth.isdigit()) or int(nth) < 1:
        raise ForkPointError(
            f"at={at!r} is neither a call number (1-based, in recorded order) nor 'NAME#K' "
            f"(the K-th call, 1-based, of the tool or model NAME), e.g. at=2 or "
            f"at='lookup_order#1'"
        )
    found = [index for index, call in enumerate(calls) if name in _names_of(call)]
    if not found:
        known = sorted({call.name for call in calls})
        listed = ", ".join(repr(item) for item in known[:10])
        more = f" and {len(known) - 10} more" if len(known) > 10 else ""
        raise ForkPointError(
            f"at={at!r}: the recording has no call of {name!r}; its tools and models are "
            f"{listed}{more}"
        )
    if int(nth) > len(found):
        raise ForkPointError(
            f"at={at!r}: the recording has only {pluralize(len(found), 'call')} of {name!r}",
        )
    return found[int(nth) - 1]


def override_json(override: Any) -> str | None:
    """The JSON text of a fork's override (None for :data:`NO_OVERRIDE`); a value that
    is not JSON is a ``ConfigError``."""
    if override is NO_OVERRIDE:
        return None
    try:
        return dumps(override, what="override", sort_keys=False)
    except TraceSerializationError as exc:
        raise ConfigError(
            f"override must be a JSON value (a dict, list, str, number, bool or None; "
            f"dataclasses and pydantic models are converted), got "
            f"{type(override).__name__}: {exc}"
        ) from None


def plan_fork(bundle: Bundle, at: int | str, override: Any = NO_OVERRIDE) -> ForkPlan:
    """Check ``at`` and ``override`` against the recording, before anything runs."""
    return ForkPlan(resolve_at(bundle.calls, at), override_json(override))


class ForkController(ReplayController):
    """A strict replay up to the fork point, the fork point itself, then everything live."""

    def __init__(
        self,
        calls: list[Call],
        options: ReplayOptions,
        *,
        plan: ForkPlan,
        recorded_run_id: str = "",
        span_parents: dict[str, str | None] | None = None,
    ) -> None:
        super().__init__(calls, options, recorded_run_id=recorded_run_id, span_parents=span_parents)
        self.plan = plan
        self.fork_number: int | None = None  # the reached number of the fork point
        self._check_reachable()
        # A strict fork keeps the recorded order: taking a concurrent call out of it could
        # take one the recording makes after the fork point.
        self.concurrency = None
        if self.match is MatchMode.UNORDERED:
            # Only _fork takes the fork point: the unordered matcher never answers it.
            self._used[plan.index] = True

    @property
    def unused(self) -> list[Call]:
        unused = super().unused
        if self.fork_number is None and self.match is MatchMode.UNORDERED:
            fork_point = self.calls[self.plan.index]
            unused = sorted([*unused, fork_point], key=lambda call: call.seq)
        return unused

    def provenance(self) -> dict[str, Any]:
        plan = self.plan
        how = {"how": "fork", "step": plan.step, "overridden": plan.overridden}
        if self.match is MatchMode.UNORDERED:
            how["match"] = MatchMode.UNORDERED.value  # the order of its calls is not compared
        return how

    def _check_reachable(self) -> None:
        """Refuse a fork point made inside a call the fork answers without running it."""
        parent_of = {inner: outer for outer, inners in self._inner.items() for inner in inners}
        index = self.plan.index
        target = self.calls[index]
        outer = parent_of.get(index)
        while outer is not None and outer < index:
            call = self.calls[outer]
            reached = Reached(call.kind, call.name, call.provider, call.input_json)
            runs = self._is_live_llm(reached) or self._apply_policy(0, call, reached).action in (
                Action.EXECUTE,
                Action.DERIVED,
            )
            if not runs:
                raise ForkPointError(
                    f"call {index + 1} ({target.label}) cannot be a fork point: it was made "
                    f"inside call {outer + 1} ({call.label}), which the fork answers from "
                    f"the recording without running its body (it comes before the fork "
                    f"point), so call {index + 1} is never made; fork at call {outer + 1} "
                    f"instead",
                    step=index + 1,
                )
            outer = parent_of.get(outer)

    def _decide(self, reached: Reached, parent_span_id: int | None = None) -> Decision:
        if self.fork_number is not None:  # after the fork point: everything runs for real
            self.reached_count += 1
            self.note_matched(self.reached_count, unrecorded_call(reached), "live")
            return Decision(Action.EXECUTE)
        if self.match is MatchMode.UNORDERED:
            return self._decide_unordered(reached)
        # Strict order: the fork point comes once every recorded call before it was used
        # (answered, or covered by a call answered without running its body).
        while self._next < len(self.calls) and self._used[self._next]:
            self._next += 1
        if self._next >= self.plan.index:
            return self._fork(reached)
        return super()._decide(reached, parent_span_id)

    def _decide_unordered(self, reached: Reached) -> Decision:
        """Unordered: a reached call that an unused recorded call answers is answered (in
        any order, as an unordered replay does; also one the recording makes after the
        fork point, reached first by concurrent work); one of the fork point's kind and
        name that none answers is the fork point."""
        fork_point = self.calls[self.plan.index]
        if call_identity(reached) == call_identity(fork_point) and not any(
            not used and self.input_match(call, reached)[0] is not None
            for call, used in zip(self.calls, self._used, strict=True)
        ):
            return self._fork(reached)
        return super()._decide(reached)

    def _fork(self, reached: Reached) -> Decision:
        self.reached_count += 1
        number = self.reached_count
        index = self.plan.index
        recorded = self.calls[index]
        if call_identity(recorded) != call_identity(reached):
            error = self._mismatch(number, reached, recorded, unordered=False)
            self._diverge(error)
            return Decision(Action.RAISE, error=error)
        self._used[index] = True
        self._next = index + 1
        self.fork_number = number
        tier, diffs = self.input_match(recorded, reached)
        if self.plan.override_json is None:
            self.note_matched(number, recorded, Action.EXECUTE.value, tier, diffs)
            return Decision(Action.EXECUTE, recorded)
        self._cover(index)  # its body does not run: the calls recorded inside it are not made
        self.note_matched(number, recorded, "overridden", tier, diffs)
        return Decision(Action.RETURN, _overridden(recorded, self.plan.override_json), fresh=True)


def _overridden(recorded: Call, output_json: str) -> Call:
    """``recorded`` answering with ``output_json`` (and none of its recorded usage; the
    class recorded of its result, so an ``llm_request`` gets the override as that class,
    as an SDK call gets the SDK's object)."""
    kept = (
        {A.OUTPUT_TYPE: recorded.attributes[A.OUTPUT_TYPE]}
        if recorded.may_have(A.OUTPUT_TYPE) and A.OUTPUT_TYPE in recorded.attributes
        else {}
    )
    return Call(
        seq=recorded.seq,
        kind=recorded.kind,
        name=recorded.name,
        provider=recorded.provider,
        input_json=recorded.input_json,
        output_json=output_json,
        error=None,
        policy=recorded.policy,
        span_id=recorded.span_id,
        parent_span_id=recorded.parent_span_id,
        attributes=kept,
    )


class _Made:
    """A controller factory for a fork that keeps the controller it made."""

    def __init__(self, plan: ForkPlan) -> None:
        self.plan = plan
        self.controller: ForkController | None = None

    def __call__(self, calls: list[Call], options: ReplayOptions, **kwargs: Any) -> ForkController:
        self.controller = ForkController(calls, options, plan=self.plan, **kwargs)
        return self.controller

    def finish(self, result: ReplayResult) -> ReplayResult:
        """Mark the fork point in ``result``; a run that never reached it diverged."""
        controller = self.controller
        assert controller is not None
        result.fork_number = controller.fork_number
        if controller.fork_number is None and result.divergence is None:
            recorded = controller.calls[self.plan.index]
            result.divergence = IncompleteReplayError(
                f"the forked run ended before reaching its fork point, call {self.plan.step} "
                f"({recorded.label} {shorten(recorded.input_json, 120)}), after "
                f"{pluralize(controller.reached_count, 'call')}: nothing was forked",
                unused=result.unused,
            )
            result.status = "diverged"
        return result


def run_fork(
    bundle: Bundle, target: Entrypoint, options: ReplayOptions, plan: ForkPlan
) -> ReplayResult:
    """:func:`fork` with its arguments already checked (for the CLI)."""
    made = _Made(plan)
    return made.finish(run_replay(bundle, target, options, controller=made))


async def arun_fork(
    bundle: Bundle, target: Entrypoint, options: ReplayOptions, plan: ForkPlan
) -> ReplayResult:
    """The async twin of :func:`run_fork`."""
    made = _Made(plan)
    return made.finish(await arun_replay(bundle, target, options, controller=made))


def _prepare(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    at: int | str,
    override: Any,
    save: str | os.PathLike[str] | None,
    overwrite: bool,
    mode: ReplayMode | str,
    live_llms: Iterable[str] | None,
    allow_live_tools: Iterable[str] | None,
    manual: ManualHandler | None,
    agent_version: str | None,
    match: MatchMode | str,
    tiers: Iterable[str] | None,
    match_ignore: Mapping[str, Iterable[str]] | None,
) -> tuple[Bundle, Entrypoint, ReplayOptions, ForkPlan]:
    """Check the arguments of ``fork`` (all of them, as given: no defaults here to drift
    from the twins'); the recorded run, the entrypoint, the replay options and the plan."""
    checked = ReplayOptions.build(
        save=save,
        overwrite=overwrite,
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        manual=manual,
        agent_version=agent_version,
        match=match,
        tiers=tiers,
        match_ignore=match_ignore,
    )
    recorded = as_bundle(bundle)
    plan = plan_fork(recorded, at, override)
    return recorded, resolve_entrypoint(entrypoint), checked, plan


def fork(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    at: int | str,
    override: Any = NO_OVERRIDE,
    save: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    mode: ReplayMode | str = ReplayMode.FROZEN,
    live_llms: Iterable[str] | None = None,
    allow_live_tools: Iterable[str] | None = None,
    manual: ManualHandler | None = None,
    agent_version: str | None = None,
    match: MatchMode | str = MatchMode.STRICT,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
) -> ReplayResult:
    """Replay ``bundle`` up to call ``at``, then let the agent run for real from there.

    Calls before call ``at`` (1-based, in recorded order; or ``"NAME#K"``, the K-th call
    of the tool or model NAME) are answered from the recording, in strict order
    (any order with ``match="unordered"``). Call
    ``at`` is answered with ``override`` when one is given (a JSON value; for an LLM call
    made through an SDK integration, the response as that integration records it, which
    it turns into the SDK's own object) and otherwise runs for real. Every call after it
    runs for real (tool bodies run, LLM calls are made), whatever its replay policy and
    ``allow_live_tools``: a fork runs the other branch. The entrypoint is called as by
    :func:`replay_run`; an async one is awaited (prefer :func:`afork` in async code).

    ``result.matched`` holds the calls before the fork point (as a replay answers them),
    the fork point (action ``"overridden"``, or ``"executed"``) and the calls after it
    (action ``"live"``); ``result.fork_number`` is the fork point's ``number`` there.
    Recorded calls after the fork point are in ``result.unused``. A run that diverges
    before the fork point, or ends before reaching it, has status ``"diverged"``.

    ``save``: write the forked run as a new bundle (``overwrite`` to replace one); its
    manifest's ``derived_from`` is ``{"run_id", "how": "fork", "step", "overridden"}``
    and its run span links to the recorded run. ``mode``, ``live_llms``,
    ``allow_live_tools``, ``manual``, ``agent_version``, ``tiers`` and ``match_ignore``
    apply to the calls before the fork point, as in ``replay()``. ``match``:
    ``"strict"`` (default) answers the calls before the fork point in recorded order
    and forks once they are all used; ``"unordered"`` (for concurrent agents) answers
    each reached call that an unused recorded call matches, in any order, and forks at
    the first reached call of the fork point's kind and name that none matches. A fork
    has no ``on_miss`` (it runs everything after its fork point).

    Raises ``ForkPointError`` for an ``at`` naming no call, or a call made inside a tool
    the fork answers from the recording (never made, so not a fork point), and
    ``ConfigError`` for an override that is not JSON or a bad option, before the agent
    runs.
    """
    recorded, target, options, plan = _prepare(
        bundle,
        entrypoint,
        at=at,
        override=override,
        save=save,
        overwrite=overwrite,
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        manual=manual,
        agent_version=agent_version,
        match=match,
        tiers=tiers,
        match_ignore=match_ignore,
    )
    return run_fork(recorded, target, options, plan)


async def afork(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    at: int | str,
    override: Any = NO_OVERRIDE,
    save: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    mode: ReplayMode | str = ReplayMode.FROZEN,
    live_llms: Iterable[str] | None = None,
    allow_live_tools: Iterable[str] | None = None,
    manual: ManualHandler | None = None,
    agent_version: str | None = None,
    match: MatchMode | str = MatchMode.STRICT,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
) -> ReplayResult:
    """The async twin of :func:`fork`, awaiting an async entrypoint in this loop."""
    recorded, target, options, plan = _prepare(
        bundle,
        entrypoint,
        at=at,
        override=override,
        save=save,
        overwrite=overwrite,
        mode=mode,
        live_llms=live_llms,
        allow_live_tools=allow_live_tools,
        manual=manual,
        agent_version=agent_version,
        match=match,
        tiers=tiers,
        match_ignore=match_ignore,
    )
    return await arun_fork(recorded, target, options, plan)


__all__ = [
    "NO_OVERRIDE",
    "ForkController",
    "ForkPlan",
    "afork",
    "arun_fork",
    "fork",
    "override_json",
    "plan_fork",
    "resolve_at",
    "run_fork",
]
