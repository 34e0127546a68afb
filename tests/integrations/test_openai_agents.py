"""The OpenAI Agents SDK integration: runs with function tools and handoffs, the model
answered by ``httpx.MockTransport``, recorded then replayed with no request and no tool run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_llm_api as fake
import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    handoff,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.models import _openai_shared
from fake_responses_api import ResponsesModelAPI
from pydantic import BaseModel

from sftrace import (
    BundleError,
    ConfigError,
    ReplayMismatchError,
    load_bundle,
    record,
    replay,
    replay_run,
)
from sftrace.integrations._agents_model import _restore_response
from sftrace.integrations.openai_agents import instrument, uninstrument_all

QUESTION = "What is the weather in Lisbon?"
TOOL_RUNS: list[str] = []


@pytest.fixture(autouse=True)
def _sdk_state() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK's own trace export would reach api.openai.com
    TOOL_RUNS.clear()
    # Runner.run_sync reuses the thread's default loop and shuts its async generators down
    # after each run, so a later run_sync that sends requests on it warns
    # (ResourceWarning, an error here): each test gets a fresh default loop.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    uninstrument_all()
    asyncio.set_event_loop(None)
    loop.close()


class Forecast(BaseModel):
    city: str
    sky: str
    celsius: int


@function_tool
def get_forecast(city: str) -> Forecast:
    """Tomorrow's forecast for a city."""
    TOOL_RUNS.append(city)
    if city == "Atlantis":
        raise ValueError(f"no forecast for {city}")
    return Forecast(city=city, sky="sunny", celsius=24)


def build_agents(model: Any) -> Agent[Any]:
    """A triage agent that hands off to a weather agent with a function tool."""
    weather = Agent(
        name="weather_agent", instructions="Give forecasts.", tools=[get_forecast], model=model
    )
    return Agent(name="triage", instructions="Route the question.", handoffs=[weather], model=model)


def responses_agent(api: ResponsesModelAPI) -> Agent[Any]:
    return instrument(
        build_agents(OpenAIResponsesModel(model="gpt-4.1", openai_client=api.client()))
    )


async def run_streamed(agent: Agent[Any], question: str) -> tuple[Any, str, list[str]]:
    result = Runner.run_streamed(agent, question)
    kinds = [event.type async for event in result.stream_events()]
    return result.final_output, result.last_agent.name, kinds


def run_with(how: str, agent: Agent[Any], question: str = QUESTION) -> Any:
    if how == "run":
        result = asyncio.run(Runner.run(agent, question))
    elif how == "run_sync":
        result = Runner.run_sync(agent, question)
    else:
        return asyncio.run(run_streamed(agent, question))
    return result.final_output, result.last_agent.name


@pytest.mark.parametrize("how", ["run", "run_sync", "run_streamed"])
def test_a_run_with_tools_and_handoffs_replays_without_requests_or_tool_runs(
    tmp_path: Path, how: str
) -> None:
    """Runner.run, run_sync and run_streamed replay to the same output and last agent,
    sending no request and running no tool."""
    api = ResponsesModelAPI()
    agent = responses_agent(api)
    with record("triage", output=tmp_path / "run.sftrace"):
        recorded = run_with(how, agent)
    assert TOOL_RUNS == ["Lisbon"]
    TOOL_RUNS.clear()
    api.offline()
    with replay(tmp_path / "run.sftrace") as session:
        replayed = run_with(how, agent)
    assert replayed == recorded
    assert recorded[0] == "Forecast: city='Lisbon' sky='sunny' celsius=24."
    assert recorded[1] == "weather_agent"
    assert api.refused == []
    assert TOOL_RUNS == []
    assert session.divergence is None
    session.verify_complete()
    calls = load_bundle(tmp_path / "run.sftrace").calls
    assert [(c.kind, c.name) for c in calls] == [
        ("llm", "gpt-4.1"),
        ("llm", "gpt-4.1"),
        ("tool", "get_forecast"),
        ("llm", "gpt-4.1"),
    ]
    assert [m.action for m in session.matched] == ["substituted"] * 4
    if how == "run_streamed":
        assert "chunks" in calls[0].output
        assert "raw_response_event" in replayed[2]


