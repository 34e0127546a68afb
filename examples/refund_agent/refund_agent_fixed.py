"""The refund agent, fixed: the refund policy is enforced in code, not left to the model.

Same tools and model as ``refund_agent.py``; only ``handle`` changes. ``handle_with``
takes the policy as a function, so ``refund_agent_checked.py`` can enforce it another way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refund_agent import REFUND_WINDOW_DAYS, decide, issue_refund, lookup_order


def within_refund_window(order: dict[str, Any]) -> bool:
    """The refund policy: refunds only within ``REFUND_WINDOW_DAYS`` of delivery."""
    return bool(order["delivered_days_ago"] <= REFUND_WINDOW_DAYS)


def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"order_id": ..., "message": ...}`` -> the outcome."""
    return handle_with(request, within_refund_window)


def handle_with(
    request: dict[str, str], refund_allowed: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """``handle``, with ``refund_allowed(order)`` asked before any refund the model decides."""
    order = lookup_order(request["order_id"])
    decision = decide(request, order)
    if decision["action"] == "refund" and not refund_allowed(order):
        # The fix: never refund outside the window, whatever the model says.
        return {
            "decision": "denied",
            "order_id": order["order_id"],
            "reason": "outside_refund_window",
            "reply": f"Sorry, order {order['order_id']} was delivered "
            f"{order['delivered_days_ago']} days ago; refunds are possible within "
            f"{REFUND_WINDOW_DAYS} days of delivery.",
        }
    if decision["action"] == "refund":
        refund = issue_refund(order["order_id"], decision["amount_eur"])
        return {
            "decision": "refunded",
            "order_id": order["order_id"],
            "refund_id": refund["refund_id"],
            "reply": decision["reply"],
        }
    return {"decision": "escalated", "order_id": order["order_id"], "reply": decision["reply"]}
