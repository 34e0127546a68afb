"""A travel assistant built with the OpenAI Agents SDK, recorded and replayed by sftrace.

A triage agent hands the question off to a travel agent, which calls two function tools
(``get_forecast`` and ``convert_price``) and answers. Nothing here is specific to sftrace
except ``instrument(triage)``.

To run it against the real API, build the client with ``AsyncOpenAI()`` in
:func:`make_client`; this example points it at :mod:`fake_responses`, an offline stand-in.
"""

from __future__ import annotations

from typing import Any

import fake_responses
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

from sftrace.integrations.openai_agents import instrument

# The SDK exports its own traces to api.openai.com by default: off, this example is offline.
set_tracing_disabled(True)

# Counts real tool executions, so the example can show that a replay runs none.
TOOL_RUNS: list[str] = []


def make_client() -> AsyncOpenAI:
    return AsyncOpenAI(api_key="sk-offline", http_client=fake_responses.http_client())


@function_tool
def get_forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    TOOL_RUNS.append(f"get_forecast {city}")
    return {"Lisbon": "sunny, 24 C", "Oslo": "rain, 9 C"}.get(city, "unknown")


@function_tool
def convert_price(eur: int) -> str:
    """Convert a price in euros to US dollars."""
    TOOL_RUNS.append(f"convert_price {eur}")
    return f"{eur * 1.08:.2f} USD"


set_default_openai_client(make_client(), use_for_tracing=False)
travel = Agent(
    name="travel_agent",
    instructions="Answer travel questions with the forecast and prices in dollars.",
    model="gpt-4.1-mini",
    tools=[get_forecast, convert_price],
)
triage = instrument(
    Agent(
        name="triage",
        instructions="Hand travel questions to the travel agent.",
        model="gpt-4.1-mini",
        handoffs=[travel],
    )
)


def run_agent(question: str) -> str:
    """Answer ``question`` (the entrypoint a replay calls)."""
    result = Runner.run_sync(triage, question)
    return str(result.final_output)


async def run_agent_streamed(question: str) -> str:
    """Answer ``question`` streaming the model's events (what a chat UI would do)."""
    result = Runner.run_streamed(triage, question)
    words: list[Any] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            words.append(event.data.delta)
    return str(result.final_output)
