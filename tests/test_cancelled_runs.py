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
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

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


def test_async_runs_hand_their_disk_work_to_kept_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating the journal and finishing the bundle go to a few kept threads, not to a
    thread started for each (Thread.start() made the event loop wait for the new thread
    twice a run, which on a busy server cost about as much as the rest of the run)."""
    started: list[str] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)

    async def main() -> None:
        async def one(index: int) -> None:
            async with record("svc", output=tmp_path / f"run{index}.sftrace"):
                await lookup(f"z{index}")

        for batch in range(4):
            await asyncio.gather(*(one(batch * 10 + i) for i in range(10)))

    asyncio.run(main())
    assert len(list(tmp_path.glob("*.sftrace"))) == 40
    assert len(started) <= 4, started  # (none when an earlier test started them)
    assert all(name.startswith("sftrace-bundle") for name in started)


_EXITING = """
import asyncio, sys
from sftrace import record, trace_tool

@trace_tool
async def lookup(query: str) -> str:
    await asyncio.sleep(0)
    return query

async def run(path):
    async with record("svc", output=path):
        await lookup("q")
        await asyncio.sleep(10)

async def main():
    task = asyncio.create_task(run(sys.argv[1]))
    await asyncio.sleep(0.2)
    for _ in range(2):  # cancelled, and again while the bundle is being finished
        task.cancel()
        await asyncio.sleep(0)
    # the process ends now, the bundle still being finished

asyncio.run(main())
"""


def test_the_process_finishes_a_bundle_still_being_written_before_it_exits(
    tmp_path: Path,
) -> None:
    script = tmp_path / "exiting.py"
    script.write_text(_EXITING)
    path = tmp_path / "last.sftrace"
    done = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    bundle = load_bundle(path)
    assert bundle.status == "failed"
    assert [call.name for call in bundle.calls] == ["lookup"]
    assert list(tmp_path.glob(f".*{PARTIAL_SUFFIX}")) == []
