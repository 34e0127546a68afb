"""A process forked while a run records or replays (``multiprocessing`` with the 'fork'
start method, a ``ProcessPoolExecutor`` on Linux).

The child inherits the run, its journal's file and the exporter's state. Writing the
child's calls into the parent's journal corrupted the parent's bundle (it was written
from offsets only the parent knew): a lost run. The child now forgets the parent's runs:
its calls run as outside any run, and the parent says so once per run.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from sftrace import load_bundle, record, replay_run, trace_tool, validate_bundle

FORK = multiprocessing.get_context("fork")


@trace_tool
def square(x: int) -> int:
    return x * x


@trace_tool
def total(values: list[int]) -> int:
    return sum(values)


def pool_agent(count: int) -> int:
    with FORK.Pool(2) as pool:
        squares = pool.map(square, range(count))
    return total(squares)


def executor_agent(count: int) -> int:
    with ProcessPoolExecutor(2, mp_context=FORK) as executor:
        squares = list(executor.map(square, range(count)))
    return total(squares)


@pytest.mark.parametrize("agent", [pool_agent, executor_agent])
def test_a_run_that_forks_workers_keeps_a_valid_bundle_and_replays(
    agent: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert callable(agent)
    path = tmp_path / "fork.sftrace"
    with (
        caplog.at_level(logging.WARNING, logger="sftrace"),
        record("forks", output=path, run_input=6) as session,
    ):
        session.set_output(agent(6))
    assert validate_bundle(path) == []
    bundle = load_bundle(path)
    assert [(call.name, call.input) for call in bundle.calls] == [
        ("total", {"values": [0, 1, 4, 9, 16, 25]})
    ]
    assert bundle.output == 55
    warnings = [r.getMessage() for r in caplog.records if "forked while run" in r.getMessage()]
    assert len(warnings) == 1  # once per run, however many workers
    assert session.run_id in warnings[0]
    assert "not recorded" in warnings[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        result = replay_run(path, agent)
    assert (result.status, result.divergence, result.output) == ("completed", None, 55)
    assert any("was replaying" in r.getMessage() for r in caplog.records)


def test_a_fork_outside_any_run_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sftrace"), FORK.Pool(1) as pool:
        assert pool.map(square, [3]) == [9]
    assert not [r for r in caplog.records if "forked" in r.getMessage()]


async def _async_run(path: str) -> None:
    async with record("forked", output=path):
        square(3)


def _record_async(path: str) -> bool:
    asyncio.run(_async_run(path))
    return True


def test_a_forked_child_records_async_runs_of_its_own(tmp_path: Path) -> None:
    """Async runs hand their disk work to kept threads (``_record/session.py``); a child
    forked after the parent started them has none of them, and starts its own instead of
    waiting forever for the parent's."""
    asyncio.run(_async_run(str(tmp_path / "parent.sftrace")))  # the parent's threads run
    with FORK.Pool(1) as pool:
        child = pool.apply_async(_record_async, (str(tmp_path / "child.sftrace"),))
        assert child.get(timeout=30)
    for name in ("parent", "child"):
        assert validate_bundle(tmp_path / f"{name}.sftrace") == []
        assert [call.name for call in load_bundle(tmp_path / f"{name}.sftrace").calls] == ["square"]
