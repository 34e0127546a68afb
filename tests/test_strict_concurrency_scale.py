"""A strict replay of many concurrent calls reached in another order than recorded
stays linear: which recorded call a reached one may take is found from the calls whose
input matches and the earliest end among the unused calls before it, not by comparing
every pair (counted, not timed)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import sftrace
from sftrace._replay.concurrency import Concurrency

CALLS = 300


class _Gather:
    """An agent gathering ``CALLS`` tool calls: recording, every call waits inside its
    tool until all have started (so the recording shows them overlapping); replaying,
    task ``i`` reaches its call after ``CALLS - i`` turns of the loop (the reverse order)."""

    def __init__(self) -> None:
        self.recording = True
        self.started = 0
        self.all_started: asyncio.Event | None = None

    async def quote(self, symbol: str) -> int:
        self.started += 1
        assert self.all_started is not None
        if self.started == CALLS:
            self.all_started.set()
        await self.all_started.wait()
        return len(symbol)

    async def task(self, tool: Callable[[str], Awaitable[int]], number: int) -> int:
        turns = number if self.recording else CALLS - number
        for _ in range(turns):
            await asyncio.sleep(0)
        return await tool(f"s{number}")

    async def run(self, task_input: str) -> int:
        self.all_started = asyncio.Event()
        tool = sftrace.trace_tool(name="quote")(self.quote)
        results = await asyncio.gather(*(self.task(tool, n) for n in range(CALLS)))
        return sum(results)


def test_reversed_concurrent_calls_replay_without_pairwise_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _Gather()
    path = tmp_path / "gather.sftrace"
    with sftrace.record("gather", output=path, run_input="t") as session:
        session.set_output(asyncio.run(agent.run("t")))
    agent.recording = False
    compared = 0
    original = Concurrency.before

    def counted(self: Concurrency, i: int, j: int) -> bool:
        nonlocal compared
        compared += 1
        return original(self, i, j)

    monkeypatch.setattr(Concurrency, "before", counted)
    result = sftrace.replay_run(path, lambda task: asyncio.run(agent.run(task)))
    assert result.status == "completed", result.error
    assert result.reordered == CALLS - 1
    assert compared <= CALLS  # (pairwise: ~CALLS**3 / 6 before this)
