"""Agents the fork tests (Python API and CLI) fork: a branch decided by an LLM answer,
tools calling tools, and an async agent. ``EXECUTED`` (of sample_agents) lists bodies run."""

from __future__ import annotations

from typing import Any

import sample_agents as agents
from sftrace import trace_tool


def picking_agent() -> dict[str, Any]:
    """search -> llm (picks a flight) -> book: the LLM's answer decides the branch."""
    flights = agents.search_flights("Lisbon")
    reply = agents.ask(f"pick from {[f.id for f in flights]}")
    ids = [flight.id for flight in flights]
    choice = reply["text"] if reply["text"] in ids else min(flights, key=lambda f: f.price).id
    return agents.book(choice)


@trace_tool
def inner(x: int) -> int:
    agents.EXECUTED.append(f"inner:{x}")
    return x * 2


@trace_tool
def outer(x: int) -> int:
    agents.EXECUTED.append(f"outer:{x}")
    return inner(x) + 1


@trace_tool(replay_policy="live")
def live_outer(x: int) -> int:
    agents.EXECUTED.append(f"live_outer:{x}")
    return inner(x) + 1


def nested_agent() -> int:
    return outer(3) + agents.book("FR2")["ok"]


def live_nested_agent() -> int:
    return live_outer(3) + agents.book("FR2")["ok"]


async def async_entry(topic: str = "fork") -> str:
    return await agents.async_agent(topic)


def stops_early() -> Any:
    """picking_agent's first call only: a run that ends before a later fork point."""
    return agents.search_flights("Lisbon")
