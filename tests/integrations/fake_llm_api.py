"""Offline stand-ins for the OpenAI and Anthropic HTTP APIs.

A :class:`FakeAPI` is an ``httpx.MockTransport`` handler answering each request with the
next canned reply (JSON, or a server-sent-events body built here). It keeps every
request body; ``offline()`` makes it refuse any further request, to prove a replay
sends nothing. The payload builders write the JSON the real APIs send.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections import deque
from types import ModuleType
from typing import Any


def httpx_for(sdk: str) -> ModuleType:
    """The httpx flavour an SDK's clients take (``httpx2`` in recent SDKs, else ``httpx``)."""
    base = importlib.import_module(f"{sdk}._base_client")
    module = getattr(base, "httpx2", None) or base.httpx
    assert isinstance(module, ModuleType)
    return module


def sse(events: list[dict[str, Any]], *, named: bool, done: bool) -> bytes:
    """A server-sent-events body: one ``data:`` line per event (``event:`` too if named)."""
    lines = []
    for event in events:
        prefix = f"event: {event['type']}\n" if named else ""
        lines.append(f"{prefix}data: {json.dumps(event)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


class NetworkUsedError(AssertionError):
    """A request reached the fake API while it was offline (during a replay)."""


class FakeAPI:
    """Canned replies for one SDK's HTTP layer; see the module docstring."""

    def __init__(self, sdk: str, *, request_id_header: str) -> None:
        self.sdk = sdk
        self.http = httpx_for(sdk)
        self.request_id_header = request_id_header
        self.requests: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self._replies: deque[Any] = deque()
        self._offline = False
        self._ids = 0

    # -- scripting -------------------------------------------------------------------
    def _headers(self, content_type: str, extra: dict[str, str]) -> dict[str, str]:
        self._ids += 1
        return {
            "content-type": content_type,
            self.request_id_header: f"req_{self._ids:03d}",
            **extra,
        }

    def reply_json(
        self, body: dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        self._replies.append((status, "application/json", json.dumps(body).encode(), headers))

    def reply_stream(
        self,
        events: list[dict[str, Any]],
        *,
        named: bool,
        done: bool,
        fail_after: int | None = None,
        delay: float = 0.0,
    ) -> None:
        """A streamed reply; ``fail_after``: the connection drops (``ReadError``) after
        that many events; ``delay``: seconds an async client waits for each event."""
        if fail_after is None and not delay:
            body: Any = sse(events, named=named, done=done)
        else:
            parts = [sse([event], named=named, done=False) for event in events]
            if fail_after is None:
                parts += [sse([], named=named, done=done)]
            if fail_after is not None:
                parts = parts[:fail_after]
            body = _event_body(self.http, parts, fails=fail_after is not None, delay=delay)
        self._replies.append((200, "text/event-stream", body, None))

    def offline(self) -> None:
        """From now on refuse every request (and remember it was attempted)."""
        self._offline = True

    # -- the transport ---------------------------------------------------------------
    def handler(self, request: Any) -> Any:
        if self._offline:
            self.refused.append(f"{request.method} {request.url}")
            raise NetworkUsedError(f"a request was sent during replay: {request.url}")
        self.requests.append(json.loads(request.content))
        status, content_type, content, headers = self._replies.popleft()
        body = {"content": content} if isinstance(content, bytes) else {"stream": content}
        return self.http.Response(
            status, headers=self._headers(content_type, headers or {}), **body
        )

    def sync_client(self) -> Any:
        return self.http.Client(transport=self.http.MockTransport(self.handler))

    def async_client(self) -> Any:
        return self.http.AsyncClient(transport=self.http.MockTransport(self.handler))

    def sdk_client(self, sync_cls: type, async_cls: type, *, is_async: bool, **options: Any) -> Any:
        """An SDK client (``async_cls`` if ``is_async``) whose requests this fake answers."""
        http = self.async_client() if is_async else self.sync_client()
        cls = async_cls if is_async else sync_cls
        return cls(http_client=http, max_retries=0, **options)


def _event_body(http: ModuleType, parts: list[bytes], *, fails: bool, delay: float) -> Any:
    """A response body sent event by event, sync or async (an ``http`` byte stream): slow
    (``delay`` seconds before each event, async only), or cut off (``fails``: a
    ``ReadError`` after the events)."""

    class EventBody(http.SyncByteStream, http.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __iter__(self) -> Any:
            yield from parts
            if fails:
                raise http.ReadError("connection reset by peer")

        async def __aiter__(self) -> Any:
            for part in parts:
                if delay:
                    await asyncio.sleep(delay)
                yield part
            if fails:
                raise http.ReadError("connection reset by peer")

    return EventBody()


# --- OpenAI payloads -------------------------------------------------------------------

USAGE = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}


def chat_completion(
    text: str | None = None, *, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_1",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": USAGE,
    }


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def chat_chunks(pieces: list[str], *, usage: bool = True) -> list[dict[str, Any]]:
    """The chunks of a streamed chat completion, the usage-only chunk last."""

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 1700000001,
            "model": "gpt-4o-2024-08-06",
            "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""}, None)]
    chunks += [chunk({"content": piece}, None) for piece in pieces]
    chunks.append(chunk({}, "stop"))
    if usage:
        last = chunk({}, None)
        last["choices"] = []
        last["usage"] = USAGE
        chunks.append(last)
    return chunks


RESPONSE_USAGE = {
    "input_tokens": 30,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 39,
}


def response_object(text: str, *, status: str = "completed") -> dict[str, Any]:
    done = status == "completed"
    output = [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000002,
        "model": "gpt-4.1-2025-04-14",
        "status": status,
        "output": output if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": RESPONSE_USAGE if done else None,
    }


def response_events(pieces: list[str]) -> list[dict[str, Any]]:
    """The events of a streamed Responses API call, ``response.completed`` last."""
    text = "".join(pieces)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object("", status="in_progress")},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            },
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
    ]
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
            "logprobs": [],
        }
        for piece in pieces
    ]
    events += [
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": text, "annotations": []},
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": response_object(text)["output"][0],
        },
        {"type": "response.completed", "response": response_object(text)},
    ]
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


# --- Anthropic payloads ----------------------------------------------------------------


def message(
    text: str | None = None, *, tool_use: tuple[str, str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_use is not None:
        call_id, name, arguments = tool_use
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1-20260101",
        "content": content,
        "stop_reason": "tool_use" if tool_use else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 12},
    }


def message_events(pieces: list[str]) -> list[dict[str, Any]]:
    """The raw events of a streamed message (``message_start`` ... ``message_stop``)."""
    start = message()
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = {"input_tokens": 40, "output_tokens": 1}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        for p in pieces
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 15},
        },
        {"type": "message_stop"},
    ]
    return events
