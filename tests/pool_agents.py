"""Agents that submit tool calls to a shared thread pool, for
tests/test_strict_concurrency.py.

Recording (``BARRIER`` set): every task waits inside its tool for all the others, so the
recording shows the tools' calls overlapping. Replay (``ORDER`` set): each task waits until
the task before it in ``ORDER`` has finished, which forces the order the replay reaches the
calls in (a scheduler may give any). ``STOCK_ORDER``: the order in which the ``price``
calls, all running at once (``BARRIER``), call ``stock``. ``SYMBOLS`` and ``SWAP_PLAN``
change the agent, to check that a real change still diverges.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

from sftrace import llm_request, trace_tool

POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4)
SYMBOLS: tuple[str, ...] = ("A", "B", "C", "D")
ORDER: tuple[str, ...] | None = None
STOCK_ORDER: tuple[str, ...] | None = None  # the order the price calls call stock in
_STOCK_DONE: dict[str, threading.Event] = {}
BARRIER: threading.Barrier | None = None
SWAP_PLAN = False  # the two sequential calls before the pool, in the other order
_LOCAL = threading.local()
STOCK = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5, "X": 9}


def reset() -> None:
    global SYMBOLS, ORDER, STOCK_ORDER, BARRIER, SWAP_PLAN
    SYMBOLS, ORDER, STOCK_ORDER, BARRIER, SWAP_PLAN = ("A", "B", "C", "D"), None, None, None, False


def recording() -> None:
    """Set up a recording whose pool tasks all overlap."""
    global BARRIER
    BARRIER = threading.Barrier(len(SYMBOLS))


def _meet() -> None:
    if BARRIER is not None:
        BARRIER.wait(timeout=10)


@trace_tool(name="quote")
def quote(symbol: str) -> int:
    _meet()
    return STOCK[symbol] * 100


@trace_tool(name="stock")
def stock(warehouse: str) -> int:
    # The same input from every task: only the call it is made inside tells which
    # recorded answer is this task's.
    return STOCK[_LOCAL.symbol]


@trace_tool(name="price", replay_policy="derived")
def price(symbol: str) -> int:
    _LOCAL.symbol = symbol
    _meet()
    order = STOCK_ORDER
    if order is not None and order.index(symbol):
        _STOCK_DONE[order[order.index(symbol) - 1]].wait(timeout=10)
    try:
        return stock("main") * 10
    finally:
        _STOCK_DONE[symbol].set()


@trace_tool(name="plan")
def plan(task: str) -> str:
    return f"plan for {task}"


@trace_tool(name="check")
def check(task: str) -> str:
    return f"checked {task}"


def _pooled(tool: Any) -> list[int]:
    symbols = SYMBOLS
    order = ORDER
    _STOCK_DONE.clear()
    _STOCK_DONE.update({symbol: threading.Event() for symbol in symbols})
    done = {symbol: threading.Event() for symbol in symbols}

    def work(symbol: str) -> int:
        if order is not None and symbol in order and order.index(symbol):
            # the timeout is only a guard: the task before always sets it
            done[order[order.index(symbol) - 1]].wait(timeout=10)
        try:
            return int(tool(symbol))
        finally:
            done[symbol].set()

    futures = [POOL.submit(work, symbol) for symbol in symbols]
    return [future.result() for future in futures]


def _run(task: str, tool: Any) -> dict[str, Any]:
    steps = (check, plan) if SWAP_PLAN else (plan, check)
    for step in steps:
        step(task)
    values = _pooled(tool)
    summary = llm_request(
        provider="openai", model="m", input={"task": task, "values": values}, call=lambda: "ok"
    )
    return {"values": values, "summary": summary}


def run_quotes(task: str) -> dict[str, Any]:
    """Four ``quote`` calls in the pool, between sequential calls."""
    return _run(task, quote)


def run_prices(task: str) -> dict[str, Any]:
    """Four ``price`` calls in the pool, each calling ``stock`` inside it."""
    return _run(task, price)
