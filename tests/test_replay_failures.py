"""Recorded failures come back as failures the agent's own handlers catch, never as a
divergence; recorded interruptions never abort the process that replays them."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sftrace import (
    RecordedDependencyError,
    RecordedInterruption,
    compare,
    load_bundle,
    record,
    replay,
    replay_run,
    trace_tool,
)
from sftrace._model.calls import CallFailure
from sftrace._replay.rebuild import rebuild_exception


class QuotaExceeded(Exception):
    """An application's own exception, as agents define them."""


class RateLimited(Exception):
    """Its constructor needs more than a message."""

    def __init__(self, retry_after: int, detail: str) -> None:
        super().__init__(retry_after, detail)
        self.retry_after = retry_after


class KeywordOnly(Exception):
    """Its constructor cannot be called with its own args."""

    def __init__(self, *, code: int) -> None:
        super().__init__(f"code {code}")
        self.code = code


class RefundDenied(Exception):
    """Its args hold one message; its handler reads an attribute the message does not."""

    def __init__(self, order: str, reason: str) -> None:
        super().__init__(f"{order}: {reason}")
        self.order = order
        self.audit = {"reason": reason, "checks": [1, 2.5, None, True]}
        self.rules = {"r1", "r2"}  # a set: not plain JSON, not recorded
        self.handler = object()  # not JSON at all


class NotFound(Exception):
    """Its constructor takes one argument and formats the message from it."""

    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        super().__init__(f"order {order_id} not found")


class Coded(Exception):
    """Its constructor takes the message alone, the code from a default."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


BODIES: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    BODIES.clear()


def raising_tool(name: str, error: Callable[[], BaseException]) -> Callable[[str], str]:
    @trace_tool(name=name)
    def tool(query: str) -> str:
        BODIES.append(name)
        raise error()

    return tool


quota_tool = raising_tool("quota", lambda: QuotaExceeded("monthly quota of 100 used"))
rate_tool = raising_tool("rate", lambda: RateLimited(30, "slow down"))
keyword_tool = raising_tool("keyword", lambda: KeywordOnly(code=7))


def lets_it_fail(query: str) -> str:
    return quota_tool(query)


def handles_it(query: str) -> str:
    try:
        return quota_tool(query)
    except QuotaExceeded as exc:
        return f"fallback after {exc}"


def recorded(path: Path, entrypoint: Callable[[str], Any], *, catch: Any = Exception) -> Path:
    """Record ``entrypoint("q")`` as the README does; its exception is swallowed."""
    try:
        with record("agent", output=path, run_input="q") as session:
            session.set_output(entrypoint("q"))
    except catch:
        pass
    BODIES.clear()
    return path


def test_custom_tool_failure_replays_as_the_failure_not_a_divergence(tmp_path: Path) -> None:
    """A tool raising the agent's own exception replays as that failure: status failed,
    reproduced, the same class and args, no tool body run, and compare passes."""
    bundle = recorded(tmp_path / "q.sftrace", lets_it_fail)
    assert load_bundle(bundle).status == "failed"
    result = replay_run(bundle, lets_it_fail)
    assert result.divergence is None
    assert (result.status, result.reproduced_failure, result.reproduced) == ("failed", True, True)
    assert type(result.error) is QuotaExceeded
    assert result.error.args == ("monthly quota of 100 used",)
    assert [m.action for m in result.matched] == ["substituted"]
    assert BODIES == []
    report = compare(bundle, result)
    assert report.passed, report.format()


def test_agent_handler_catches_the_replayed_failure(tmp_path: Path) -> None:
    """`except QuotaExceeded:` in the agent catches the replayed failure."""
    bundle = recorded(tmp_path / "h.sftrace", handles_it)
    result = replay_run(bundle, handles_it)
    assert (result.status, result.divergence) == ("completed", None)
    assert result.output == "fallback after monthly quota of 100 used"
    assert result.reproduced
    assert compare(bundle, result).passed


def test_exception_args_are_recorded_and_given_back(tmp_path: Path) -> None:
    """The recorded args (as JSON) rebuild an exception whose constructor needs them."""
    bundle = recorded(tmp_path / "r.sftrace", rate_tool)
    call = load_bundle(bundle).calls[0]
    assert call.error is not None
    assert call.error.args_json == '[30,"slow down"]'
    with replay(bundle), pytest.raises(RateLimited) as raised:
        rate_tool("q")
    assert raised.value.args == (30, "slow down")
    assert raised.value.retry_after == 30


def test_exception_whose_constructor_refuses_its_args_is_still_that_class(
    tmp_path: Path,
) -> None:
    """A class whose constructor can't take its own args is built without calling it."""
    bundle = recorded(tmp_path / "k.sftrace", keyword_tool)
    with replay(bundle), pytest.raises(KeywordOnly) as raised:
        keyword_tool("q")
    assert str(raised.value) == "code 7"
    assert raised.value.args == ("code 7",)
    assert raised.value.code == 7  # set again from the recorded attributes


