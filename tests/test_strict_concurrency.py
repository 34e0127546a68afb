"""A strict replay of an agent whose calls ran concurrently in a thread pool: the order in
which the threads reach their calls is not a divergence where the recording shows those
calls overlapping; every real change (an input, an extra or a missing call, an order
change between calls the recording shows one after the other) still diverges, naming the
call."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pool_agents as agent
import sftrace
from sftrace._model.calls import Call
from sftrace._replay.concurrency import concurrency_of

ORDERS = [("A", "B", "C", "D"), ("D", "C", "B", "A"), ("C", "A", "D", "B"), ("B", "D", "A", "C")]


def _record(tmp_path: Path, entrypoint: Callable[[str], Any], name: str) -> Path:
    path = tmp_path / f"{name}.sftrace"
    agent.reset()
    agent.recording()
    with sftrace.record(name, output=path, run_input="t") as session:
        session.set_output(entrypoint("t"))
    agent.reset()
    return path


@pytest.fixture
def quotes(tmp_path: Path) -> Iterator[Path]:
    yield _record(tmp_path, agent.run_quotes, "quotes")
    agent.reset()


@pytest.fixture
def prices(tmp_path: Path) -> Iterator[Path]:
    yield _record(tmp_path, agent.run_prices, "prices")
    agent.reset()


@pytest.mark.parametrize("order", ORDERS)
def test_any_order_of_concurrent_calls_reproduces(quotes: Path, order: tuple[str, ...]) -> None:
    agent.ORDER = order
    result, report = sftrace.replay_and_compare(quotes, agent.run_quotes)
    assert result.status == "completed", result.divergence
    assert report.verdict == "pass", report.format()
    reached = [m.recorded.input["symbol"] for m in result.matched if m.recorded.name == "quote"]
    assert reached == list(order)


@pytest.mark.parametrize("order", ORDERS)
def test_calls_inside_concurrent_calls_get_their_own_answer(
    prices: Path, order: tuple[str, ...]
) -> None:
    """Every stock call has the same input: only the price call it is made in tells
    which recorded answer is its own. The four price calls run at once, as recorded,
    and call stock in ``order``."""
    agent.recording()
    agent.STOCK_ORDER = order
    result = sftrace.replay_run(prices, agent.run_prices)
    assert result.status == "completed", result.divergence
    assert result.return_value["values"] == [10, 20, 30, 40]
    recorded_of = {m.recorded.span_id: m.recorded for m in result.matched}
    stocks = [m.recorded for m in result.matched if m.recorded.name == "stock"]
    assert len(stocks) == 4
    for call in stocks:
        assert recorded_of[str(call.parent_span_id)].output == call.output * 10


@pytest.mark.parametrize("order", ORDERS)
def test_calls_inside_concurrent_calls_compare_with_their_own_recorded_call(
    prices: Path, order: tuple[str, ...]
) -> None:
    """The four stock calls have the same input and different outputs: the comparison
    pairs each with the recorded call it was answered from, not by position."""
    agent.recording()
    agent.STOCK_ORDER = order
    result, report = sftrace.replay_and_compare(prices, agent.run_prices)
    assert result.status == "completed", result.divergence
    assert report.verdict == "pass", report.format()


def test_pool_work_recorded_one_after_another_still_comes_in_any_order(tmp_path: Path) -> None:
    """The recording's pool tasks ran one after another (each waited for the one before),
    so their times show an order; they were handed to the pool, so it was the
    scheduler's, and a replay reaching them in another order reproduces."""
    agent.reset()
    agent.ORDER = ("A", "B", "C", "D")
    path = tmp_path / "one-by-one.sftrace"
    with sftrace.record("one-by-one", output=path, run_input="t") as session:
        session.set_output(agent.run_quotes("t"))
    calls = sftrace.load_bundle(path).calls
    quotes = [c for c in calls if c.name == "quote"]
    assert all(a.end_time_ns <= b.start_time_ns for a, b in itertools.pairwise(quotes))
    handed = [c.name for c in calls if c.attributes.get("sftrace.handed_off") is True]
    assert handed == ["quote"] * 4  # not plan, check or the LLM call, made by the agent
    for order in ORDERS[1:]:
        agent.ORDER = order
        result, report = sftrace.replay_and_compare(path, agent.run_quotes)
        assert result.status == "completed", result.divergence
        assert report.verdict == "pass", report.format()
    agent.reset()


