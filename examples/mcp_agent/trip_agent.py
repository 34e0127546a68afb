"""A trip-planning agent that uses an MCP server's tools, recorded and replayed by sftrace.

It starts the weather server (:mod:`weather_server`) as a stdio subprocess, lists its
tools, asks for the forecast of each city in the request, reads the packing notes for the
weather found, and writes a plan. An unknown city comes back as a tool error
(``isError``), which the agent reports. Nothing here is specific to sftrace except
``instrument(client)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from sftrace.integrations.mcp import instrument

SERVER = Path(__file__).resolve().parent / "weather_server.py"


def make_client() -> Client:
    env = {"PATH": os.environ.get("PATH", "")}
    if "WEATHER_SERVER_STARTS" in os.environ:
        env["WEATHER_SERVER_STARTS"] = os.environ["WEATHER_SERVER_STARTS"]
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)
    return instrument(Client(params))


async def run_agent(request: str) -> str:
    """Plan a trip to the cities named in ``request`` ("Trip: Lisbon, Atlantis")."""
    cities = [city.strip() for city in request.partition(":")[2].split(",") if city.strip()]
    lines = []
    async with make_client() as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        if "forecast" not in tools:
            return "The weather server has no forecast tool."
        for city in cities:
            result = await client.call_tool("forecast", {"city": city})
            if result.is_error:
                lines.append(f"{city}: no forecast ({result.content[0].text})")
                continue
            weather = result.structured_content or {}
            notes = await client.read_resource(f"packing://{weather['sky']}")
            packing = notes.contents[0].text  # type: ignore[union-attr]
            lines.append(f"{city}: {weather['sky']}, {weather['celsius']} C; pack {packing}")
    return "\n".join(lines)
