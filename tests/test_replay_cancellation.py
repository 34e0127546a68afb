"""Calls cancelled from outside (a timeout, ``task.cancel()``) replay as they were recorded:
the replay waits until the agent's own code cancels the call, so ``wait_for`` raises
``TimeoutError`` again; an agent that no longer cancels diverges within a bound; and a
``CancelledError`` the entrypoint ends with is a result, never raised by ``replay_run``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sftrace import areplay_run, load_bundle, record, replay_run, trace_tool
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._record import cancellation
from sftrace._record.cancellation import wait_bound

BODIES: list[str] = []
TIMEOUT = 0.05  # the agents' timeout: the recorded call lasts about this long


@pytest.fixture(autouse=True)
def _short_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay waits at most max(2 x recorded duration, duration + slack): a short slack
    keeps the tests of agents that no longer cancel fast."""
    BODIES.clear()
    monkeypatch.setattr(cancellation, "MIN_SLACK_S", 0.2)


@trace_tool(name="slow_search")
async def slow_search(query: str) -> list[str]:
    BODIES.append(query)
    await asyncio.sleep(5)
    return [query]


async def wait_for_agent(query: str) -> str:
    try:
        return str(await asyncio.wait_for(slow_search(query), timeout=TIMEOUT))
    except TimeoutError:
        return "timeout"


async def timeout_agent(query: str) -> str:
    try:
        async with asyncio.timeout(TIMEOUT):
            return str(await slow_search(query))
    except TimeoutError:
        return "timeout"


async def cancelling_agent(query: str) -> str:
    task = asyncio.create_task(slow_search(query))
    await asyncio.sleep(TIMEOUT)
    task.cancel()
    try:
        await task
        return "finished"
    except asyncio.CancelledError:
        return "cancelled"


async def patient_agent(query: str) -> str:
    """Changed: its timeout is now far longer than the recorded call lasted."""
    try:
        return str(await asyncio.wait_for(slow_search(query), timeout=30))
    except TimeoutError:
        return "timeout"


async def no_longer_cancelling_agent(query: str) -> str:
    """Changed: it awaits the task it used to cancel."""
    task = asyncio.create_task(slow_search(query))
    await asyncio.sleep(TIMEOUT)
    try:
        await task
        return "finished"
    except asyncio.CancelledError:
        return "cancelled"


def recorded(path: Path, agent: Callable[[str], Awaitable[str]]) -> Path:
    async def run() -> None:
        async with record("agent", output=path, run_input="q") as session:
            session.set_output(await agent("q"))

    asyncio.run(run())
    BODIES.clear()
    return path


@pytest.mark.parametrize(
    ("agent", "output"),
    [(wait_for_agent, "timeout"), (timeout_agent, "timeout"), (cancelling_agent, "cancelled")],
    ids=["wait_for", "asyncio.timeout", "task.cancel"],
)
def test_a_call_cancelled_from_outside_replays_as_recorded(
    tmp_path: Path, agent: Callable[[str], Awaitable[str]], output: str
) -> None:
    """The replay waits for the agent's own timeout or cancel(): wait_for raises
    TimeoutError again, not CancelledError; the unchanged agent reproduces."""
    bundle = recorded(tmp_path / "c.sftrace", agent)
    call = load_bundle(bundle).calls[0]
    assert call.error is not None
    assert call.error.cancelled
    assert not call.error.cancelled_within
    assert load_bundle(bundle).output == output
    started = time.monotonic()
    result = replay_run(bundle, agent)
    elapsed = time.monotonic() - started
    assert (result.status, result.output, result.divergence) == ("completed", output, None)
    assert result.reproduced
    assert BODIES == []
    assert [m.action for m in result.matched] == ["substituted"]
    assert TIMEOUT * 0.8 <= elapsed < wait_bound(call)  # the agent's timer fired
    assert result.calls[0].error is not None
    assert result.calls[0].error.cancelled


def test_areplay_run_replays_a_timed_out_call_in_the_callers_loop(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "c.sftrace", wait_for_agent)
    result = asyncio.run(areplay_run(bundle, wait_for_agent))
    assert (result.status, result.output, result.reproduced) == ("completed", "timeout", True)


