"""Work handed to threads through a copied context keeps its hand-off mark.

``asyncio.to_thread`` and context-copying pools (LangChain's ``ContextThreadPoolExecutor``,
on which LangGraph runs parallel branches, with LangGraph submitting ``ctx.run`` to it)
submit ``copy_context().run`` around the work. That copy replaced the context sftrace
attaches, and with it the mark that says a call was made directly in handed-off work:
strict replays of the unchanged agent then diverged whenever its threads raced. Here the
threads are made to finish in the opposite order on replay.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sftrace import load_bundle, record, replay_run, trace_tool
from sftrace._model import attributes as A

DELAYS: dict[str, list[float]] = {"now": [0.0, 0.03, 0.06]}


@trace_tool
def score(topic: str) -> int:
    return len(topic)


def work(index: int) -> int:
    time.sleep(DELAYS["now"][index])  # the agent's own code: runs in the replay too
    return score(f"topic-{index}")


def to_thread_agent(task: str) -> list[int]:
    async def main() -> list[int]:
        return list(await asyncio.gather(*(asyncio.to_thread(work, i) for i in range(3))))

    return asyncio.run(main())


class CopyingPool(ThreadPoolExecutor):
    """What LangChain's ContextThreadPoolExecutor does."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(
            functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        )


def graph_agent(task: str) -> list[int]:
    """What LangGraph's executor does on top of it: submit ``ctx.run`` with the work."""
    with CopyingPool(3) as pool:
        futures = [pool.submit(contextvars.copy_context().run, work, i) for i in range(3)]
        return [future.result() for future in futures]


@pytest.mark.parametrize("agent", [to_thread_agent, graph_agent])
def test_calls_in_work_run_in_a_copied_context_are_handed_off(
    agent: Callable[[str], list[int]], tmp_path: Path
) -> None:
    path = tmp_path / "handoff.sftrace"
    DELAYS["now"] = [0.0, 0.03, 0.06]
    with record("handoff", output=path, run_input="t") as session:
        session.set_output(agent("t"))
    calls = load_bundle(path).calls
    assert [call.input["topic"] for call in calls] == ["topic-0", "topic-1", "topic-2"]
    assert all(call.attributes.get(A.HANDED_OFF) is True for call in calls)
    DELAYS["now"] = [0.06, 0.03, 0.0]  # the threads now reach their calls the other way
    try:
        for _ in range(3):
            result = replay_run(path, agent)
            assert (result.status, result.divergence) == ("completed", None)
            assert result.output == [7, 7, 7]
    finally:
        DELAYS["now"] = [0.0, 0.03, 0.06]
