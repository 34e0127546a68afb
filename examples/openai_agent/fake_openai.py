"""An offline stand-in for the OpenAI chat completions API (for this example only).

An ``httpx.MockTransport`` answers ``POST /v1/chat/completions`` with a tiny rule-based
"model": it asks for ``order_status``, then for ``refund`` when the order was lost, then
answers; with ``stream=True`` it streams the answer as server-sent events. ``REQUESTS``
counts the requests it received, so the example can show a replay sends none.
"""

from __future__ import annotations

import json
from typing import Any

try:  # recent openai releases use httpx2, older ones httpx: the mock must match the SDK
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

REQUESTS: list[dict[str, Any]] = []


def _completion(message: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 18}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-{len(REQUESTS)}",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, **message},
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def _tool_call(name: str, order_id: str) -> dict[str, Any]:
    arguments = json.dumps({"order_id": order_id})
    return {
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{name}_{order_id}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def _decide(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What the "model" says next, from the conversation so far."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    order_id = next((w.strip("?.,") for w in question.split() if w.startswith("A-")), "A-1001")
    results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
    if not results:
        return _tool_call("order_status", order_id)
    status = results[0]
    if status.get("status") == "lost in transit" and len(results) == 1:
        return _tool_call("refund", order_id)
    if len(results) == 2:
        return {"content": f"Order {order_id} was lost; {results[1]['refunded_eur']} EUR refunded."}
    return {"content": f"Order {order_id} is {status['status']}."}


def _stream(text: str, prompt_tokens: int) -> bytes:
    words = text.split(" ")
    pieces = [word if i == 0 else " " + word for i, word in enumerate(words)]
    base = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-4o-mini-2024-07-18",
    }
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
        for p in pieces
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces)}
    usage["total_tokens"] = prompt_tokens + len(pieces)
    chunks.append({**base, "choices": [], "usage": usage})
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return body.encode()


def _handle(request: Any) -> Any:
    body = json.loads(request.content)
    REQUESTS.append(body)
    messages = body["messages"]
    prompt_tokens = 40 + 12 * len(messages)
    if body.get("stream"):
        last_reply = _decide([m for m in messages if m["content"] != "Write the final reply."])
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream", "x-request-id": "req_stream"},
            content=_stream(last_reply.get("content") or "", prompt_tokens),
        )
    completion = _completion(_decide(messages), prompt_tokens)
    return httpx.Response(200, json=completion, headers={"x-request-id": f"req_{len(REQUESTS)}"})


def http_client() -> Any:
    """An HTTP client for ``OpenAI(http_client=...)`` that never leaves the process."""
    return httpx.Client(transport=httpx.MockTransport(_handle), base_url="https://api.openai.com")
