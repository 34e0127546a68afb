"""The refund agent, fixed another way: a policy check (a new tool call) runs before any
refund. The recording has no such call, so its suite replays with ``on_miss = "live"``:
the new check runs for real, every recorded call is still answered from the bundle.

Everything else is ``refund_agent_fixed.py``'s ``handle``.
"""

from __future__ import annotations

from typing import Any

from refund_agent import REFUND_WINDOW_DAYS
from refund_agent_fixed import handle_with

from sftrace import trace_tool


@trace_tool
def check_refund_policy(delivered_days_ago: int) -> dict[str, Any]:
    """A local, side-effect-free policy check: safe to run live in a replay."""
    return {"allowed": delivered_days_ago <= REFUND_WINDOW_DAYS}


def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"order_id": ..., "message": ...}`` -> the outcome."""
    return handle_with(
        request, lambda order: check_refund_policy(order["delivered_days_ago"])["allowed"]
    )
