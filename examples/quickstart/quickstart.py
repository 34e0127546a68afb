"""A small offline booking agent: one search tool, one booking tool, a fake LLM.

The "LLM" has a bug: it picks the first flight it is shown instead of the cheapest, and
that fare has sold out, so the run fails. ``main.py`` records this failure and replays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sftrace import llm_request, trace_tool

# Counts real executions, so the example can show that a replay runs none.
REAL_CALLS: list[str] = []


@dataclass
class Flight:
    id: str
    destination: str
    price_eur: int
    seats_left: int


_INVENTORY = [
    Flight("TP204", "Lisbon", 212, 0),
    Flight("FR8", "Lisbon", 89, 14),
    Flight("U2917", "Lisbon", 134, 3),
]


@trace_tool(name="flight_search")
def search_flights(destination: str, max_results: int = 5) -> list[Flight]:
    """Search the (in-memory) flight inventory."""
    REAL_CALLS.append("flight_search")
    return [f for f in _INVENTORY if f.destination == destination][:max_results]


@trace_tool(name="book_flight")
def book_flight(flight_id: str, passenger: str) -> dict[str, Any]:
    """Book a seat; fails when the fare has sold out."""
    REAL_CALLS.append("book_flight")
    flight = next(f for f in _INVENTORY if f.id == flight_id)
    if flight.seats_left == 0:
        raise ValueError(f"fare {flight_id} is no longer available")
    return {"confirmation": f"CONF-{flight_id}-001", "flight_id": flight_id, "passenger": passenger}


class FakePlanner:
    """Stands in for a chat model: deterministic, offline, and wrong in a realistic way."""

    model = "planner-1"

    def chat(self, messages: list[dict[str, str]], flights: list[dict[str, Any]]) -> dict[str, Any]:
        REAL_CALLS.append("llm")
        choice = flights[0]  # the bug: should be min(flights, key=price)
        return {
            "model": self.model,
            "choice": {"flight_id": choice["id"], "reason": "first option listed"},
            "usage": {"prompt_tokens": 42 + 9 * len(flights), "completion_tokens": 12},
        }


def run_agent(task: str) -> dict[str, Any]:
    """The agent's entrypoint: what ``sftrace replay --entrypoint quickstart:run_agent`` calls."""
    destination = task.rsplit(" ", 1)[-1]
    flights = [f.__dict__ for f in search_flights(destination)]
    planner = FakePlanner()
    messages = [
        {"role": "system", "content": "You book the cheapest available flight."},
        {"role": "user", "content": task},
    ]
    reply = llm_request(
        provider="fakellm",
        model=planner.model,
        input={"messages": messages, "flights": flights},
        call=lambda: planner.chat(messages, flights),
    )
    booking = book_flight(reply["choice"]["flight_id"], passenger="Ada Lovelace")
    return {"status": "booked", **booking}
