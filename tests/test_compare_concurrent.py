"""Comparing two recordings of an agent that hands work to threads: calls the baseline
made concurrently (overlapping, or handed to a pool) come in the scheduler's order, so
another order of them is no finding; an order the agent itself imposes still is."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sftrace import FindingCode, compare, record, trace_tool


@trace_tool
def fetch(sku: str) -> int:
    return len(sku)


@trace_tool
def summarize(note: str) -> str:
    return note


def pooled(order: list[str], *, summary_first: bool = False) -> list[int]:
    if summary_first:
        summarize("done")
    with ThreadPoolExecutor(2) as pool:
        counts = [pool.submit(fetch, sku).result() for sku in order]
    if not summary_first:
        summarize("done")
    return counts


def sequential(order: list[str]) -> list[int]:
    return [fetch(sku) for sku in order]


def recorded(path: Path, agent: object, *args: object, **kwargs: object) -> Path:
    assert callable(agent)
    with record("shop", output=path) as session:
        session.set_output(sorted(agent(*args, **kwargs)))
    return path


def order_findings(baseline: Path, candidate: Path) -> list[str]:
    report = compare(baseline, candidate)
    return [f.message for f in report.findings if f.code is FindingCode.CALL_ORDER_CHANGED]


def test_pool_work_in_another_order_is_no_finding(tmp_path: Path) -> None:
    first = recorded(tmp_path / "a.sftrace", pooled, ["A", "BB", "CCC"])
    second = recorded(tmp_path / "b.sftrace", pooled, ["CCC", "A", "BB"])
    report = compare(first, second)
    assert report.passed, report.format()


def test_a_sequential_agent_in_another_order_is_a_finding(tmp_path: Path) -> None:
    first = recorded(tmp_path / "a.sftrace", sequential, ["A", "BB", "CCC"])
    second = recorded(tmp_path / "b.sftrace", sequential, ["CCC", "A", "BB"])
    assert order_findings(first, second)


def test_a_call_moved_across_pool_work_is_a_finding(tmp_path: Path) -> None:
    first = recorded(tmp_path / "a.sftrace", pooled, ["A", "BB"])
    second = recorded(tmp_path / "b.sftrace", pooled, ["A", "BB"], summary_first=True)
    assert order_findings(first, second)
