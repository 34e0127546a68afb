"""``minimize``: shrink a failing run's recorded outputs while the failure still reproduces.

The recorded outputs of the calls a frozen replay answers (a tool's 200 flights, an LLM
reply) are shrunk by :class:`~sftrace._regress.shrink.Shrinker`; each candidate is
replayed against the agent's entrypoint and kept when the replay reproduces the recorded
failure: the same exception type and message, or, with expectations, the same unmet
expectations (and the same exception when the recorded run failed).

Later calls' inputs often quote earlier outputs (a prompt quoting a tool result), so the
candidates are replayed with calls matched by kind and name in order, whatever their
input (``match="unordered"``, ``match_ignore={"*": ["$"]}``). The smallest candidate is
then replayed once more with ``save=``: the saved bundle holds the inputs the agent made
with the shrunk outputs, so it replays strictly, which a last strict frozen replay checks.

With ``keep_passing`` (the fixed agent's entrypoint), a candidate is kept only when the
fixed agent, replayed on it the same way, still passes too: the minimized bundle keeps
what the fix reads (the ``days`` it now checks), so it can carry the regression test of
the fix, not only the failure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._bundle.writer import check_bundle_target
from sftrace._errors import ConfigError, ReplayError
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.policy import ReplayPolicy
from sftrace._model.text import first_line
from sftrace._regress.compare import compare
from sftrace._regress.expectations import (
    Expectations,
    expectations_from_files,
)
from sftrace._regress.findings import Severity
from sftrace._regress.reproduction import Signature, check_reproduced, describe, signature
from sftrace._regress.shrink import Shrinker
from sftrace._replay.options import ManualHandler, ReplayOptions
from sftrace._replay.run import (
    Entrypoint,
    ReplayResult,
    arun_replay,
    resolve_entrypoint,
    run_replay,
)
from sftrace._replay.session import as_bundle

__all__ = ["MinimizeProgress", "MinimizeResult", "aminimize", "minimize"]

# The first replay (does the failure reproduce?), the one that saves, the strict check.
FIXED_REPLAYS: Final = 3
# With keep_passing: the fixed agent on the recorded bundle, and on the minimized one.
KEEP_PASSING_REPLAYS: Final = 2
# A replay the minimization asks its driver (sync or async) to run, and the whole of it:
# the bundle, the options, and whether the fixed agent (keep_passing) is the one to run.
Replay = tuple[Bundle, ReplayOptions, bool]
Steps = Generator[Replay, ReplayResult, "MinimizeResult"]


@dataclass(frozen=True)
class MinimizeProgress:
    """Where a minimization is, passed to ``progress`` after each replay."""

    replays: int
    max_replays: int
    output_bytes: int  # the recorded outputs of the calls still reached, as JSON bytes
    output_bytes_before: int


@dataclass
class MinimizeResult:
    """What ``minimize`` did. ``bundle`` is the minimized bundle, written at ``path``.

    ``replays`` counts every replay run (at most ``max_replays``); ``complete`` says the
    shrinking stopped because nothing more could be removed, not because the replays
    ran out. ``verified``: a strict frozen replay of the minimized bundle reproduced the
    failure, and with ``keep_passing``, the fixed agent passes on it (``fixed_passes``;
    None without ``keep_passing``). ``reproduces`` says what was reproduced. ``sizes``
    has, for each call of the minimized bundle, its label and the bytes of its recorded
    output before and after.
    """

    path: Path
    bundle: Bundle
    reproduces: str
    replays: int
    max_replays: int
    complete: bool
    verified: bool
    calls_before: int
    calls_after: int
    output_bytes_before: int
    output_bytes_after: int
    sizes: tuple[tuple[str, int, int], ...]
    fixed_passes: bool | None = None


def minimize(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    output: str | os.PathLike[str],
    overwrite: bool = False,
    expect: Expectations | None = None,
    expect_output: str | os.PathLike[str] | None = None,
    expect_trajectory: str | os.PathLike[str] | None = None,
    max_replays: int = 500,
    progress: Callable[[MinimizeProgress], None] | None = None,
    manual: ManualHandler | None = None,
    agent_version: str | None = None,
    keep_passing: str | Entrypoint | None = None,
) -> MinimizeResult:
    """Shrink the recorded outputs of ``bundle`` while a frozen replay against
    ``entrypoint`` still reproduces its failure; write the result at ``output``.

    What must reproduce: the recorded run's exception (type and message); with
    expectations (``expect``, or the files of ``sftrace export``: ``expect_output`` a
    JSON file holding the corrected output, ``expect_trajectory`` an expectations
    document), also the same unmet expectations, so a run that completed with the wrong
    behaviour can be minimized too. Lists lose items, objects members, strings
    characters; numbers stay. Deterministic; at most ``max_replays`` replays in all
    (the first, the one that saves and a last strict check among them). ``progress`` is
    called after each replay. ``manual`` and ``agent_version`` as in ``replay_run``.
    ``keep_passing``: the fixed agent's entrypoint; a shrink is kept only when it also
    passes (completes without diverging, and meets the expectations when given), so the
    minimized bundle still holds what the fix reads (two more replays, and one per kept
    shrink).

    Raises ``ConfigError`` for bad arguments, a run that neither failed nor is given
    expectations, or a ``keep_passing`` agent that does not pass on the recorded run, and
    ``ReplayError`` when the first replay does not reproduce the failure.
    """
    target, steps = _steps(
        bundle,
        entrypoint,
        output=output,
        overwrite=overwrite,
        expect=expect,
        expect_output=expect_output,
        expect_trajectory=expect_trajectory,
        max_replays=max_replays,
        progress=progress,
        manual=manual,
        agent_version=agent_version,
        keep_passing=keep_passing,
    )
    step = _step(steps, None)
    while not isinstance(step, MinimizeResult):
        step = _step(steps, run_replay(step[0], target[step[2]], step[1]))
    return step


async def aminimize(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    output: str | os.PathLike[str],
    overwrite: bool = False,
    expect: Expectations | None = None,
    expect_output: str | os.PathLike[str] | None = None,
    expect_trajectory: str | os.PathLike[str] | None = None,
    max_replays: int = 500,
    progress: Callable[[MinimizeProgress], None] | None = None,
    manual: ManualHandler | None = None,
    agent_version: str | None = None,
    keep_passing: str | Entrypoint | None = None,
) -> MinimizeResult:
    """The async twin of :func:`minimize`: an async entrypoint is awaited in this loop."""
    target, steps = _steps(
        bundle,
        entrypoint,
        output=output,
        overwrite=overwrite,
        expect=expect,
        expect_output=expect_output,
        expect_trajectory=expect_trajectory,
        max_replays=max_replays,
        progress=progress,
        manual=manual,
        agent_version=agent_version,
        keep_passing=keep_passing,
    )
    step = _step(steps, None)
    while not isinstance(step, MinimizeResult):
        step = _step(steps, await arun_replay(step[0], target[step[2]], step[1]))
    return step


def _step(steps: Steps, result: ReplayResult | None) -> Replay | MinimizeResult:
    """Run the minimization on to its next replay (returned, for the driver to run and
    send back with ``result``: :func:`minimize` runs it, :func:`aminimize` awaits it) or
    to its end (its result); ``result=None`` starts it."""
    try:
        return next(steps) if result is None else steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _steps(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    output: str | os.PathLike[str],
    overwrite: bool,
    expect: Expectations | None,
    expect_output: str | os.PathLike[str] | None,
    expect_trajectory: str | os.PathLike[str] | None,
    max_replays: int,
    progress: Callable[[MinimizeProgress], None] | None,
    manual: ManualHandler | None,
    agent_version: str | None,
    keep_passing: str | Entrypoint | None,
) -> tuple[dict[bool, Entrypoint], Steps]:
    """Check the arguments of ``minimize`` (all of them, as given: no defaults here to
    drift from the twins'); the entrypoints (the agent's, under False; the fixed one's,
    under True) and the minimization, as replays to run."""
    targets = {False: resolve_entrypoint(entrypoint)}
    if keep_passing is not None:
        targets[True] = resolve_entrypoint(keep_passing)
    recorded = as_bundle(bundle)
    if expect is not None and (expect_output is not None or expect_trajectory is not None):
        raise ConfigError(
            "pass the expectations either as expect= or as expect_output=/expect_trajectory= "
            "files, not both"
        )
    if expect is None:
        expect = expectations_from_files(expect_output, expect_trajectory)
    if expect is not None and not isinstance(expect, Expectations):
        raise ConfigError(f"expect must be an Expectations or None, got {expect!r}")
    if recorded.status != "failed" and expect is None:
        raise ConfigError(
            f"nothing to minimize: run {recorded.run_id} of {recorded.agent_name!r} "
            f"{recorded.status} without failing; to minimize a run that behaved wrongly, "
            f"say what was expected with expect_output / expect_trajectory (CLI: "
            f"--expect-output FILE, --expect-trajectory FILE)"
        )
    if not isinstance(max_replays, int) or isinstance(max_replays, bool):
        raise ConfigError(f"max_replays must be an integer, got {max_replays!r}")
    fixed = KEEP_PASSING_REPLAYS if keep_passing is not None else 0
    if max_replays < FIXED_REPLAYS + fixed:
        raise ConfigError(
            f"max_replays must be at least {FIXED_REPLAYS + fixed} (the first replay, the "
            f"one that saves, the strict check{', and the fixed agent twice' if fixed else ''}"
            f"), got {max_replays}"
        )
    path = Path(output)
    check_bundle_target(path, overwrite=overwrite, purpose="write the minimized bundle")
    options = ReplayOptions.build(
        match="unordered",
        match_ignore={"*": ["$"]},
        manual=manual,
        agent_version=agent_version,
    )
    minimization = _Minimization(
        recorded, options, expect, max_replays, progress, keep_passing=keep_passing is not None
    )
    return targets, minimization.steps(path, overwrite)


class _Minimization:
    """The state of one ``minimize`` call."""

    def __init__(
        self,
        recorded: Bundle,
        options: ReplayOptions,
        expect: Expectations | None,
        max_replays: int,
        progress: Callable[[MinimizeProgress], None] | None,
        *,
        keep_passing: bool = False,
    ) -> None:
        self.recorded = recorded
        self.keep_passing = keep_passing
        self.options = options
        self.expect = expect
        self.max_replays = max_replays
        self.progress = progress
        self.replays = 0
        self.calls = recorded.calls
        # The calls whose output a frozen replay returns: only those can shrink.
        self.shrinkable = [index for index, call in enumerate(self.calls) if _answered(call)]
        self.original = [self.calls[index].output for index in self.shrinkable]
        self.sizes_before = {call.seq: _size(call.output_json) for call in self.calls}
        self.output_bytes_before = sum(_size(call.output_json) for call in recorded.calls)
        self.output_bytes = self.output_bytes_before

    def steps(self, path: Path, overwrite: bool) -> Steps:
        """The minimization: yields each replay to run, receives its result."""
        first = yield from self._replay(self.recorded, self.options)
        wanted = check_reproduced(
            self.recorded, first, signature(self.recorded, first, self.expect), self.expect
        )
        if self.keep_passing:
            fixed = yield from self._replay(self.recorded, self.options, fixed=True)
            problem = self._fails(fixed)
            if problem is not None:
                raise ConfigError(
                    f"cannot minimize run {self.recorded.run_id} keeping the fixed agent "
                    f"passing: on the recorded run it does not pass ({problem}); keep_passing "
                    f"(--keep-passing) needs the entrypoint of the agent with the fix, which "
                    f"completes (and meets the expectations given) on that run"
                )
        values, complete = yield from self._shrink(wanted, self._used(first))
        save = dataclasses.replace(
            self.options, save=path, overwrite=overwrite, derived_from={"how": "minimize"}
        )
        saved = yield from self._replay(self._candidate(values), save)
        if saved.saved_path is None:
            raise ReplayError(f"the minimized run could not be written to {str(path)!r}")
        minimized = load_bundle(saved.saved_path)
        strict = ReplayOptions.build(
            manual=self.options.manual, agent_version=self.options.agent_version
        )
        check = yield from self._replay(minimized, strict)
        fixed_passes: bool | None = None
        if self.keep_passing:
            fixed_check = yield from self._replay(minimized, self.options, fixed=True)
            fixed_passes = self._fails(fixed_check) is None
        before = self.sizes_before
        verified = (
            signature(self.recorded, saved, self.expect) == wanted
            and signature(self.recorded, check, self.expect) == wanted
            and not check.unused
            and fixed_passes is not False
        )
        return MinimizeResult(
            path=saved.saved_path,
            bundle=minimized,
            reproduces=describe(wanted),
            replays=self.replays,
            max_replays=self.max_replays,
            complete=complete,
            verified=verified,
            calls_before=len(self.calls),
            calls_after=len(minimized.calls),
            output_bytes_before=self.output_bytes_before,
            output_bytes_after=sum(_size(call.output_json) for call in minimized.calls),
            sizes=tuple(
                (call.label, before.get(matched.recorded.seq, 0), _size(call.output_json))
                for call, matched in zip(minimized.calls, saved.matched, strict=False)
            ),
            fixed_passes=fixed_passes,
        )

    # -- shrinking -----------------------------------------------------------------------
    def _shrink(
        self, wanted: Signature, used: set[int]
    ) -> Generator[Replay, ReplayResult, tuple[list[Any], bool]]:
        """The smallest outputs found, and whether shrinking ran to the end."""
        shrinker = Shrinker(self.original, used)
        seen: dict[bytes, bool] = {}  # digest of a candidate tried -> whether it was kept
        proposals = shrinker.proposals()
        # The first replay (and the fixed agent's first) are spent already.
        budget = self.max_replays - FIXED_REPLAYS + 1
        if self.keep_passing:
            budget -= KEEP_PASSING_REPLAYS - 1
        try:
            candidate = next(proposals)
            while True:
                # A digest, not the text: a large run tried 500 times must not be kept 500 times.
                key = hashlib.blake2b(orjson.dumps(candidate), digest_size=16).digest()
                accepted = seen.get(key)
                if accepted is None:
                    if self.replays >= budget:
                        return shrinker.values, False
                    bundle = self._candidate(candidate)
                    result = yield from self._replay(bundle, self.options)
                    accepted = signature(self.recorded, result, self.expect) == wanted
                    if accepted and self.keep_passing and self.replays < budget:
                        fixed = yield from self._replay(bundle, self.options, fixed=True)
                        accepted = self._fails(fixed) is None
                    elif accepted and self.keep_passing:
                        return shrinker.values, False  # no replay left to check the fix
                    seen[key] = accepted
                    if accepted:
                        shrinker.used = self._used(result)
                        self.output_bytes = self._reached_bytes(result, candidate)
                candidate = proposals.send(accepted)
        except StopIteration:
            return shrinker.values, True

    def _candidate(self, values: Sequence[Any]) -> Bundle:
        """The recorded bundle with ``values`` as the outputs of the shrinkable calls."""
        calls = list(self.calls)
        for index, value, original in zip(self.shrinkable, values, self.original, strict=True):
            if value is not original:
                calls[index] = calls[index].with_output(orjson.dumps(value).decode())
        return dataclasses.replace(self.recorded, calls=calls)

    def _used(self, result: ReplayResult) -> set[int]:
        """The positions (among the shrinkable calls) of those ``result`` reached."""
        reached = {matched.recorded.seq for matched in result.matched}
        return {
            position
            for position, index in enumerate(self.shrinkable)
            if self.calls[index].seq in reached
        }

    def _reached_bytes(self, result: ReplayResult, values: Sequence[Any]) -> int:
        sizes = {
            self.calls[index].seq: len(orjson.dumps(value))
            for index, value in zip(self.shrinkable, values, strict=True)
        }
        return sum(
            sizes.get(matched.recorded.seq, _size(matched.recorded.output_json))
            for matched in result.matched
        )

    # -- replaying and judging ---------------------------------------------------------
    def _fails(self, result: ReplayResult) -> str | None:
        """Why the fixed agent's replay ``result`` does not pass, None when it does: it
        must not diverge, and must complete and meet the expectations (when given)."""
        if result.divergence is not None:
            return f"the replay diverged: {str(result.divergence).splitlines()[0]}"
        if self.expect is not None:
            report = compare(self.recorded, result, expect=self.expect)
            if not report.passed:
                errors = report.by_severity(Severity.ERROR)
                return errors[0].message.splitlines()[0] if errors else report.summary()
            return None
        if result.status != "completed":
            error = result.error
            return f"it {result.status}" + (
                f" with {type(error).__name__}: {first_line(str(error))}" if error else ""
            )
        return None

    def _replay(
        self, bundle: Bundle, options: ReplayOptions, *, fixed: bool = False
    ) -> Generator[Replay, ReplayResult, ReplayResult]:
        result = yield (bundle, options, fixed)
        self.replays += 1
        self._report()
        return result

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(
                MinimizeProgress(
                    self.replays, self.max_replays, self.output_bytes, self.output_bytes_before
                )
            )


def _answered(call: Call) -> bool:
    """Whether a frozen replay answers ``call`` with its recorded output."""
    return (
        call.error is None
        and call.output_json is not None
        and call.policy == ReplayPolicy.FROZEN.value
        and A.OUTPUT_UNRECORDED not in call.attributes
    )


def _size(text: str | None) -> int:
    return 0 if text is None else len(text.encode())
