"""The refund agent, fixed: the refund policy is enforced in code, not left to the model.

Same tools and model as ``refund_agent.py``; only ``handle`` changes.
"""

from __future__ import annotations

from typing import Any

from refund_agent import REFUND_WINDOW_DAYS, decide, issue_refund, lookup_order


def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"order_id": ..., "message": ...}`` -> the outcome."""
    order = lookup_order(request["order_id"])
    decision = decide(request, order)
    if decision["action"] == "refund" and order["delivered_days_ago"] > REFUND_WINDOW_DAYS:
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
