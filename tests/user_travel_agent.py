"""A travel agent written the way users write them, for tests/test_user_agents.py.

Custom exceptions raised by a tool and caught by the agent, OpenAI SDK errors (429 and 500
from an ``httpx.MockTransport``), a tool calling another tool, a ``ThreadPoolExecutor``
shared by concurrent runs, pydantic models with ``set``/``frozenset``/datetime fields, a
dataclass result, a 50 KB prompt and an API key in a header and in an ``llm_request``
input. ``CHANGE`` switches on one change at a time: ``"deep"`` (a nested tool argument),
``"order"`` (the order of the concurrent calls) or ``"prompt"`` (one character in the
middle of the 50 KB prompt).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime as dt
import json
from typing import Any

import httpx
import openai
from pydantic import BaseModel

from sftrace import llm_request, trace_tool
from sftrace.integrations.openai import instrument

API_KEY = "sk-userAgentSECRET0123456789abcdef"
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4)
PROMPT = ("lorem ipsum dolor sit amet " * 2000)[:50_000]
CHANGE = ""
BODIES: list[str] = []


class InventoryUnavailable(Exception):
    def __init__(self, city: str, code: int) -> None:
        super().__init__(city, code)
        self.code = code


class Query(BaseModel):
    city: str
    tags: set[str]
    seats: frozenset[int]
    when: dt.datetime
    filters: dict[str, list[dict[str, int]]]


@dataclasses.dataclass
class Hotel:
    name: str
    price: float
    amenities: frozenset[str]
    checked: dt.datetime


@trace_tool(name="price_of")
def price_of(name: str) -> float:
    BODIES.append("price_of")
    return float(len(name) * 10)


@trace_tool(name="hotel_search")
def hotel_search(query: Query) -> list[Hotel]:
    BODIES.append("hotel_search")
    if query.city == "Atlantis":
        raise InventoryUnavailable(query.city, 503)
    checked = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return [
        Hotel(name, price_of(name), frozenset({"wifi", "pool"}), checked)
        for name in (f"{query.city} Inn", f"{query.city} Palace")
    ]


def _chat_api(request: httpx.Request) -> httpx.Response:
    last = json.loads(request.content)["messages"][-1]["content"]
    if "RATE" in last:
        return httpx.Response(429, json={"error": {"message": "slow down", "type": "rate"}})
    if "BOOM" in last:
        return httpx.Response(500, json={"error": {"message": "internal", "type": "server"}})
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"ok: {last[:20]}"},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    )


CLIENT = instrument(
    openai.OpenAI(
        api_key=API_KEY,
        http_client=httpx.Client(transport=httpx.MockTransport(_chat_api)),
        max_retries=0,
    )
)


def ask(prompt: str) -> str:
    try:
        reply = CLIENT.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": prompt}],
            extra_headers={"Authorization": f"Bearer {API_KEY}"},
        )
    except openai.RateLimitError as exc:
        return f"rate-limited {exc.status_code}"
    except openai.APIStatusError as exc:
        return f"api-error {exc.status_code}"
    return reply.choices[0].message.content or ""


def plan(city: str) -> dict[str, Any]:
    minimum = 51 if CHANGE == "deep" and city == "Porto" else 50
    query = Query(
        city=city,
        tags={"family", "quiet", "sea"},
        seats=frozenset({3, 1, 2}),
        when=dt.datetime(2026, 5, 1, tzinfo=dt.UTC),
        filters={"price": [{"max": 200}, {"min": minimum}]},
    )
    try:
        hotels = POOL.submit(hotel_search, query).result()
    except InventoryUnavailable as exc:
        return {"city": city, "error": f"unavailable {exc.code}"}
    return {"city": city, "hotels": [h.name for h in hotels], "total": sum(h.price for h in hotels)}


async def run(task: str) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    cities = ["Lisbon", "Porto", "Atlantis"]
    if CHANGE == "order":
        cities = ["Porto", "Lisbon", "Atlantis"]
    plans = await asyncio.gather(*(loop.run_in_executor(POOL, plan, city) for city in cities))
    prompt = PROMPT[:25_000] + "X" + PROMPT[25_001:] if CHANGE == "prompt" else PROMPT
    answers = [ask(f"{prompt} {task}"), ask("RATE please"), ask("BOOM please")]
    summary = llm_request(
        provider="openai",
        model="gpt-4o-mini",
        input={"messages": [{"role": "user", "content": task}], "api_key": API_KEY},
        call=lambda: {"text": "fine"},
    )
    return {"plans": sorted(plans, key=lambda p: p["city"]), "answers": answers, "summary": summary}
