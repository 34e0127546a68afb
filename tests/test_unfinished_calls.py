"""A run that ends while calls it handed to a thread are still running: they end after
the run and its bundle. The recording says so (a warning naming them, and
``sftrace.unfinished`` on the run span), and a replay reaching such a call says why the
bundle lacks it."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from sftrace import ReplayExhaustedError, load_bundle, record, replay, trace_tool
from sftrace._model import attributes as A

ENTERED = threading.Event()
RELEASE = threading.Event()


@trace_tool
def slow_fetch(i: int) -> str:
    ENTERED.set()
    RELEASE.wait(10)
    return f"doc{i}"


@trace_tool
def quick(i: int) -> int:
    return i


def agent(pool: ThreadPoolExecutor) -> Future[str]:
    quick(1)
    future = pool.submit(slow_fetch, 7)
    ENTERED.wait(10)  # the call has started; the agent returns without waiting for it
    return future


def test_a_call_still_running_when_the_run_ends_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ENTERED.clear()
    RELEASE.clear()
    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.WARNING, logger="sftrace"):
        with record("late", output=tmp_path / "l.sftrace"):
            future = agent(pool)
        RELEASE.set()
        assert future.result(10) == "doc7"
    warnings = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert len(warnings) == 1
    assert "1 of its calls were still running: tool slow_fetch (call 2)" in warnings[0]
    assert "executor.shutdown(wait=True)" in warnings[0]
    bundle = load_bundle(tmp_path / "l.sftrace")
    assert [call.name for call in bundle.calls] == ["quick"]
    [unfinished] = [
        item["value"]["stringValue"]
        for item in bundle.run_span["attributes"]
        if item["key"] == A.UNFINISHED
    ]
    assert orjson.loads(unfinished) == [{"kind": "tool", "name": "slow_fetch", "seq": 2}]
    with replay(bundle):
        quick(1)
        with pytest.raises(ReplayExhaustedError) as caught:
            slow_fetch(7)  # reached inside the replayed run this time
    assert "the recorded run ended while its call 2 (tool slow_fetch) was still running" in str(
        caught.value
    )


def test_a_run_that_waits_for_its_calls_leaves_none_unfinished(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ENTERED.clear()
    RELEASE.set()
    with (
        ThreadPoolExecutor(1) as pool,
        caplog.at_level(logging.WARNING, logger="sftrace"),
        record("waits", output=tmp_path / "w.sftrace"),
    ):
        assert agent(pool).result(10) == "doc7"
    assert not [r for r in caplog.records if "still running" in r.getMessage()]
    bundle = load_bundle(tmp_path / "w.sftrace")
    assert [call.name for call in bundle.calls] == ["quick", "slow_fetch"]
    assert A.UNFINISHED not in {item["key"] for item in bundle.run_span["attributes"]}


def test_the_same_work_left_running_by_every_run_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server whose every request leaves the same work running would log the warning on
    every request: after the first, it is said at INFO level."""
    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.INFO, logger="sftrace"):
        for index in range(3):
            ENTERED.clear()
            RELEASE.clear()
            with record("server-like", output=tmp_path / f"s{index}.sftrace"):
                future = agent(pool)
            RELEASE.set()
            future.result(10)
    said = [r for r in caplog.records if "still running" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.INFO, logging.INFO]