def test_calls_inside_handed_off_calls_are_not_handed_off(prices: Path) -> None:
    calls = sftrace.load_bundle(prices).calls
    handed = {c.name for c in calls if c.attributes.get("sftrace.handed_off") is True}
    assert handed == {"price"}  # stock runs inside price, on price's thread


def test_a_changed_input_among_concurrent_calls_diverges_naming_the_nearest(
    quotes: Path,
) -> None:
    agent.SYMBOLS = agent.ORDER = ("A", "B", "X", "D")
    result = sftrace.replay_run(quotes, agent.run_quotes)
    assert result.status == "diverged"
    assert isinstance(result.divergence, sftrace.ReplayMismatchError)
    text = str(result.divergence)
    assert "reached tool quote with a different input than recorded" in text
    assert '"symbol":"C"' in text.replace(" ", "")  # the recorded call it replaced
    assert "--match unordered" not in text  # a changed input: any order would not help


def test_an_extra_concurrent_call_diverges(quotes: Path) -> None:
    agent.SYMBOLS = agent.ORDER = ("A", "B", "C", "D", "E")
    result = sftrace.replay_run(quotes, agent.run_quotes)
    assert result.status == "diverged"
    assert isinstance(result.divergence, sftrace.ReplayMismatchError)
    assert "reached tool quote" in str(result.divergence)
    assert result.divergence.reached is not None
    assert result.divergence.reached["input"] == {"symbol": "E"}


def test_a_missing_concurrent_call_is_reported(quotes: Path) -> None:
    agent.SYMBOLS = agent.ORDER = ("A", "B", "D")
    result, report = sftrace.replay_and_compare(quotes, agent.run_quotes)
    assert report.verdict != "pass"
    assert result.status == "diverged"  # the summary's input lacks C's value
    assert [call.input for call in result.unused if call.name == "quote"] == [{"symbol": "C"}]


def test_swapped_sequential_calls_still_diverge(quotes: Path) -> None:
    agent.SWAP_PLAN = True
    result = sftrace.replay_run(quotes, agent.run_quotes)
    assert result.status == "diverged"
    assert isinstance(result.divergence, sftrace.ReplayMismatchError)
    assert result.divergence.call_number == 1
    text = str(result.divergence)
    assert "reached tool check, but the recording has tool plan at this position" in text
    assert "not concurrently" in text  # the recording shows plan, then check


def test_a_sequential_recording_has_no_concurrency() -> None:
    calls = [_call(1, 0, 10), _call(2, 10, 20), _call(3, 12, 15, parent="s2")]
    assert concurrency_of(calls, {}, {1: [2]}) is None


def test_overlapping_calls_are_concurrent_and_their_children_follow_them() -> None:
    calls = [_call(1, 0, 10), _call(2, 5, 20), _call(3, 6, 7, parent="s1"), _call(4, 30, 40)]
    concurrency = concurrency_of(calls, {}, {0: [2]})
    assert concurrency is not None
    assert not concurrency.before(0, 1)  # overlapped
    assert concurrency.before(0, 2)  # call 3 is made inside call 1
    assert not concurrency.before(2, 1)  # inside call 1, which overlapped call 2
    assert concurrency.before(1, 3)  # call 4 came after call 2
    assert concurrency.before(0, 3)


def _call(seq: int, start: int, end: int, parent: str | None = None) -> Call:
    return Call(seq, "tool", "t", None, "{}", "1", None, "frozen", f"s{seq}", parent, start, end)
