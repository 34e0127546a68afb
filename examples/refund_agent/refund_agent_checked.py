"""The refund agent, fixed another way: a policy check (a new tool call) runs before any
refund. The recording has no such call, so its suite replays with ``on_miss = "live"``:
the new check runs for real, every recorded call is still answered from the bundle.
"""

from __future__ import annotations

from typing import Any

from refund_agent import REFUND_WINDOW_DAYS, decide, issue_refund, lookup_order

from sftrace import trace_tool


@trace_tool
def check_refund_policy(delivered_days_ago: int) -> dict[str, Any]:
    """A local, side-effect-free policy check: safe to run live in a replay."""
    return {"allowed": delivered_days_ago <= REFUND_WINDOW_DAYS}


def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"order_id": ..., "message": ...}`` -> the outcome."""
    order = lookup_order(request["order_id"])
    decision = decide(request, order)
    if (
        decision["action"] == "refund"
        and not check_refund_policy(order["delivered_days_ago"])["allowed"]
    ):
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
