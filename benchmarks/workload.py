"""The workload every benchmark runs: a realistic tool call and a realistic LLM call.

A tool call takes a few keyword-ish arguments (four parameters once defaults apply) and
returns a dict of about 1 KB; an LLM call sends a short chat request and gets back a
response of about 1 KB with a model name and token usage. Inputs vary from call to call
(as in a real run, and so unordered replay has real keys to match); results are built
once, so the function bodies cost next to nothing and what is measured is the
instrumentation.

This module imports nothing from sftrace: the stepfork comparison imports it from a
separate virtual environment.
"""

from __future__ import annotations

from typing import Any

TOOL_RESULT: dict[str, Any] = {
    "currency": "EUR",
    "flights": [
        {
            "carrier": "TAP Air Portugal",
            "departs": f"2025-06-01T{8 + i:02d}:15:00Z",
            "from": "BER",
            "id": f"TP{500 + i}",
            "price_eur": 89 + 17 * i,
            "seats_left": i,
            "to": "LIS",
        }
        for i in range(8)
    ],
    "query_id": "q-7f3a9c2e",
}

LLM_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-bench-0001",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {
                "role": "assistant",
                "content": (
                    "The cheapest option is TP500 departing 08:15 from Berlin to Lisbon at "
                    "89 EUR with no seats left, so I suggest TP501 at 106 EUR instead. "
                )
                * 6,
            },
        }
    ],
    "usage": {"prompt_tokens": 412, "completion_tokens": 168, "total_tokens": 580},
}

SYSTEM_PROMPT = "You are a travel agent. Pick the cheapest available flight."


def search_flights(
    destination: str, date: str, passengers: int = 1, cabin: str = "economy"
) -> dict[str, Any]:
    """The tool: four parameters, about 1 KB of result."""
    return TOOL_RESULT


def chat_completion() -> dict[str, Any]:
    """The model call: what ``call=`` does in ``llm_request``."""
    return LLM_RESPONSE


def tool_arguments(count: int) -> list[tuple[str, str, int]]:
    """Positional arguments of ``count`` calls (passengers= is given by keyword)."""
    return [("LIS", f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}", 1 + i % 4) for i in range(count)]


def llm_inputs(count: int) -> list[dict[str, Any]]:
    """Request bodies of ``count`` chat calls."""
    return [
        {
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Book the cheapest flight to Lisbon, request {i}"},
            ],
            "temperature": 0,
            "max_tokens": 256,
        }
        for i in range(count)
    ]
