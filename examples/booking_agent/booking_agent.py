"""A small offline, async flight-booking agent.

Two async tools (``flight_search``, ``book_flight``) and a fake planning model. The bug,
as seen in production: when the fare the model picked has sold out, the agent retries
the booking (a refusal that will never succeed) three times, then crashes instead of
telling the traveller. ``booking_agent_fixed.py`` holds the fix.
"""

from __future__ import annotations

from typing import Any

from sftrace import allm_request, trace_tool

MAX_ATTEMPTS = 3

_INVENTORY: list[dict[str, Any]] = [
    {"id": "TP204", "destination": "Lisbon", "price_eur": 212, "seats_left": 0},
    {"id": "FR8", "destination": "Lisbon", "price_eur": 89, "seats_left": 14},
    {"id": "U2917", "destination": "Lisbon", "price_eur": 134, "seats_left": 3},
    {"id": "TP1950", "destination": "Porto", "price_eur": 74, "seats_left": 9},
    {"id": "FR2211", "destination": "Porto", "price_eur": 96, "seats_left": 2},
]
# Bookings actually made (the side effect a replay must never repeat).
BOOKINGS: list[str] = []


@trace_tool(name="flight_search")
async def search_flights(destination: str) -> list[dict[str, Any]]:
    """Search the (in-memory) flight inventory."""
    return [dict(flight) for flight in _INVENTORY if flight["destination"] == destination]


@trace_tool(name="book_flight")
async def book_flight(flight_id: str, passenger: str) -> dict[str, Any]:
    """Book a seat; a sold-out fare is refused with ValueError."""
    flight = next(f for f in _INVENTORY if f["id"] == flight_id)
    if flight["seats_left"] == 0:
        raise ValueError(f"fare {flight_id} is no longer available")
    BOOKINGS.append(flight_id)
    return {"confirmation": f"CONF-{flight_id}-001", "flight_id": flight_id, "passenger": passenger}


class FakePlanner:
    """Stands in for a chat model: offline and deterministic; it picks the first flight."""

    model = "planner-1"

    async def chat(self, task: str, flights: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "flight_id": flights[0]["id"],
            "reason": "first option listed",
            "usage": {"prompt_tokens": 40 + 12 * len(flights), "completion_tokens": 14},
        }


async def pick_flight(task: str, flights: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the model which flight to book."""
    planner = FakePlanner()
    choice: dict[str, Any] = await allm_request(
        provider="fakellm",
        model=planner.model,
        input={"task": task, "flights": flights},
        call=lambda: planner.chat(task, flights),
    )
    return choice


async def book_with_retries(flight_id: str, passenger: str) -> dict[str, Any]:
    """Book, retrying every failure (the bug: a sold-out fare is retried too)."""
    last: Exception | None = None
    for _ in range(MAX_ATTEMPTS):
        try:
            return await book_flight(flight_id, passenger)
        except Exception as exc:
            last = exc
    raise RuntimeError(f"booking failed after {MAX_ATTEMPTS} attempts: {last}")


async def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"destination": ..., "passenger": ...}`` -> the booking."""
    flights = await search_flights(request["destination"])
    choice = await pick_flight(f"Book a flight to {request['destination']}", flights)
    booking = await book_with_retries(choice["flight_id"], request["passenger"])
    return {"status": "booked", **booking}