@pytest.mark.parametrize(
    ("agent", "changed"),
    [(wait_for_agent, patient_agent), (cancelling_agent, no_longer_cancelling_agent)],
    ids=["no-longer-times-out", "no-longer-cancels"],
)
def test_an_agent_that_no_longer_cancels_diverges_within_the_bound(
    tmp_path: Path,
    agent: Callable[[str], Awaitable[str]],
    changed: Callable[[str], Awaitable[str]],
) -> None:
    """Nothing cancels the call: past the bound the replay diverges, naming the call, and
    the call raises the recorded CancelledError; it never hangs, never raises."""
    bundle = recorded(tmp_path / "c.sftrace", agent)
    bound = wait_bound(load_bundle(bundle).calls[0])
    started = time.monotonic()
    result = replay_run(bundle, changed)
    elapsed = time.monotonic() - started
    assert bound <= elapsed < bound + 2
    assert result.status == "diverged"
    assert not result.reproduced
    assert result.divergence is not None
    message = str(result.divergence)
    assert "call 1 (tool slow_search) was cancelled from outside" in message
    assert "did not cancel it within" in message
    assert BODIES == []


def test_a_cancellation_the_call_raised_itself_is_raised_at_once(tmp_path: Path) -> None:
    """Nothing outside cancelled it: recorded as such, and replayed without waiting."""

    @trace_tool(name="gives_up")
    async def gives_up(query: str) -> str:
        raise asyncio.CancelledError("gave up")

    async def agent(query: str) -> str:
        try:
            return await gives_up(query)
        except asyncio.CancelledError:
            return "cancelled"

    bundle = recorded(tmp_path / "w.sftrace", agent)
    call = load_bundle(bundle).calls[0]
    assert call.error is not None
    assert call.error.cancelled_within
    assert call.attributes[A.CANCELLED_WITHIN] is True
    started = time.monotonic()
    result = replay_run(bundle, agent)
    assert time.monotonic() - started < 0.2
    assert (result.status, result.output, result.divergence) == ("completed", "cancelled", None)


def test_the_bound_is_twice_the_recorded_duration_and_at_least_it_plus_the_slack() -> None:
    def lasting(seconds: float) -> Call:
        return Call(
            seq=1,
            kind="tool",
            name="t",
            provider=None,
            input_json="{}",
            output_json=None,
            error=None,
            policy="frozen",
            span_id="1",
            parent_span_id=None,
            start_time_ns=10**9,
            end_time_ns=10**9 + int(seconds * 1e9),
        )

    assert wait_bound(lasting(0.05)) == pytest.approx(0.25)  # 0.05 + 0.2 (the test's slack)
    assert wait_bound(lasting(3.0)) == pytest.approx(6.0)


# --- replay_run never raises the entrypoint's CancelledError -------------------------


def raises_cancelled(query: str) -> str:
    raise asyncio.CancelledError("the agent's own")


async def araises_cancelled(query: str) -> str:
    await asyncio.sleep(0)
    raise asyncio.CancelledError("the agent's own")


@pytest.mark.parametrize("entrypoint", [raises_cancelled, araises_cancelled])
def test_replay_run_returns_a_cancelled_entrypoint_as_a_failed_result(
    tmp_path: Path, entrypoint: Callable[[str], Any]
) -> None:
    bundle = recorded(tmp_path / "c.sftrace", wait_for_agent)
    result = replay_run(bundle, entrypoint)
    assert result.status == "failed"
    assert isinstance(result.error, asyncio.CancelledError)
    assert not result.reproduced


def test_areplay_run_returns_the_agents_own_cancelled_error(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "c.sftrace", wait_for_agent)
    result = asyncio.run(areplay_run(bundle, araises_cancelled))
    assert result.status == "failed"
    assert isinstance(result.error, asyncio.CancelledError)


def test_areplay_run_lets_the_unchanged_agents_recorded_cancellation_through(
    tmp_path: Path,
) -> None:
    """An agent that let the recorded cancellation end the run: the replay says so."""

    async def lets_it_through(query: str) -> str:
        task = asyncio.create_task(slow_search(query))
        await asyncio.sleep(TIMEOUT)
        task.cancel()
        return str(await task)

    bundle = tmp_path / "c.sftrace"

    async def run() -> None:
        async with record("agent", output=bundle, run_input="q") as session:
            session.set_output(await lets_it_through("q"))

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())
    assert load_bundle(bundle).status == "failed"
    result = asyncio.run(areplay_run(bundle, lets_it_through))
    assert result.status == "failed"
    assert isinstance(result.error, asyncio.CancelledError)
    assert result.reproduced_failure


def test_a_real_cancellation_of_the_task_awaiting_areplay_run_propagates(tmp_path: Path) -> None:
    """The caller's own cancel() (or a timeout around areplay_run) is not the agent's."""
    bundle = recorded(tmp_path / "c.sftrace", wait_for_agent)

    async def slow_agent(query: str) -> str:
        await asyncio.sleep(30)
        return "late"

    async def caller() -> None:
        task = asyncio.create_task(areplay_run(bundle, slow_agent))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.02):
                await areplay_run(bundle, slow_agent)

    asyncio.run(caller())
