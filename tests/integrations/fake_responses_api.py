"""An offline stand-in for the OpenAI Responses API, playing a small agent-aware model.

:class:`ResponsesModelAPI` is an ``httpx.MockTransport`` handler for ``POST /responses``
that decides each reply from the request, like a model would: when the request offers a
handoff tool (``transfer_to_...``) and no handoff happened yet, it hands off; when it offers
``get_forecast`` (then ``get_alerts``) not called yet, it calls it for the city in the
user's message;
otherwise it answers with text built from the tool results. With ``"stream": true`` it
sends the same reply as server-sent events. It keeps every request body; ``offline()``
makes it refuse any further request, to prove a replay sends nothing.
"""

from __future__ import annotations

import json
from typing import Any

from fake_llm_api import NetworkUsedError, httpx_for, sse

MODEL = "gpt-4.1-2025-04-14"
USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 12,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 62,
}


def _response(number: int, output: list[dict[str, Any]], status: str = "completed") -> dict:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1767225600 + number,
        "model": MODEL,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE if status == "completed" else None,
    }


def _function_call(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"fc_{number}",
        "type": "function_call",
        "call_id": f"call_{number}_{name}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _message(number: int, text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def decide(number: int, body: dict[str, Any]) -> dict[str, Any]:
    """The output item the "model" produces for this request."""
    items = body["input"] if isinstance(body["input"], list) else []
    tools = {tool.get("name") for tool in body.get("tools", [])}
    called = {item.get("name") for item in items if item.get("type") == "function_call"}
    outputs = [item["output"] for item in items if item.get("type") == "function_call_output"]
    question = next(
        (item["content"] for item in items if item.get("role") == "user"), str(body["input"])
    )
    handoffs = sorted(name for name in tools if name and name.startswith("transfer_to_"))
    if handoffs and not any(name and name.startswith("transfer_to_") for name in called):
        return _function_call(number, handoffs[0], {})
    for name in ("get_forecast", "get_alerts"):
        if name in tools and name not in called:
            city = question.rstrip("?").split()[-1]
            return _function_call(number, name, {"city": city})
    return _message(number, f"Forecast: {outputs[-1] if outputs else 'unknown'}.")


def _events(number: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(number, [], "in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        for piece in text.split(" "):
            events.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece + " ",
                    "logprobs": [],
                }
            )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": _response(number, [item])},
    ]
    for sequence, event in enumerate(events):
        event["sequence_number"] = sequence
    return events


class ResponsesModelAPI:
    """The ``httpx.MockTransport`` handler; ``requests`` holds every request body."""

    def __init__(self) -> None:
        self.httpx = httpx_for("openai")
        self.requests: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self._offline = False

    def offline(self) -> None:
        self._offline = True

    def handler(self, request: Any) -> Any:
        if self._offline:
            self.refused.append(f"{request.method} {request.url}")
            raise NetworkUsedError(f"a replay sent {request.method} {request.url}")
        body = json.loads(request.content)
        self.requests.append(body)
        number = len(self.requests)
        item = decide(number, body)
        headers = {"x-request-id": f"req_{number}"}
        if body.get("stream"):
            content = sse(_events(number, item), named=True, done=False)
            headers["content-type"] = "text/event-stream"
            return self.httpx.Response(200, headers=headers, content=content)
        return self.httpx.Response(200, headers=headers, json=_response(number, [item]))

    def client(self, base_url: str = "http://llm.test/v1") -> Any:
        """An ``AsyncOpenAI`` whose HTTP layer is this handler (whatever ``base_url`` says,
        nothing leaves the process)."""
        import openai

        http = self.httpx.AsyncClient(transport=self.httpx.MockTransport(self.handler))
        return openai.AsyncOpenAI(
            api_key="sk-test", base_url=base_url, http_client=http, max_retries=0
        )
