"""The MCP integration: real MCP clients and servers recorded, then replayed with no server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_weather_server as weather
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, ListToolsResult, ReadResourceResult

from sftrace import (
    ConfigError,
    ReplayError,
    ReplayMismatchError,
    load_bundle,
    record,
    replay,
)
from sftrace.integrations.mcp import instrument

SERVER_SCRIPT = str(Path(weather.__file__).resolve())


@pytest.fixture(autouse=True)
def _no_tool_runs() -> None:
    weather.TOOL_RUNS.clear()


class RefusingTransport:
    """An MCP transport that refuses to connect, listing each attempt in ``refused``."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    async def __aenter__(self) -> Any:
        self.refused.append("connect")
        raise ConnectionRefusedError("the replay must not connect to an MCP server")

    async def __aexit__(self, *exc_info: Any) -> None:
        return None


async def weather_agent(client: Client) -> dict[str, Any]:
    """List the tools, call two (one fails with isError), read a resource, get a prompt,
    and hit a protocol error (an unknown resource)."""
    found: dict[str, Any] = {}
    async with client:
        found["tools"] = await client.list_tools()
        found["paris"] = await client.call_tool("forecast", {"city": "Paris", "days": 2})
        found["atlantis"] = await client.call_tool("forecast", {"city": "Atlantis"})
        found["note"] = await client.read_resource("notes://packing")
        found["prompt"] = await client.get_prompt("briefing", {"city": "Oslo"})
        try:
            await client.read_resource("bogus://nothing")
        except MCPError as exc:
            found["error"] = exc
    return found