def test_what_is_recorded_for_model_and_tool_calls(tmp_path: Path) -> None:
    """The model request (instructions, input items, tools, handoffs), its response and
    usage, and the tool's arguments and return value, as documented."""
    api = ResponsesModelAPI()
    with record("triage", output=tmp_path / "run.sftrace"):
        run_with("run_sync", responses_agent(api))
    triage, weather, tool, final = load_bundle(tmp_path / "run.sftrace").calls
    assert triage.provider == "openai"
    assert triage.input["system_instructions"] == "Route the question."
    assert triage.input["input"] == [{"content": QUESTION, "role": "user"}]
    assert [h["tool_name"] for h in triage.input["handoffs"]] == ["transfer_to_weather_agent"]
    assert triage.input["tools"] == []
    assert triage.output["output"][0]["name"] == "transfer_to_weather_agent"
    assert triage.output["usage"]["total_tokens"] == 62
    assert triage.attributes["sftrace.usage.total_tokens"] == 62
    assert weather.input["tools"][0]["name"] == "get_forecast"
    assert weather.input["tools"][0]["parameters"]["required"] == ["city"]
    assert tool.input == {"city": "Lisbon"}
    assert tool.output == {"city": "Lisbon", "sky": "sunny", "celsius": 24}
    outputs = [i for i in final.input["input"] if i.get("type") == "function_call_output"]
    assert outputs[-1]["output"] == "city='Lisbon' sky='sunny' celsius=24"


def test_a_tool_error_replays_into_the_same_message_for_the_model(tmp_path: Path) -> None:
    """A tool that raises is recorded as failed; the replay raises it again inside the
    SDK's error handling, so the model gets the same error text and nothing diverges."""
    api = ResponsesModelAPI()
    agent = responses_agent(api)
    with record("triage", output=tmp_path / "run.sftrace"):
        recorded = run_with("run_sync", agent, "What is the weather in Atlantis?")
    api.offline()
    TOOL_RUNS.clear()
    with replay(tmp_path / "run.sftrace") as session:
        replayed = run_with("run_sync", agent, "What is the weather in Atlantis?")
    assert replayed == recorded
    assert "An error occurred while running the tool" in recorded[0]
    assert TOOL_RUNS == []
    session.verify_complete()
    assert [m.action for m in session.matched] == ["substituted"] * 4
    tool = load_bundle(tmp_path / "run.sftrace").calls[2]
    assert tool.error is not None
    assert (tool.error.type, tool.error.message) == ("ValueError", "no forecast for Atlantis")


def test_a_changed_agent_diverges_on_the_model_request(tmp_path: Path) -> None:
    """Strict matching compares the model request: new instructions are a mismatch."""
    api = ResponsesModelAPI()
    agent = responses_agent(api)
    with record("triage", output=tmp_path / "run.sftrace"):
        run_with("run_sync", agent)
    api.offline()
    agent.instructions = "Route the question politely."
    with replay(tmp_path / "run.sftrace"), pytest.raises(ReplayMismatchError) as raised:
        run_with("run_sync", agent)
    assert [d[0] for d in raised.value.differences] == ["$.system_instructions"]
    assert api.refused == []


