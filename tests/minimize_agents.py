"""Agents for the minimize tests.

The flight agent: ``search_flights`` returns 200 flights; the agent quotes them all to an
LLM, then prices each in euros. Flight 137's currency has no exchange rate: ``KeyError:
'XXX'``. The refund agent completes, wrongly: it refunds a final-sale order too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sftrace import allm_request, llm_request, record, trace_tool

RATES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}
BAD_FLIGHT = 137


def flights(count: int = 200) -> list[dict[str, Any]]:
    found = [
        {
            "id": f"TP{1000 + number}",
            "carrier": "TAP Air Portugal" if number % 2 else "Ryanair",
            "departs": f"2026-06-{1 + number % 28:02d}T{number % 24:02d}:15:00Z",
            "price": 80 + number,
            "currency": ("EUR", "USD", "GBP")[number % 3],
            "notes": f"{number % 5} bags included, seat selection extra, fare class Y{number}",
        }
        for number in range(count)
    ]
    found[BAD_FLIGHT]["currency"] = "XXX"
    return found


@trace_tool(name="search_flights")
def search_flights(destination: str) -> list[dict[str, Any]]:
    return flights()


@trace_tool(name="search_flights")
async def asearch_flights(destination: str) -> list[dict[str, Any]]:
    return flights()


def prompt(found: list[dict[str, Any]]) -> dict[str, Any]:
    # The prompt quotes the tool's result: it changes whenever the flights do.
    return {"messages": [{"role": "user", "content": f"Pick a flight from {json.dumps(found)}"}]}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    return {"text": "The cheapest flight is TP1000, leaving early in the morning."}


def euros(found: list[dict[str, Any]]) -> list[float]:
    return [flight["price"] * RATES[flight["currency"]] for flight in found]


def book_cheapest(destination: str) -> dict[str, Any]:
    found = search_flights(destination)
    request = prompt(found)
    reply = llm_request(
        provider="fake", model="picker-1", input=request, call=lambda: answer(request)
    )
    prices = euros(found)
    return {"advice": reply["text"], "cheapest": min(prices)}


async def abook_cheapest(destination: str) -> dict[str, Any]:
    found = await asearch_flights(destination)
    request = prompt(found)

    async def call() -> dict[str, Any]:
        return answer(request)

    reply = await allm_request(provider="fake", model="picker-1", input=request, call=call)
    prices = euros(found)
    return {"advice": reply["text"], "cheapest": min(prices)}


def record_failure(path: Path, agent: Any = book_cheapest) -> Path:
    """Record the agent's failing run (``KeyError: 'XXX'``) into ``path``."""
    try:
        with record("flight-agent", output=path, run_input="Lisbon") as session:
            result = agent("Lisbon")
            if hasattr(result, "__await__"):
                import asyncio

                result = asyncio.run(result)
            session.set_output(result)
    except KeyError:
        pass
    return path


@trace_tool(name="lookup_orders")
def lookup_orders(customer: str) -> list[dict[str, Any]]:
    return [
        {"id": f"A-{1000 + n}", "refundable": n == 7, "final_sale": n == 7, "total": 10.0 * n}
        for n in range(30)
    ]


@trace_tool(name="issue_refund")
def issue_refund(order_id: str) -> dict[str, Any]:
    return {"refunded": order_id}


def refund_all(customer: str) -> dict[str, Any]:
    """The bug: a final-sale order is refunded too."""
    orders = lookup_orders(customer)
    return {"refunded": [issue_refund(o["id"])["refunded"] for o in orders if o["refundable"]]}


def refund_fixed(customer: str) -> dict[str, Any]:
    """The fix: a final-sale order is never refunded (it reads ``final_sale``, which the
    buggy agent never did)."""
    orders = lookup_orders(customer)
    return {
        "refunded": [
            issue_refund(o["id"])["refunded"]
            for o in orders
            if o["refundable"] and not o["final_sale"]
        ]
    }


def record_refunds(path: Path) -> Path:
    with record("refunds", output=path, run_input="c-1") as session:
        session.set_output(refund_all("c-1"))
    return path


RUNS: list[str] = []


def flaky(destination: str) -> dict[str, Any]:
    """The flight agent, except that its third run (and later ones) price nothing."""
    RUNS.append(destination)
    if len(RUNS) >= 3:
        search_flights(destination)
        return {"advice": "", "cheapest": 0}
    return book_cheapest(destination)
