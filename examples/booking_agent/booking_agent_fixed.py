"""The booking agent, fixed: a refused fare is not retried; the traveller gets the
available alternatives, cheapest first.

Same tools and model as ``booking_agent.py``; only the booking step changes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from booking_agent import MAX_ATTEMPTS, book_flight, pick_flight, search_flights

# Failures worth another attempt; anything else is an answer, not an accident.
TRANSIENT = (TimeoutError, ConnectionError)


async def book_with_retries(flight_id: str, passenger: str) -> dict[str, Any]:
    """Book, retrying only transient failures."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return await book_flight(flight_id, passenger)
        except TRANSIENT:
            if attempt == MAX_ATTEMPTS:
                raise
            await asyncio.sleep(0.1 * attempt)
    raise AssertionError("unreachable")


async def handle(request: dict[str, str]) -> dict[str, Any]:
    """The agent's entrypoint: ``{"destination": ..., "passenger": ...}`` -> the booking."""
    flights = await search_flights(request["destination"])
    choice = await pick_flight(f"Book a flight to {request['destination']}", flights)
    try:
        booking = await book_with_retries(choice["flight_id"], request["passenger"])
    except ValueError as refused:
        available = sorted(
            (f for f in flights if f["seats_left"] > 0 and f["id"] != choice["flight_id"]),
            key=lambda f: f["price_eur"],
        )
        return {
            "status": "not_booked",
            "reason": str(refused),
            "alternatives": [f["id"] for f in available],
        }
    return {"status": "booked", **booking}