@pytest.mark.parametrize(
    ("recorded_how", "replayed_how", "reason"),
    [
        ("run_streamed", "run", "was streamed in the recording (Runner.run_streamed) but not"),
        ("run", "run_streamed", "was not streamed in the recording (Runner.run) but is"),
    ],
)
def test_a_run_streamed_one_way_and_replayed_the_other_diverges_at_the_first_model_call(
    tmp_path: Path, recorded_how: str, replayed_how: str, reason: str
) -> None:
    """Whether the model call streams is not in its compared request (bundles recorded
    before it still match), but a recorded response of the other shape cannot answer it:
    the replay diverges there, not an internal KeyError or a 'was the bundle edited?'."""
    api = ResponsesModelAPI()
    agent = responses_agent(api)
    with record("triage", output=tmp_path / "run.sftrace"):
        run_with(recorded_how, agent)
    api.offline()
    result = replay_run(tmp_path / "run.sftrace", lambda: run_with(replayed_how, agent))
    assert result.status == "diverged", result.error
    divergence = result.divergence
    assert isinstance(divergence, ReplayMismatchError)
    assert result.error is divergence
    assert divergence.call_number == 1
    assert divergence.recorded is not None
    assert divergence.recorded["seq"] == 1
    assert divergence.reached["name"] == "gpt-4.1"
    assert str(divergence).startswith("replay diverged at call 1: call 1 (llm openai/gpt-4.1) ")
    assert reason in str(divergence)
    assert api.refused == []


@pytest.mark.parametrize("output", [{"chunks": [], "complete": True}, {"output": []}, None])
def test_a_recorded_model_response_of_another_shape_is_a_bundle_error(output: Any) -> None:
    """What restores a recorded model response refuses one edited out of shape with a
    BundleError naming it, never an internal KeyError."""
    with pytest.raises(BundleError, match=r"no 'output' list and 'usage'\): was the bundle edited"):
        _restore_response(output)


def test_default_provider_run_replays_despite_its_per_run_prompt_cache_key(
    tmp_path: Path,
) -> None:
    """For the official OpenAI endpoint the SDK puts a new prompt_cache_key in every run's
    model settings: it is not recorded or compared. (Agents naming their model by string
    go through the SDK's default provider and client.)"""
    api = ResponsesModelAPI()
    previous = _openai_shared.get_default_openai_client()
    client = api.client(base_url="https://api.openai.com/v1")  # answered by the mock
    set_default_openai_client(client, use_for_tracing=False)
    try:
        agent = instrument(build_agents("gpt-4.1"))
        with record("triage", output=tmp_path / "run.sftrace"):
            recorded = run_with("run_sync", agent)
        api.offline()
        with replay(tmp_path / "run.sftrace") as session:
            replayed = run_with("run_sync", agent)
    finally:
        _openai_shared.set_default_openai_client(previous)  # type: ignore[arg-type]
    assert replayed == recorded
    assert "prompt_cache_key" in json.dumps(api.requests[0])  # the SDK did send one
    session.verify_complete()
    first = load_bundle(tmp_path / "run.sftrace").calls[0]
    assert "prompt_cache_key" not in json.dumps(first.input)


def test_chat_completions_model_records_and_replays(tmp_path: Path) -> None:
    """OpenAIChatCompletionsModel: the same model hook, Chat Completions over the wire."""
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    handoff = fake.tool_call("call_1", "transfer_to_weather_agent", {})
    forecast = fake.tool_call("call_2", "get_forecast", {"city": "Lisbon"})
    api.reply_json(fake.chat_completion(tool_calls=[handoff]))
    api.reply_json(fake.chat_completion(tool_calls=[forecast]))
    api.reply_json(fake.chat_completion("Sunny in Lisbon."))
    client = api.sdk_client(
        openai.OpenAI,
        openai.AsyncOpenAI,
        is_async=True,
        api_key="sk-test",
        base_url="http://llm.test/v1",
    )
    agent = instrument(
        build_agents(OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client))
    )
    with record("triage", output=tmp_path / "run.sftrace"):
        recorded = run_with("run_sync", agent)
    api.offline()
    TOOL_RUNS.clear()
    with replay(tmp_path / "run.sftrace") as session:
        replayed = run_with("run_sync", agent)
    assert replayed == recorded == ("Sunny in Lisbon.", "weather_agent")
    assert api.refused == []
    assert TOOL_RUNS == []
    session.verify_complete()


