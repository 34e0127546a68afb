"""A customer-support agent: an OpenAI tool-calling loop, recorded and replayed by sftrace.

The agent asks the model, runs the tools the model asks for (``order_status``,
``refund``), sends their results back, and streams the final answer. Nothing here is
specific to sftrace except ``instrument(client)`` and ``@trace_tool``.

To run it against the real API, build the client with ``OpenAI()`` in :func:`make_client`;
this example points it at :mod:`fake_openai`, an offline stand-in, so it runs anywhere.
"""

from __future__ import annotations

import json
from typing import Any

import fake_openai
from openai import OpenAI

from sftrace import trace_tool
from sftrace.integrations.openai import instrument

MODEL = "gpt-4o-mini"
# Counts real tool executions, so the example can show that a replay runs none.
TOOL_RUNS: list[str] = []

_ORDERS = {
    "A-1001": {"status": "delivered", "amount_eur": 42.0},
    "A-1002": {"status": "lost in transit", "amount_eur": 129.9},
}

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look up an order's delivery status and amount.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Refund an order in full.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
]


@trace_tool
def order_status(order_id: str) -> dict[str, Any]:
    TOOL_RUNS.append(f"order_status {order_id}")
    return {"order_id": order_id, **_ORDERS[order_id]}


@trace_tool
def refund(order_id: str) -> dict[str, Any]:
    TOOL_RUNS.append(f"refund {order_id}")
    return {"order_id": order_id, "refunded_eur": _ORDERS[order_id]["amount_eur"]}


TOOL_FUNCTIONS = {"order_status": order_status, "refund": refund}

_client: OpenAI | None = None


def make_client() -> OpenAI:
    """The agent's OpenAI client, instrumented (``OpenAI()`` in real life)."""
    global _client
    if _client is None:
        _client = instrument(
            OpenAI(api_key="sk-offline-example", http_client=fake_openai.http_client())
        )
    return _client


def run_agent(question: str) -> str:
    """The entrypoint ``sftrace replay`` re-runs: answer a customer's question."""
    client = make_client()
    messages: list[Any] = [
        {"role": "system", "content": "You are a support agent. Use the tools."},
        {"role": "user", "content": question},
    ]
    for _ in range(6):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message)
        for call in message.tool_calls:
            function = TOOL_FUNCTIONS[call.function.name]
            result = function(**json.loads(call.function.arguments))
            content = json.dumps(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    # The final answer, streamed to the customer as it is written.
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[*messages, {"role": "user", "content": "Write the final reply."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
