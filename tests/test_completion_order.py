"""Concurrent calls are answered in the order the recording shows they finished.

An agent that collects results as they finish (``asyncio.as_completed``,
``concurrent.futures.as_completed``) is deterministic when its sources' durations are
(here the slow one always finishes last), but a replay answering every call at once gave
them in the order they were reached, and the unchanged agent diverged most of the time.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pytest

from sftrace import load_bundle, record, replay_run, trace_tool
from sftrace._model.calls import Call
from sftrace._replay.completion import completion_order, wait_bound

DELAY = {"slow": 0.06, "medium": 0.03, "fast": 0.0}
SOURCES = ("slow", "medium", "fast")


@trace_tool
async def search(source: str) -> str:
    await asyncio.sleep(DELAY[source])
    return f"hits from {source}"


@trace_tool
def search_sync(source: str) -> str:
    time.sleep(DELAY[source])
    return f"hits from {source}"


@trace_tool
def summarize(text: str) -> str:
    return f"summary of {text}"


def async_agent(task: str, sources: tuple[str, ...] = SOURCES) -> str:
    async def main() -> str:
        found = [await done for done in asyncio.as_completed([search(s) for s in sources])]
        return summarize(" ; ".join(found))

    return asyncio.run(main())


def thread_agent(task: str) -> str:
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(search_sync, source) for source in SOURCES]
        found = [future.result() for future in as_completed(futures)]
    return summarize(" ; ".join(found))


def hedged_agent(task: str) -> str:
    """Ask every source, keep the first answer, cancel the rest."""

    async def main() -> str:
        tasks = [asyncio.ensure_future(search(source)) for source in SOURCES]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return summarize(next(iter(done)).result())

    return asyncio.run(main())


def _recorded(tmp_path: Path, agent: Any) -> Path:
    """A recording of ``agent`` in which its concurrent calls did run at the same time.

    A pool's thread that the scheduler starts late may begin its call after another
    thread's call ended: those two calls did not overlap, the replay does not hold one
    for the other, and which comes first is the scheduler's (a limit of the end-order
    holds, see ``_replay/completion.py``). Such a recording is made again.
    """
    for attempt in range(5):
        path = tmp_path / f"order{attempt}.sftrace"
        with record("order", output=path, run_input="t") as session:
            session.set_output(agent("t"))
        calls = load_bundle(path).calls[:-1]  # (the last one sums them up)
        if max(c.start_time_ns for c in calls) < min(c.end_time_ns for c in calls):
            return path
    raise AssertionError("the pool's calls never ran at the same time in 5 recordings")


@pytest.mark.parametrize("match", ["strict", "unordered"])
@pytest.mark.parametrize("agent", [async_agent, thread_agent, hedged_agent])
def test_results_collected_as_they_finish_come_in_the_recorded_order(
    agent: Any, match: str, tmp_path: Path
) -> None:
    path = _recorded(tmp_path, agent)
    recorded = load_bundle(path)
    for _ in range(5):
        result = replay_run(recorded, agent, match=match)
        assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)
        assert result.output == recorded.output


# Longer than DELAY, so that the margins below hold on a busy machine; the fast call
# takes long enough that the medium one has started before it ends (calls that did not
# overlap in the recording are not held for each other).
SPREAD = {"slow": 0.3, "medium": 0.15, "fast": 0.05}


@trace_tool
def search_spread(source: str) -> str:
    time.sleep(SPREAD[source])
    return f"hits from {source}"


def _handing_back_after(seconds: dict[str, float]) -> Any:
    """A thread agent whose work sleeps ``seconds[source]`` after its call returned and
    before it hands the result back to the pool: a thread the scheduler keeps waiting,
    or work that goes on after its call."""

    def work(source: str) -> str:
        found = search_spread(source)
        time.sleep(seconds.get(source, 0.0))
        return found

    def agent(task: str) -> str:
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(work, source) for source in SOURCES]
            found = [future.result() for future in as_completed(futures)]
        return summarize(" ; ".join(found))

    return agent


@pytest.mark.parametrize(
    ("late", "order"),
    [
        # The fast call's thread hands its result back 30 ms after the call ended (at 50
        # ms), still before the medium call ends (150 ms): the recording collects fast
        # first. The replay answered the medium call 5 ms after the fast one ended: it
        # must also wait for the fast work's future, or the medium result is seen first.
        (0.03, "fast ; medium ; slow"),
        # Work that goes on after its call for longer than the recorded gap between the
        # two ends (250 ms against 100): not waited for, the medium result comes first.
        (0.25, "medium ; fast ; slow"),
    ],
)
@pytest.mark.parametrize("match", ["strict", "unordered"])
def test_a_held_answer_waits_for_the_earlier_call_to_reach_the_agent_as_recorded(
    tmp_path: Path, late: float, order: str, match: str
) -> None:
    agent = _handing_back_after({"fast": late, "slow": 0.2})
    path = _recorded(tmp_path, agent)
    recorded = load_bundle(path)
    assert recorded.output == "summary of " + order.replace(" ; ", " ; hits from ").join(
        ["hits from ", ""]
    )
    for _ in range(2):
        result = replay_run(recorded, agent, match=match)
        assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)


def test_a_call_that_is_never_reached_holds_the_others_no_longer_than_the_bound(
    tmp_path: Path,
) -> None:
    """The changed agent drops the fast source: the calls that waited for it answer
    after at most their bound, and the replay says what changed."""
    path = _recorded(tmp_path, async_agent)
    started = time.monotonic()
    result = replay_run(path, lambda task: async_agent(task, ("slow", "medium")))
    elapsed = time.monotonic() - started
    assert not result.reproduced
    assert elapsed < 2 * max(wait_bound(call) for call in load_bundle(path).calls)


def _call(seq: int, start: int, end: int) -> Call:
    return Call(
        seq, "tool", f"t{seq}", None, "{}", "null", None, "frozen", f"s{seq}", None, start, end
    )


def test_waits_go_from_later_ends_to_earlier_ones_among_overlapping_calls_only() -> None:
    calls = [
        _call(1, 0, 100),  # overlaps 2 and 3, ends last
        _call(2, 10, 40),
        _call(3, 20, 30),  # ends first
        _call(4, 200, 210),  # after them all: waits for nothing
    ]
    order = completion_order(calls, {})
    assert order is not None
    assert order.waits == {0: (1, 2), 1: (2,)}
    sequential = [_call(1, 0, 10), _call(2, 20, 30), _call(3, 40, 50)]
    assert completion_order(sequential, {}) is None
    nested = [_call(1, 0, 100), _call(2, 10, 20)]  # call 2 inside call 1
    assert completion_order(nested, {0: [1]}) is None
