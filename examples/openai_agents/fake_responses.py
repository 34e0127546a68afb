"""An offline stand-in for the OpenAI Responses API (for this example only).

An ``httpx.MockTransport`` answers ``POST /v1/responses`` with a tiny rule-based "model":
offered a handoff (``transfer_to_...``), it hands off; offered the travel tools, it calls
``get_forecast`` and ``convert_price`` together; given their results, it writes the
answer. With ``"stream": true`` it sends the same reply as server-sent events.
``REQUESTS`` counts the requests it received, so the example can show a replay sends none.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:  # recent openai releases use httpx2, older ones httpx: the mock must match the SDK
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

REQUESTS: list[dict[str, Any]] = []
USAGE = {
    "input_tokens": 80,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 100,
}


def _response(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    number = len(REQUESTS)
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1767225600 + number,
        "model": "gpt-4.1-mini-2025-04-14",
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE if status == "completed" else None,
    }


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    number = len(REQUESTS)
    return {
        "id": f"fc_{number}_{name}",
        "type": "function_call",
        "call_id": f"call_{number}_{name}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _decide(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items the "model" produces for this request."""
    items = body["input"]
    tools = {tool["name"] for tool in body.get("tools", [])}
    outputs = {
        item["call_id"]: item["output"]
        for item in items
        if item.get("type") == "function_call_output"
    }
    question = next(item["content"] for item in items if item.get("role") == "user")
    if "transfer_to_travel_agent" in tools:
        return [_call("transfer_to_travel_agent", {})]
    city = re.findall(r"to ([A-Z][a-z]+)", question)[0]
    amount = int(re.findall(r"(\d+) EUR", question)[0])
    forecast = next((v for k, v in outputs.items() if k.endswith("get_forecast")), None)
    price = next((v for k, v in outputs.items() if k.endswith("convert_price")), None)
    if forecast is None:
        return [_call("get_forecast", {"city": city}), _call("convert_price", {"eur": amount})]
    text = f"{city} tomorrow: {forecast}. Your {amount} EUR budget is {price}."
    return [
        {
            "id": f"msg_{len(REQUESTS)}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]


def _events(output: list[dict[str, Any]]) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response([], "in_progress")}
    ]
    for index, item in enumerate(output):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        for part in item.get("content", []):
            for word in part["text"].split(" "):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": word + " ",
                        "logprobs": [],
                    }
                )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": _response(output)})
    lines = []
    for number, event in enumerate(events):
        event["sequence_number"] = number
        lines.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(lines).encode()


def _handle(request: Any) -> Any:
    body = json.loads(request.content)
    REQUESTS.append(body)
    output = _decide(body)
    headers = {"x-request-id": f"req_{len(REQUESTS)}"}
    if body.get("stream"):
        headers["content-type"] = "text/event-stream"
        return httpx.Response(200, headers=headers, content=_events(output))
    return httpx.Response(200, headers=headers, json=_response(output))


def http_client() -> Any:
    """An HTTP client for ``AsyncOpenAI(http_client=...)`` that never leaves the process."""
    return httpx.AsyncClient(transport=httpx.MockTransport(_handle))