def test_chat_completions_model_streamed_run_replays(tmp_path: Path) -> None:
    """A streamed run on the Chat Completions model: the events the SDK made of the chunks
    are recorded and replayed as its own event types."""
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    api.reply_stream(fake.chat_chunks(["Sunny ", "in ", "Lisbon."]), named=False, done=True)
    client = api.sdk_client(
        openai.OpenAI,
        openai.AsyncOpenAI,
        is_async=True,
        api_key="sk-test",
        base_url="http://llm.test/v1",
    )
    model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    agent = instrument(Agent(name="weather_agent", instructions="Give forecasts.", model=model))
    with record("weather", output=tmp_path / "run.sftrace"):
        recorded = run_with("run_streamed", agent)
    api.offline()
    with replay(tmp_path / "run.sftrace") as session:
        replayed = run_with("run_streamed", agent)
    assert replayed == recorded
    assert recorded[0] == "Sunny in Lisbon."
    assert api.refused == []
    session.verify_complete()
    output = load_bundle(tmp_path / "run.sftrace").calls[0].output
    assert output["complete"] is True
    assert any(c.get("type") == "response.output_text.delta" for c in output["chunks"])


def test_outside_record_and_replay_nothing_is_recorded(spans: Any) -> None:
    """An instrumented agent run outside record()/replay() runs as before, unrecorded."""
    api = ResponsesModelAPI()
    output = run_with("run_sync", responses_agent(api))
    assert output[1] == "weather_agent"
    assert len(api.requests) == 3
    assert spans.get_finished_spans() == ()


@function_tool
async def get_alerts(city: str) -> list[str]:
    """Weather alerts for a city (an async tool)."""
    TOOL_RUNS.append(f"alerts {city}")
    return [f"{city}: heat"]


def test_agents_behind_handoff_objects_and_async_tools_are_instrumented(tmp_path: Path) -> None:
    """handoff(agent) targets are found, and async function tools replay like sync ones."""
    api = ResponsesModelAPI()
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=api.client())
    weather = Agent(
        name="weather_agent",
        instructions="Give forecasts.",
        tools=[get_alerts, get_forecast],
        model=model,
    )
    triage = instrument(Agent(name="triage", handoffs=[handoff(weather)], model=model))
    with record("triage", output=tmp_path / "run.sftrace"):
        recorded = run_with("run", triage)
    assert TOOL_RUNS == ["Lisbon", "alerts Lisbon"]
    api.offline()
    TOOL_RUNS.clear()
    with replay(tmp_path / "run.sftrace") as session:
        replayed = run_with("run", triage)
    assert replayed == recorded
    assert recorded[0] == "Forecast: ['Lisbon: heat']."
    assert TOOL_RUNS == []
    session.verify_complete()
    calls = load_bundle(tmp_path / "run.sftrace").calls
    assert [c.name for c in calls if c.kind == "tool"] == ["get_forecast", "get_alerts"]
    assert calls[4].output == ["Lisbon: heat"]


def test_instrument_refuses_what_is_not_an_agent() -> None:
    """instrument() names what it expected and where OpenAI clients go instead."""
    with pytest.raises(ConfigError, match=r"agents\.Agent, got AsyncOpenAI"):
        instrument(openai.AsyncOpenAI(api_key="sk-test"))  # type: ignore[type-var]


@pytest.mark.slow
def test_openai_agents_example_records_and_replays_offline(tmp_path: Path) -> None:
    """examples/openai_agents/main.py records a run with a handoff and tools and replays it
    (run, run_sync and streamed) with no request and no tool run."""
    script = Path(__file__).resolve().parents[2] / "examples" / "openai_agents" / "main.py"
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("requests sent: 0; tools run: 0") == 2
    bundle = load_bundle(tmp_path / ".sftrace" / "openai_agents" / "trip.sftrace")
    assert [call.kind for call in bundle.calls] == ["llm", "llm", "tool", "tool", "llm"]
    assert json.dumps(bundle.calls[0].input).count("transfer_to_") == 1
