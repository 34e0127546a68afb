"""An ``async with record()`` block cancelled while it ends still writes its bundle.

A server cancels a request's task when the client goes away (Starlette's streaming
responses, anyio cancel scopes, which cancel again at every await; a task cancelled
twice). Finishing the bundle ran in ``asyncio.to_thread``, whose queued job a second
cancellation dropped: the run was never finished, its journal stayed locked and its file
open for the life of the process, and nothing was said.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import anyio

import sftrace
from sftrace import load_bundle, record, trace_tool
from sftrace._bundle.format import PARTIAL_SUFFIX


@trace_tool
async def lookup(query: str) -> str:
    await asyncio.sleep(0)
    return query


async def scoped(directory: Path, index: int) -> None:
    with anyio.move_on_after(0.2):  # a request timeout, a client gone
        async with record("svc", output=directory / f"scoped{index}.sftrace"):
            await lookup(f"x{index}")
            await asyncio.sleep(10)


async def plain(directory: Path, index: int) -> None:
    async with record("svc", output=directory / f"plain{index}.sftrace"):
        await lookup(f"y{index}")
        await asyncio.sleep(10)


def test_cancelled_runs_finish_their_bundles_and_leave_nothing_open(tmp_path: Path) -> None:
    async def main() -> None:
        files = len(os.listdir("/proc/self/fd"))
        await asyncio.gather(*(scoped(tmp_path, i) for i in range(10)))
        tasks = [asyncio.create_task(plain(tmp_path, i)) for i in range(10)]
        await asyncio.sleep(0.2)
        for _ in range(2):  # cancelled, and cancelled again while it ends
            for task in tasks:
                task.cancel()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(200):  # the bundles are finished in threads of their own
            if len(list(tmp_path.glob("*.sftrace"))) == 20:
                break
            await asyncio.sleep(0.02)
        assert len(os.listdir("/proc/self/fd")) <= files
        # the process lives on, as a server does: nothing is left for `sftrace recover`
        assert list(tmp_path.glob(f".*{PARTIAL_SUFFIX}")) == []

    asyncio.run(main())
    bundles = sorted(tmp_path.glob("*.sftrace"))
    assert len(bundles) == 20
    for path in bundles:
        bundle = load_bundle(path)
        assert bundle.status == "failed"
        assert bundle.failure is not None
        assert bundle.failure.type == "asyncio.exceptions.CancelledError"
        assert [call.name for call in bundle.calls] == ["lookup"]
        assert sftrace.validate_bundle(path) == []
