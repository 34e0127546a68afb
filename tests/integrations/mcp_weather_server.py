"""A small MCP server for the MCP integration's tests, in-process or as a stdio subprocess.

``python mcp_weather_server.py`` serves it over stdio; when ``MCP_WEATHER_STARTS`` names a
file, each start appends a line to it, so a test can tell whether a replay started it.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

# Every tool body that ran in this process (the in-process tests assert a replay runs none).
TOOL_RUNS: list[str] = []

server = MCPServer("weather")


@server.tool()
def forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city."""
    TOOL_RUNS.append(f"forecast {city}")
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"{city}: sunny for {days} days"


@server.tool()
def stations(region: str) -> dict[str, list[str]]:
    """The weather stations of a region."""
    TOOL_RUNS.append(f"stations {region}")
    return {"stations": [f"{region}-1", f"{region}-2"]}


@server.resource("notes://{name}")
def note(name: str) -> str:
    """A note kept by the forecaster."""
    return f"note {name}: bring an umbrella"


@server.prompt()
def briefing(city: str) -> str:
    """A prompt asking for a weather briefing."""
    return f"Write a short weather briefing for {city}."


if __name__ == "__main__":
    starts = os.environ.get("MCP_WEATHER_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as file:
            file.write("started\n")
    server.run()