refund_tool = raising_tool("refund", lambda: RefundDenied("o-17", "risk 0.56"))


def handles_the_denial(query: str) -> str:
    try:
        return refund_tool(query)
    except RefundDenied as exc:
        return f"denied {exc.order} ({exc.audit['reason']})"


def test_a_handler_reading_the_exceptions_attributes_works_on_the_replayed_one(
    tmp_path: Path,
) -> None:
    """The attributes the exception's __init__ set come back, where their values are
    plain JSON: a handler reading ``exc.order`` (args hold only the message) replays
    the recorded run instead of failing with AttributeError."""
    bundle = recorded(tmp_path / "d.sftrace", handles_the_denial)
    error = load_bundle(bundle).calls[0].error
    assert error is not None
    assert error.fields_json == (
        '{"order":"o-17","audit":{"reason":"risk 0.56","checks":[1,2.5,null,true]}}'
    )
    result = replay_run(bundle, handles_the_denial)
    assert (result.status, result.divergence) == ("completed", None)
    assert result.output == "denied o-17 (risk 0.56)"
    assert compare(bundle, result).passed
    with replay(bundle), pytest.raises(RefundDenied) as raised:
        refund_tool("q")
    assert raised.value.audit == {"reason": "risk 0.56", "checks": [1, 2.5, None, True]}
    assert not hasattr(raised.value, "rules")  # left out, not turned into a list


def test_a_constructor_that_formats_its_message_gets_the_recorded_message_back(
    tmp_path: Path,
) -> None:
    """``NotFound("A1")`` holds ``("order A1 not found",)``; called again with that,
    its constructor would format it once more. The replayed exception has the recorded
    args and message, so the failure reproduces, and an agent quoting ``str(exc)`` to its
    model makes the recorded call."""
    missing = raising_tool("missing", lambda: NotFound("A1"))

    def quotes_it(query: str) -> str:
        try:
            return missing(query)
        except NotFound as exc:
            return f"sorry: {exc}"

    bundle = recorded(tmp_path / "n.sftrace", missing, catch=NotFound)
    result = replay_run(bundle, missing)
    assert (result.status, result.reproduced_failure) == ("failed", True)
    assert result.error is not None
    assert result.error.args == ("order A1 not found",)
    assert str(result.error) == "order A1 not found"
    assert result.error.order_id == "A1"
    assert compare(bundle, result).passed
    handled = recorded(tmp_path / "h.sftrace", quotes_it)
    replayed = replay_run(handled, quotes_it)
    assert replayed.output == "sorry: order A1 not found"
    assert compare(handled, replayed).passed


def test_recorded_attributes_win_over_the_constructors_defaults(tmp_path: Path) -> None:
    coded = raising_tool("coded", lambda: Coded("declined", code=42))
    bundle = recorded(tmp_path / "c.sftrace", coded)
    with replay(bundle), pytest.raises(Coded) as raised:
        coded("q")
    assert (raised.value.args, raised.value.code) == (("declined",), 42)


def test_secrets_in_exception_attributes_are_redacted(tmp_path: Path) -> None:
    leaky = raising_tool("leaky_fields", lambda: _leaky())
    bundle = recorded(tmp_path / "f.sftrace", leaky)
    error = load_bundle(bundle).calls[0].error
    assert error is not None
    assert error.fields_json is not None
    assert "hunter2secret" not in error.fields_json
    assert '"code":0' in error.fields_json


def _leaky() -> Coded:
    error = Coded("no")
    error.detail = "password=hunter2secret"  # type: ignore[attr-defined]
    return error