def record_then_replay(path: Path, make_client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Record ``weather_agent`` on a real client, replay it on one that cannot connect."""
    with record("mcp-agent", output=path):
        recorded = asyncio.run(weather_agent(instrument(make_client())))
    assert weather.TOOL_RUNS  # the recording ran the tools
    weather.TOOL_RUNS.clear()
    transport = RefusingTransport()
    with replay(path) as session:
        replayed = asyncio.run(weather_agent(instrument(Client(transport))))
    assert transport.refused == []
    assert weather.TOOL_RUNS == []
    assert session.divergence is None
    session.verify_complete()
    return recorded, replayed


def assert_same_results(recorded: dict[str, Any], replayed: dict[str, Any]) -> None:
    for key in ("tools", "paris", "atlantis", "note", "prompt"):
        assert type(replayed[key]) is type(recorded[key])
        assert replayed[key] == recorded[key], key
    assert replayed["atlantis"].is_error is True
    error, original = replayed["error"], recorded["error"]
    assert type(error) is MCPError
    assert (error.code, error.message, error.data) == (
        original.code,
        original.message,
        original.data,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["in-memory-transport", "direct"])
def test_in_process_server_replays_real_results_without_connecting(
    tmp_path: Path, mode: str
) -> None:
    """Every recorded method replays as the SDK's own result objects, the isError result
    and the protocol error included, with no connection and no tool run."""
    recorded, replayed = record_then_replay(
        tmp_path / "run.sftrace", lambda: Client(weather.server, mode=mode)
    )
    assert_same_results(recorded, replayed)
    assert isinstance(replayed["paris"], CallToolResult)
    assert isinstance(replayed["tools"], ListToolsResult)
    assert isinstance(replayed["note"], ReadResourceResult)


def test_what_is_recorded_per_call(tmp_path: Path) -> None:
    """Names, inputs, outputs (isError, content) and MCP attributes, as documented."""
    record_then_replay(tmp_path / "run.sftrace", lambda: Client(weather.server))
    calls = load_bundle(tmp_path / "run.sftrace").calls
    assert [(c.kind, c.name, c.input) for c in calls] == [
        ("tool", "mcp:tools/list", {}),
        ("tool", "forecast", {"city": "Paris", "days": 2}),
        ("tool", "forecast", {"city": "Atlantis"}),
        ("tool", "mcp:resources/read", {"uri": "notes://packing"}),
        ("tool", "mcp:prompts/get", {"name": "briefing", "arguments": {"city": "Oslo"}}),
        ("tool", "mcp:resources/read", {"uri": "bogus://nothing"}),
    ]
    paris, atlantis = calls[1], calls[2]
    assert paris.output["content"] == [{"type": "text", "text": "Paris: sunny for 2 days"}]
    assert paris.output["isError"] is False
    assert paris.attributes["mcp.method.name"] == "tools/call"
    assert "error.type" not in paris.attributes
    assert atlantis.output["isError"] is True
    assert atlantis.error is None  # a tool error is a result, not an exception
    assert atlantis.attributes["error.type"] == "tool_error"
    assert calls[3].attributes["mcp.resource.uri"] == "notes://packing"
    assert calls[4].attributes["gen_ai.prompt.name"] == "briefing"
    failure = calls[5].error
    assert failure is not None
    assert failure.type.endswith("MCPError")
    assert json.loads(failure.args_json or "null") == [
        -32602,
        "Unknown resource: bogus://nothing",
        {"uri": "bogus://nothing"},
    ]


@pytest.mark.slow
def test_stdio_server_subprocess_is_not_started_by_the_replay(tmp_path: Path) -> None:
    """A client of a stdio server records through the real subprocess; the replay of the
    same client code starts no process."""
    starts = tmp_path / "starts.txt"
    params = StdioServerParameters(
        command=sys.executable,
        args=[SERVER_SCRIPT],
        env={"MCP_WEATHER_STARTS": str(starts)},
    )

    async def agent() -> list[Any]:
        async with instrument(Client(params)) as client:
            tools = await client.list_tools()
            result = await client.call_tool("stations", {"region": "north"})
            return [tools, result]

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        recorded = asyncio.run(agent())
    assert starts.read_text().count("started") == 1
    with replay(tmp_path / "run.sftrace") as session:
        replayed = asyncio.run(agent())
    assert starts.read_text().count("started") == 1
    assert replayed == recorded
    assert replayed[1].structured_content == {"stations": ["north-1", "north-2"]}
    session.verify_complete()


@asynccontextmanager
async def refusing_streams() -> AsyncIterator[tuple[Any, Any, list[Any]]]:
    """A ClientSession's streams with nothing behind them: what is written is kept in
    ``sent`` and never answered."""
    client_write, server_read = anyio.create_memory_object_stream[Any](100)
    server_write, client_read = anyio.create_memory_object_stream[Any](100)
    sent: list[Any] = []
    async with client_write, server_read, server_write, client_read:
        yield client_read, client_write, sent
        while True:
            try:
                sent.append(server_read.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break


async def session_agent(session: ClientSession) -> list[Any]:
    async with session:
        initialized = await session.initialize()
        tools = await session.list_tools()
        result = await session.call_tool("forecast", {"city": "Rome"})
        return [initialized, tools, result, session.protocol_version]


def test_client_session_over_the_in_memory_transport_replays_every_method(
    tmp_path: Path,
) -> None:
    """A ClientSession on the SDK's in-memory transport: the handshake and every recorded
    method (listings included) replay on streams nothing answers."""
    from mcp.client._memory import InMemoryTransport

    async def everything(session: ClientSession) -> list[Any]:
        async with session:
            return [
                await session.initialize(),
                await session.list_prompts(),
                await session.list_resources(),
                await session.get_prompt("briefing", {"city": "Oslo"}),
                await session.read_resource("notes://packing"),
                await session.call_tool("stations", {"region": "south"}),
            ]

    async def recorded_run() -> list[Any]:
        async with InMemoryTransport(weather.server) as (read, write):
            return await everything(instrument(ClientSession(read, write)))

    async def replayed_run() -> tuple[list[Any], list[Any]]:
        async with refusing_streams() as (read, write, sent):
            found = await everything(instrument(ClientSession(read, write)))
        return found, sent

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        recorded = asyncio.run(recorded_run())
    weather.TOOL_RUNS.clear()
    with replay(tmp_path / "run.sftrace") as session:
        replayed, sent = asyncio.run(replayed_run())
    assert sent == []
    assert weather.TOOL_RUNS == []
    assert replayed == recorded
    assert [type(item) for item in replayed] == [type(item) for item in recorded]
    assert [c.name for c in load_bundle(tmp_path / "run.sftrace").calls] == [
        "mcp:initialize",
        "mcp:prompts/list",
        "mcp:resources/list",
        "mcp:prompts/get",
        "mcp:resources/read",
        "stations",
    ]
    session.verify_complete()


@pytest.mark.slow
def test_client_session_over_stdio_replays_on_a_transport_that_answers_nothing(
    tmp_path: Path,
) -> None:
    """A ClientSession: initialize (its negotiated state installed), list and call replay
    from the recording; nothing is written to the transport."""
    params = StdioServerParameters(command=sys.executable, args=[SERVER_SCRIPT])

    async def recorded_run() -> list[Any]:
        async with stdio_client(params) as (read, write):
            return await session_agent(instrument(ClientSession(read, write)))

    async def replayed_run() -> tuple[list[Any], list[Any]]:
        async with refusing_streams() as (read, write, sent):
            found = await session_agent(instrument(ClientSession(read, write)))
        return found, sent

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        recorded = asyncio.run(recorded_run())
    with replay(tmp_path / "run.sftrace") as session:
        replayed, sent = asyncio.run(replayed_run())
    assert sent == []
    assert replayed == recorded
    assert replayed[3] == recorded[3] is not None  # the recorded protocol version, adopted
    assert [c.name for c in load_bundle(tmp_path / "run.sftrace").calls] == [
        "mcp:initialize",
        "mcp:tools/list",
        "forecast",
    ]
    session.verify_complete()


def test_changed_tool_arguments_diverge_with_the_differing_path(tmp_path: Path) -> None:
    """Strict matching compares the tool arguments: a different city is a mismatch."""

    async def agent(city: str) -> Any:
        async with instrument(Client(weather.server)) as client:
            return await client.call_tool("forecast", {"city": city})

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        asyncio.run(agent("Paris"))
    with (
        replay(tmp_path / "run.sftrace"),
        pytest.raises(ReplayMismatchError, match=r"\$\.city") as raised,
    ):
        asyncio.run(agent("Lyon"))
    assert [d[0] for d in raised.value.differences] == ["$.city"]


def test_ignore_fields_leave_an_argument_out_of_matching(tmp_path: Path) -> None:
    """An argument named in ignore_fields is not recorded and may change in the replay."""

    async def agent(days: int) -> Any:
        client = instrument(Client(weather.server), ignore_fields=["days"])
        async with client:
            return await client.call_tool("forecast", {"city": "Paris", "days": days})

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        recorded = asyncio.run(agent(2))
    with replay(tmp_path / "run.sftrace"):
        replayed = asyncio.run(agent(5))
    assert replayed == recorded
    assert load_bundle(tmp_path / "run.sftrace").calls[0].input == {"city": "Paris"}


def test_session_of_a_client_not_connected_by_the_replay_is_a_clear_error(
    tmp_path: Path,
) -> None:
    """Reading client.session in a replay says why it is not there instead of hanging."""

    async def agent() -> Any:
        async with instrument(Client(weather.server)) as client:
            await client.call_tool("forecast", {"city": "Paris"})
            return client.server_info

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        asyncio.run(agent())
    with replay(tmp_path / "run.sftrace"), pytest.raises(ReplayError, match="did not connect"):
        asyncio.run(agent())


def test_live_policy_connects_the_client_when_the_replay_runs_the_call(tmp_path: Path) -> None:
    """A client entered in a replay connects on the first call the replay runs for real."""

    async def agent() -> Any:
        client = instrument(Client(weather.server), replay_policy="live")
        async with client:
            return await client.call_tool("forecast", {"city": "Paris"})

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        recorded = asyncio.run(agent())
    weather.TOOL_RUNS.clear()
    with replay(tmp_path / "run.sftrace", mode="live", allow_live_tools=["forecast"]) as session:
        replayed = asyncio.run(agent())
    assert weather.TOOL_RUNS == ["forecast Paris"]
    assert replayed == recorded
    assert [m.action for m in session.matched] == ["executed"]


def test_outside_record_and_replay_the_client_is_untouched(tmp_path: Path, spans: Any) -> None:
    """No run: the real server answers and nothing is recorded."""

    async def agent() -> Any:
        async with instrument(Client(weather.server)) as client:
            return await client.call_tool("forecast", {"city": "Paris"})

    result = asyncio.run(agent())
    assert result.content[0].text == "Paris: sunny for 1 days"
    assert weather.TOOL_RUNS == ["forecast Paris"]
    assert spans.get_finished_spans() == ()


def test_instrumenting_twice_records_each_call_once(tmp_path: Path) -> None:
    """instrument() is idempotent; a Client instrumented over its own session records once."""

    async def agent() -> Any:
        client = instrument(instrument(Client(weather.server)))
        async with client:
            instrument(client.session)
            return await client.call_tool("forecast", {"city": "Paris"})

    with record("mcp-agent", output=tmp_path / "run.sftrace"):
        asyncio.run(agent())
    assert [c.name for c in load_bundle(tmp_path / "run.sftrace").calls] == ["forecast"]


def test_instrument_refuses_other_objects() -> None:
    """Anything but an mcp.Client or ClientSession is a ConfigError naming its type."""
    with pytest.raises(ConfigError, match=r"mcp\.Client or mcp\.ClientSession, got dict"):
        instrument({})  # type: ignore[type-var]


@pytest.mark.slow
def test_mcp_agent_example_records_and_replays_without_a_server(tmp_path: Path) -> None:
    """examples/mcp_agent/main.py records a run against its stdio server and replays it
    with no server process started."""
    script = Path(__file__).resolve().parents[2] / "examples" / "mcp_agent" / "main.py"
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MCP server processes started: 0" in result.stdout
    bundle = load_bundle(tmp_path / ".sftrace" / "mcp_agent" / "trip.sftrace")
    assert [call.name for call in bundle.calls] == [
        "mcp:tools/list",
        "forecast",
        "mcp:resources/read",
        "forecast",
        "forecast",
        "mcp:resources/read",
    ]
    assert bundle.calls[3].output["isError"] is True


class ForecastUnreadable(Exception):
    """The agent's own error, raised inside ``async with client``."""


async def _failing_forecast_agent() -> Any:
    async with instrument(Client(weather.server)) as client:
        result = await client.call_tool("forecast", {"city": "Paris"})
        raise ForecastUnreadable(f"cannot read {result.content[0].text!r}")


def test_a_run_failing_inside_the_client_block_replays_as_the_same_failure(
    tmp_path: Path,
) -> None:
    """The connected client's task groups wrap the agent's exception in exception groups; the
    replay connects nothing, so it raises it bare: the run's failure is the agent's exception
    both times, the failure is reproduced and compare finds nothing."""
    import sftrace

    bundle = tmp_path / "run.sftrace"
    with pytest.raises(BaseExceptionGroup), record("mcp-agent", output=bundle):
        asyncio.run(_failing_forecast_agent())
    failure = load_bundle(bundle).failure
    assert failure is not None
    assert failure.type == f"{__name__}.ForecastUnreadable"
    assert failure.message == "cannot read 'Paris: sunny for 1 days'"
    result = sftrace.replay_run(bundle, _failing_forecast_agent)
    assert isinstance(result.error, ForecastUnreadable)
    assert result.reproduced_failure
    assert sftrace.compare(bundle, result).findings == ()
