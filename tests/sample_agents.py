"""Small instrumented agents shared by the tests. ``EXECUTED`` lists real tool bodies run."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pydantic

from sftrace import allm_request, llm_request, record, trace_tool

EXECUTED: list[str] = []


@dataclasses.dataclass
class Flight:
    id: str
    price: int


class Quote(pydantic.BaseModel):
    flight_id: str
    total: float


class PaymentDeclined(Exception):
    """A non-builtin exception type, as agents' dependencies raise."""


@trace_tool(name="flight_search")
def search_flights(destination: str, max_results: int = 3) -> list[Flight]:
    EXECUTED.append(f"search:{destination}")
    return [Flight("TP1", 120), Flight("FR2", 90)][:max_results]


@trace_tool
def quote(flight_id: str) -> Quote:
    EXECUTED.append(f"quote:{flight_id}")
    return Quote(flight_id=flight_id, total=99.5)


@trace_tool
def book(flight_id: str) -> dict[str, Any]:
    EXECUTED.append(f"book:{flight_id}")
    if flight_id == "TP1":
        raise ValueError("sold out")
    return {"ok": True, "flight_id": flight_id}


@trace_tool
def charge(amount: float) -> dict[str, Any]:
    EXECUTED.append(f"charge:{amount}")
    raise PaymentDeclined(f"card declined for {amount}")


def fake_llm(prompt: str) -> dict[str, Any]:
    EXECUTED.append("llm")
    return {
        "model": "fake-1-2025",
        "text": f"answer to {prompt}",
        "usage": {"prompt_tokens": 7, "completion_tokens": 5},
    }


def ask(prompt: str) -> dict[str, Any]:
    return llm_request(
        provider="fake", model="fake-1", input={"prompt": prompt}, call=lambda: fake_llm(prompt)
    )


def booking_agent(destination: str = "Lisbon") -> dict[str, Any]:
    """search -> llm -> book (cheapest)."""
    flights = search_flights(destination)
    ask(f"pick from {[f.id for f in flights]}")
    cheapest = min(flights, key=lambda f: f.price)
    return book(cheapest.id)


class Toolbox:
    @trace_tool
    def lookup(self, key: str) -> str:
        EXECUTED.append(f"lookup:{key}")
        return key.upper()

    @trace_tool
    async def alookup(self, key: str) -> str:
        EXECUTED.append(f"alookup:{key}")
        await asyncio.sleep(0)
        return key.lower()


@trace_tool
async def fetch(item: str, delay: float = 0.0) -> dict[str, str]:
    EXECUTED.append(f"fetch:{item}")
    await asyncio.sleep(delay)
    return {"item": item}


@trace_tool
async def gather_parent(prefix: str) -> list[dict[str, str]]:
    """Starts two child tool calls concurrently."""
    return list(await asyncio.gather(fetch(f"{prefix}-a", 0.002), fetch(f"{prefix}-b")))


async def async_agent(topic: str) -> str:
    results = await asyncio.gather(gather_parent("x"), gather_parent("y"))
    reply = await allm_request(
        provider="fake",
        model="fake-1",
        input={"topic": topic, "n": len(results)},
        call=_afake(topic),
    )
    return str(reply["text"])


def _afake(topic: str) -> Any:
    async def call() -> dict[str, Any]:
        EXECUTED.append("allm")
        return {"text": f"about {topic}", "usage": {"input_tokens": 3, "output_tokens": 4}}

    return call


def recorded(path: Any, agent: Any) -> Any:
    """Record ``agent()`` (its return value as the run's output) into ``path``; then
    forget which bodies ran, so a test sees only what its replay executes."""
    with record("agent", output=path) as session:
        session.set_output(agent())
    EXECUTED.clear()
    return path