def test_attributes_too_large_to_walk_are_left_out_and_the_others_kept(tmp_path: Path) -> None:
    """A list that holds itself, or one shared so often that walking it would never end,
    is left out at once; the exception's other attributes are still recorded."""
    looped = raising_tool("looped", lambda: _looped())
    bundle = recorded(tmp_path / "l.sftrace", looped)
    error = load_bundle(bundle).calls[0].error
    assert error is not None
    assert error.fields_json == '{"code":3,"note":"kept"}'


def _looped() -> Coded:
    error = Coded("no", code=3)
    cycle: list[object] = []
    cycle.extend([cycle, cycle])
    shared: list[object] = [1]
    for _ in range(64):  # 2**64 items when walked, 65 lists in memory
        shared = [shared, shared]
    error.cycle = cycle  # type: ignore[attr-defined]
    error.shared = shared  # type: ignore[attr-defined]
    error.note = "kept"  # type: ignore[attr-defined]
    return error


def test_recorded_attributes_that_are_not_names_are_never_set() -> None:
    """A crafted bundle cannot set dunder or non-identifier attributes."""
    failure = CallFailure(
        type=f"{__name__}.QuotaExceeded",
        message="m",
        fields_json='{"__class__":"str","a b":1,"__dict__":{},"ok":2}',
    )
    rebuilt = rebuild_exception(failure)
    assert type(rebuilt) is QuotaExceeded
    assert vars(rebuilt) == {"ok": 2}


def test_secrets_in_exception_args_are_redacted(tmp_path: Path) -> None:
    """Args are recorded through redaction, like the message."""
    leaky = raising_tool("leaky", lambda: QuotaExceeded("password=hunter2secret"))
    bundle = recorded(tmp_path / "s.sftrace", leaky)
    error = load_bundle(bundle).calls[0].error
    assert error is not None
    assert error.args_json is not None
    assert "hunter2secret" not in error.args_json
    assert "hunter2secret" not in error.message


@pytest.fixture
def vanishing_module() -> Iterator[types.ModuleType]:
    """A module holding an exception class, imported while recording and gone after."""
    module = types.ModuleType("vanishing_errors")
    exec("class Gone(Exception):\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    yield module
    sys.modules.pop(module.__name__, None)


def test_unreachable_class_replays_as_recorded_dependency_error_and_reproduces(
    tmp_path: Path, vanishing_module: types.ModuleType
) -> None:
    """A class in no imported module is never imported: RecordedDependencyError carries
    its type name and message, and still counts as the reproduced failure."""
    gone_tool = raising_tool("gone", lambda: vanishing_module.Gone("it went"))
    bundle = recorded(tmp_path / "g.sftrace", gone_tool)
    del sys.modules["vanishing_errors"]
    result = replay_run(bundle, gone_tool)
    assert isinstance(result.error, RecordedDependencyError)
    assert (result.error.type_name, result.error.recorded_message) == (
        "vanishing_errors.Gone",
        "it went",
    )
    assert (result.status, result.reproduced_failure, result.divergence) == ("failed", True, None)
    assert "vanishing_errors" not in sys.modules
    assert compare(bundle, result).passed


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        # A bundle written before args were recorded: the message is the one argument.
        (CallFailure(type=f"{__name__}.QuotaExceeded", message="over"), ("over",)),
        (CallFailure(type="ValueError", message="bad", builtin=True), ("bad",)),
        (CallFailure(type=f"{__name__}.QuotaExceeded", message="m", args_json="[1,2]"), (1, 2)),
        # Unparseable args (a hand-edited bundle) fall back to the message.
        (CallFailure(type=f"{__name__}.QuotaExceeded", message="m", args_json="{"), ("m",)),
    ],
)
def test_rebuilt_args(failure: CallFailure, expected: tuple[Any, ...]) -> None:
    """Recorded args are used when present, the message otherwise."""
    assert rebuild_exception(failure).args == expected


def test_names_that_are_not_exception_classes_are_never_used() -> None:
    """A recorded type naming a function or a non-exception class is not called."""
    for name in ("os.system", "builtins.print", f"{__name__}.recorded", f"{__name__}.BODIES"):
        rebuilt = rebuild_exception(CallFailure(type=name, message="echo hi"))
        assert type(rebuilt) is RecordedDependencyError


