"""sftrace versions of the agents ``scripts/make_peer_fixtures.py`` records with the peers.

Same tool names, same inputs, same logic: the converted fixtures must replay them. The
tool bodies must never run during a replay, so they fail loudly if they do.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sftrace import llm_request, trace_tool

BODIES_RUN: list[str] = []


def _real(name: str) -> Any:
    BODIES_RUN.append(name)
    raise AssertionError(f"the real {name} ran during a replay")


# --- the stepfork trip planner ------------------------------------------------------


@trace_tool(name="convert_currency")
def convert_currency(amount: float, currency: str = "EUR") -> dict[str, Any]:
    return _real("convert_currency")  # type: ignore[no-any-return]


@trace_tool(name="search_flights")
def search_flights(destination: str, max_price: int = 500) -> dict[str, Any]:
    convert_currency(420.0)  # nested, as recorded (not reached: this body is frozen)
    return _real("search_flights")  # type: ignore[no-any-return]


@trace_tool(name="book_flight")
def book_flight(flight_id: str) -> dict[str, Any]:
    return _real("book_flight")  # type: ignore[no-any-return]


def _no_llm() -> Any:
    return _real("llm")


def plan_trip(request: dict[str, Any]) -> dict[str, Any]:
    found = search_flights(request["destination"])
    content = "Pick one of " + ", ".join(flight["id"] for flight in found["flights"])
    choice = llm_request(
        provider="openai",
        model="gpt-4o-mini",
        input={"messages": [{"role": "user", "content": content}]},
        call=_no_llm,
    )
    booked = True
    try:
        book_flight(choice["choice"])
    except TimeoutError:
        booked = False
    summary = llm_request(
        provider="openai",
        model="gpt-4o-mini",
        input={"messages": [{"role": "user", "content": "Summarise the plan"}]},
        call=_no_llm,
    )
    with contextlib.suppress(ConnectionError):
        llm_request(
            provider="anthropic",
            model="claude-3-5-haiku",
            input={"messages": [{"role": "user", "content": "Translate the summary"}]},
            call=_no_llm,
        )
    return {"flight": choice["choice"], "booked": booked, "summary": summary["text"]}


def plan_trip_failing(request: dict[str, Any]) -> None:
    found = search_flights(request["destination"], max_price=100)
    raise ValueError(f"no flight under 100 among {len(found['flights'])}")


# --- the agenttrace support agent ---------------------------------------------------


@trace_tool
async def get_order(order_id: str, include_items: bool = False) -> dict[str, Any]:
    return _real("get_order")  # type: ignore[no-any-return]


@trace_tool(name="refund_policy")
def refund_policy(days_since_delivery: int) -> dict[str, Any]:
    return _real("refund_policy")  # type: ignore[no-any-return]


@trace_tool
def notify(channel: str, text: str) -> None:
    _real("notify")


@trace_tool
def lookup_faq(topic: str) -> dict[str, Any]:
    return _real("lookup_faq")  # type: ignore[no-any-return]


async def _support(request: dict[str, Any]) -> dict[str, Any]:
    orders = await asyncio.gather(get_order("A-1"), get_order("A-2", include_items=True))
    policy = refund_policy(45)
    with contextlib.suppress(ConnectionError):
        notify("sms", "Your refund was reviewed")
    lookup_faq("refunds")
    return {"orders": [order["status"] for order in orders], "refund": policy}


def run_agent(request: dict[str, Any]) -> dict[str, Any]:
    if "order_id" in request:  # the recorded crash
        asyncio.run(get_order(request["order_id"]))
        raise RuntimeError("lost the conversation state")
    return asyncio.run(_support(request))


def run_agent_regressed(request: dict[str, Any]) -> dict[str, Any]:
    """A later version that skips the refund policy check."""
    if "order_id" in request:
        return run_agent(request)

    async def support() -> dict[str, Any]:
        orders = await asyncio.gather(get_order("A-1"), get_order("A-2", include_items=True))
        return {"orders": [order["status"] for order in orders], "refund": {"eligible": False}}

    return asyncio.run(support())
