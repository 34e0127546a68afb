"""An OpenAI-SDK tool-calling agent as users write it: a module-level instrumented client,
a tool loop, a streamed final answer. ``handle`` lets an API error escape (the recorded
production failure); ``handle_fixed`` answers politely when the API refuses the request.

The client's HTTP layer is answered by whatever ``ANSWER`` holds (a test's fake API);
by default it refuses every request, so a replay that sent one would fail loudly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
from openai._base_client import httpx2 as httpx  # the httpx flavour this SDK takes

from sftrace import trace_tool
from sftrace.integrations.openai import instrument

BODIES: list[str] = []


def _refuse(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"a request was sent: {request.url}")


ANSWER: list[Callable[[httpx.Request], httpx.Response]] = [_refuse]

CLIENT = instrument(
    openai.OpenAI(
        api_key="sk-test",
        base_url="http://llm.test/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(lambda r: ANSWER[-1](r))),
    )
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look up an order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


@trace_tool
def order_status(order_id: str) -> dict[str, str]:
    BODIES.append(order_id)
    return {"order_id": order_id, "status": "in transit"}


def _loop(question: str, *, temperature: float | None = None) -> dict[str, Any]:
    messages: list[Any] = [{"role": "user", "content": question}]
    extra = {} if temperature is None else {"temperature": temperature}
    for _ in range(4):
        response = CLIENT.chat.completions.create(
            model="gpt-4o", messages=messages, tools=TOOLS, **extra
        )
        message = response.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message)
        for call in message.tool_calls:
            result = order_status(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    stream = CLIENT.chat.completions.create(
        model="gpt-4o",
        messages=[*messages, {"role": "user", "content": "Summarise."}],
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    return {"answer": text}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    return _loop(request["question"])


def handle_fixed(request: dict[str, Any]) -> dict[str, Any]:
    try:
        return _loop(request["question"])
    except openai.BadRequestError as exc:
        return {"answer": "Sorry, I could not look that up.", "status": exc.status_code}


def handle_warmer(request: dict[str, Any]) -> dict[str, Any]:
    """A deliberate change: a different temperature on every model call."""
    return _loop(request["question"], temperature=0.7)
