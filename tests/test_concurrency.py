"""Concurrency: many tasks in one recording, many recordings at once.

Every span must keep the right parent and nothing may be lost or land in the wrong
bundle. Barriers make the work overlap for sure: every task or thread is inside its
calls at the same moment.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from pathlib import Path
from typing import Any

from sftrace import Bundle, load_bundle, record, trace_tool

TASKS = 200
THREADS = 8
STEPS = 20


def _check_tree(bundle: Bundle, outer: str, inner: str, owner: str) -> None:
    """Each outer call hangs off the run span, each inner call off the outer call with the
    same owner; sequence numbers are unique and have no gaps."""
    run_span_id = bundle.run_span["spanId"]
    outers = {c.span_id: c for c in bundle.calls if c.name == outer}
    for call in outers.values():
        assert call.parent_span_id == run_span_id, call
    for call in bundle.calls:
        if call.name == inner:
            parent = outers[str(call.parent_span_id)]
            assert parent.input[owner] == call.input[owner], (parent, call)
    assert [c.seq for c in bundle.calls] == list(range(1, len(bundle.calls) + 1))
    assert len(bundle.spans) == len(bundle.calls) + 1
    assert all(c.error is None for c in bundle.calls)


def test_200_concurrent_tasks_with_nested_calls_keep_their_parents(tmp_path: Path) -> None:
    """200 asyncio tasks, all inside their outer call at once, each making nested calls:
    every call is recorded once, under the right parent, with the right result."""
    barrier = asyncio.Barrier(TASKS)

    @trace_tool
    async def inner(task: int, step: int) -> int:
        await asyncio.sleep(0)  # let the other tasks run in between
        return task * 100 + step

    @trace_tool
    async def outer(task: int) -> list[int]:
        await barrier.wait()  # all 200 outer spans are open now
        return [await inner(task, step) for step in range(3)]

    async def main() -> list[list[int]]:
        async with record("swarm", output=tmp_path / "swarm.sftrace") as session:
            results = await asyncio.gather(*(outer(task) for task in range(TASKS)))
            session.set_output(len(results))
        return results

    results = asyncio.run(main())
    assert results == [[t * 100 + s for s in range(3)] for t in range(TASKS)]
    bundle = load_bundle(tmp_path / "swarm.sftrace", verify_integrity=True)
    assert len(bundle.calls) == TASKS * 4
    _check_tree(bundle, "outer", "inner", "task")
    outputs = {c.input["task"]: c.output for c in bundle.calls if c.name == "outer"}
    assert outputs == dict(enumerate(results))


@trace_tool
def step_tool(agent: int, step: int) -> dict[str, int]:
    return {"agent": agent, "step": step, "value": helper(agent, step)}


@trace_tool
def helper(agent: int, step: int) -> int:
    return agent * 1000 + step


def test_8_threads_each_recording_its_own_run_never_mix(tmp_path: Path) -> None:
    """8 threads record 8 runs at the same time (calls also made from a worker thread
    with the copied context): each bundle holds exactly its own run's calls."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(agent: int) -> None:
        try:
            with record(f"agent-{agent}", output=tmp_path / f"run-{agent}.sftrace") as session:
                barrier.wait()  # every run is open before any call is made
                for step in range(STEPS):
                    step_tool(agent, step)
                # A call from a pool thread that copied this thread's context.
                context = contextvars.copy_context()
                with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                    pool.submit(context.run, step_tool, agent, STEPS).result()
                barrier.wait()  # and no run ends before every run made its calls
                session.set_output({"agent": agent})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(agent,)) for agent in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    trace_ids = set()
    for agent in range(THREADS):
        bundle = load_bundle(tmp_path / f"run-{agent}.sftrace", verify_integrity=True)
        assert bundle.agent_name == f"agent-{agent}"
        assert bundle.output == {"agent": agent}
        assert len(bundle.calls) == (STEPS + 1) * 2
        assert {c.input["agent"] for c in bundle.calls} == {agent}
        steps = sorted(c.input["step"] for c in bundle.calls if c.name == "step_tool")
        assert steps == list(range(STEPS + 1))
        _check_tree(bundle, "step_tool", "helper", "agent")
        trace_ids.add(bundle.manifest.trace_id)
    assert len(trace_ids) == THREADS


def test_concurrent_runs_in_one_event_loop_never_mix(tmp_path: Path) -> None:
    """Several runs recorded by concurrent tasks of one event loop stay apart."""

    @trace_tool
    async def work(run: int, step: int) -> int:
        await asyncio.sleep(0)
        return run + step

    async def one(run: int, barrier: asyncio.Barrier) -> Any:
        async with record(f"loop-{run}", output=tmp_path / f"loop-{run}.sftrace"):
            await barrier.wait()
            return [await work(run, step) for step in range(10)]

    async def main() -> None:
        barrier = asyncio.Barrier(5)
        await asyncio.gather(*(one(run, barrier) for run in range(5)))

    asyncio.run(main())
    for run in range(5):
        calls = load_bundle(tmp_path / f"loop-{run}.sftrace").calls
        assert [(c.input["run"], c.input["step"]) for c in calls] == [
            (run, step) for step in range(10)
        ]
