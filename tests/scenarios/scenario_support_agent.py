"""A support agent written the way users write them: asyncio with ``gather``, a tool that
calls another tool, a tool that raises the application's own exception (caught by the
agent's handler), and a final answer built from the results.

``BODIES`` counts every tool body that really ran, so a test can prove a frozen replay ran
none. ``handle`` is the recorded (buggy) version; ``handle_fixed`` is the corrected one;
``handle_changed`` asks for a different customer, a deliberate change of one argument.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sftrace import trace_tool

BODIES: list[str] = []


class QuotaExceeded(Exception):
    """The CRM's rate limit: the agent falls back to a cached profile."""

    def __init__(self, message: str, retry_after: int = 30) -> None:
        super().__init__(message, retry_after)
        self.retry_after = retry_after


@trace_tool
async def fetch_orders(customer_id: str) -> list[dict[str, Any]]:
    BODIES.append("fetch_orders")
    await asyncio.sleep(0)
    return [{"order_id": "o-1", "total": 120.0}, {"order_id": "o-2", "total": 35.5}]


@trace_tool
async def fetch_profile(customer_id: str) -> dict[str, Any]:
    BODIES.append("fetch_profile")
    raise QuotaExceeded(f"CRM quota exceeded for {customer_id}", retry_after=12)


@trace_tool
async def loyalty_points(total: float) -> int:
    BODIES.append("loyalty_points")
    return int(total // 10)


@trace_tool
async def score_customer(customer_id: str, orders: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool that calls another tool for every order."""
    BODIES.append("score_customer")
    points = [await loyalty_points(order["total"]) for order in orders]
    return {"customer_id": customer_id, "points": sum(points)}


async def _answer(customer_id: str, tier_threshold: int) -> dict[str, Any]:
    orders, profile = await asyncio.gather(
        fetch_orders(customer_id), _profile_or_cached(customer_id)
    )
    score = await score_customer(customer_id, orders)
    tier = "gold" if score["points"] >= tier_threshold else "silver"
    return {"customer": profile["name"], "tier": tier, "points": score["points"]}


async def _profile_or_cached(customer_id: str) -> dict[str, Any]:
    try:
        return await fetch_profile(customer_id)
    except QuotaExceeded as exc:
        return {"name": f"cached:{customer_id}", "retry_after": exc.retry_after}


async def handle(request: dict[str, Any]) -> dict[str, Any]:
    """The recorded version: the gold threshold is wrong (20 points instead of 10)."""
    return await _answer(request["customer_id"], tier_threshold=20)


async def handle_fixed(request: dict[str, Any]) -> dict[str, Any]:
    return await _answer(request["customer_id"], tier_threshold=10)


async def handle_changed(request: dict[str, Any]) -> dict[str, Any]:
    return await _answer(request["customer_id"] + "-x", tier_threshold=20)