# --- interruptions (issue 13, item 5) ---------------------------------------------------


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_recorded_interruption_replays_as_an_exception_and_a_failed_run(
    tmp_path: Path, interruption: type[BaseException]
) -> None:
    """A recorded KeyboardInterrupt/SystemExit/GeneratorExit replays as RecordedInterruption
    (an Exception: the test session goes on) and the replayed run is failed."""
    tool = raising_tool("interrupted", lambda: interruption("stop"))
    bundle = recorded(tmp_path / "i.sftrace", tool, catch=BaseException)
    assert load_bundle(bundle).status == "failed"
    result = replay_run(bundle, tool)
    assert isinstance(result.error, RecordedInterruption)
    assert isinstance(result.error, Exception)
    assert result.error.type_name == interruption.__name__
    assert (result.status, result.reproduced_failure, result.divergence) == ("failed", True, None)
    assert BODIES == []


def test_crafted_bundle_with_a_non_exception_base_exception_is_an_interruption() -> None:
    """Any recorded class outside Exception (pytest's own outcomes, say) is an interruption."""
    name = "_pytest.outcomes.OutcomeException"
    rebuilt = rebuild_exception(CallFailure(type=name, message="bye"))
    assert isinstance(rebuilt, RecordedInterruption)
    rebuilt = rebuild_exception(CallFailure(type="KeyboardInterrupt", message="", builtin=True))
    assert isinstance(rebuilt, RecordedInterruption)


def test_recorded_cancellation_stays_a_cancelled_error(tmp_path: Path) -> None:
    """A recorded asyncio.CancelledError replays as CancelledError (agents handle it)."""

    @trace_tool(name="slow")
    async def slow(query: str) -> str:
        BODIES.append("slow")
        raise asyncio.CancelledError("timed out")

    async def agent(query: str) -> str:
        try:
            return await slow(query)
        except asyncio.CancelledError:
            return "cancelled"

    path = tmp_path / "c.sftrace"

    async def run() -> None:
        async with record("agent", output=path, run_input="q") as session:
            session.set_output(await agent("q"))

    asyncio.run(run())
    BODIES.clear()
    result = replay_run(path, agent)
    assert (result.status, result.output, result.divergence) == ("completed", "cancelled", None)
    assert BODIES == []


def test_a_real_keyboard_interrupt_of_the_replaying_process_propagates(tmp_path: Path) -> None:
    """Only recorded interruptions are tamed: the replaying process's own Ctrl-C is not."""
    bundle = recorded(tmp_path / "ok.sftrace", handles_it)

    def interrupted(query: str) -> str:
        handles_it(query)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replay_run(bundle, interrupted)


def test_lookup_never_triggers_a_lazy_module_getattr() -> None:
    """A recorded name is looked up in what imported modules hold: a package's lazy
    ``__getattr__`` (which could import a module the bundle names) is never called."""
    asked: list[str] = []
    module = types.ModuleType("lazy_errors")

    def lazy(name: str) -> Any:
        asked.append(name)
        raise AttributeError(name)

    module.__getattr__ = lazy  # type: ignore[method-assign]
    sys.modules[module.__name__] = module
    try:
        rebuilt = rebuild_exception(CallFailure(type="lazy_errors.Thing", message="m"))
    finally:
        del sys.modules[module.__name__]
    assert type(rebuilt) is RecordedDependencyError
    assert asked == []


def test_a_replay_that_diverged_reproduced_no_failure(tmp_path: Path) -> None:
    """The agent turns whatever its tool raised into the recorded failure: when the
    replay diverged (the tool's input changed), that failure was still 'reproduced'."""
    looked_up = raising_tool("lookup", lambda: QuotaExceeded("monthly quota of 100 used"))

    def agent(query: str) -> str:
        try:
            return looked_up(query)
        except Exception:
            raise RuntimeError("the agent gave up") from None

    bundle = recorded(tmp_path / "g.sftrace", agent, catch=RuntimeError)
    same = replay_run(bundle, agent)
    assert (same.status, same.reproduced_failure, same.reproduced) == ("failed", True, True)
    changed = replay_run(bundle, lambda query: agent(query + "!"))
    assert changed.status == "diverged"
    assert (changed.reproduced_failure, changed.reproduced) == (False, False)
