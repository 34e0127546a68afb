"""The trip planner's MCP server: weather tools and packing notes, served over stdio.

``python weather_server.py`` serves it; the agent starts it as a subprocess. Each start
appends a line to the file named by ``WEATHER_SERVER_STARTS`` (when set), so the example
can show that a replay starts no server.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

FORECASTS = {"Lisbon": ("sunny", 24), "Oslo": ("rain", 9), "Reykjavik": ("snow", -2)}

server = MCPServer("weather")


@server.tool()
def forecast(city: str) -> dict[str, object]:
    """Tomorrow's weather in a city."""
    if city not in FORECASTS:
        raise ToolError(f"no forecast for {city}")  # an isError result for the client
    sky, celsius = FORECASTS[city]
    return {"city": city, "sky": sky, "celsius": celsius}


@server.resource("packing://{sky}")
def packing(sky: str) -> str:
    """What to pack for a kind of weather."""
    return {"sunny": "sunscreen, hat", "rain": "umbrella, boots", "snow": "coat, gloves"}.get(
        sky, "a bit of everything"
    )


if __name__ == "__main__":
    starts = os.environ.get("WEATHER_SERVER_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as file:
            file.write("started\n")
    server.run()
