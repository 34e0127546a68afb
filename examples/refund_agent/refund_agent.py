"""A small offline customer-support agent that handles refund requests.

Three tools (``lookup_order``, ``issue_refund``, ``escalate_to_human``) and a fake chat
model. The bug, as seen in production: the model approves every refund the customer asks
for, and the agent trusts it, so an order delivered 45 days ago is refunded although the
policy allows refunds within 30 days of delivery. ``refund_agent_fixed.py`` holds the fix.
"""

from __future__ import annotations

from typing import Any

from sftrace import llm_request, trace_tool

REFUND_WINDOW_DAYS = 30

# The shop's (in-memory) order database.
_ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {"item": "wireless headphones", "amount_eur": 59.0, "delivered_days_ago": 45},
    "A-1002": {"item": "phone case", "amount_eur": 12.5, "delivered_days_ago": 6},
}
# Refunds actually issued (the side effect a replay must never repeat).
REFUNDS_ISSUED: list[str] = []
# Tickets handed to the support team.
ESCALATIONS: list[str] = []


@trace_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Fetch an order from the shop's database."""
    order = _ORDERS.get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    return {"order_id": order_id, **order}


@trace_tool
def issue_refund(order_id: str, amount_eur: float) -> dict[str, Any]:
    """Refund the customer (a payment side effect)."""
    REFUNDS_ISSUED.append(order_id)
    return {"refund_id": f"R-{order_id}", "order_id": order_id, "amount_eur": amount_eur}


@trace_tool
def escalate_to_human(order_id: str, reply: str) -> dict[str, Any]:
    """Open a ticket for the support team (an in-memory stand-in)."""
    ESCALATIONS.append(order_id)
    return {"ticket_id": f"T-{order_id}", "order_id": order_id, "queue": "refunds"}


class FakeSupportModel:
    """Stands in for a chat model: offline, deterministic, and too generous."""

    model = "support-1"

    def chat(self, messages: list[dict[str, str]], order: dict[str, Any]) -> dict[str, Any]:
        # The bug: the system prompt states the 30-day policy, the model ignores it.
        return {
            "action": "refund",
            "amount_eur": order["amount_eur"],
            "reply": f"I'm sorry about your {order['item']}. I've refunded "
            f"{order['amount_eur']:.2f} EUR to your card.",
            "usage": {"prompt_tokens": 96, "completion_tokens": 31},
        }


def decide(request: dict[str, str], order: dict[str, Any]) -> dict[str, Any]:
    """Ask the model what to do with the request."""
    model = FakeSupportModel()
    messages = [
        {
            "role": "system",
            "content": f"You are a support agent. Refunds are allowed within "
            f"{REFUND_WINDOW_DAYS} days of delivery.",
        },
        {"role": "user", "content": request["message"]},
    ]
    decision: dict[str, Any] = llm_request(
        provider="fakellm",
        model=model.model,
        input={"messages": messages, "order": order},
        call=lambda: model.chat(messages, order),
    )
    return decision


def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"order_id": ..., "message": ...}`` -> the outcome."""
    order = lookup_order(request["order_id"])
    decision = decide(request, order)
    if decision["action"] == "refund":
        refund = issue_refund(order["order_id"], decision["amount_eur"])
        return {
            "decision": "refunded",
            "order_id": order["order_id"],
            "refund_id": refund["refund_id"],
            "reply": decision["reply"],
        }
    ticket = escalate_to_human(order["order_id"], decision["reply"])
    return {
        "decision": "escalated",
        "order_id": order["order_id"],
        "ticket_id": ticket["ticket_id"],
        "reply": decision["reply"],
    }
