"""The Pydantic AI integration: an ``Agent`` on ``OpenAIChatModel`` (its OpenAI client
answered by an ``httpx.MockTransport``) with a function tool, recorded, then replayed
with no request sent and no tool body run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_llm_api as fake
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelResponse, RetryPromptPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from roundtrip import record_then_replay

from sftrace import ConfigError, load_bundle
from sftrace.integrations.pydantic_ai import instrument

PROMPT = "Where is parcel 42?"


@pytest.fixture(autouse=True)
def event_loop_run_sync_uses() -> Iterator[None]:
    """``Agent.run_sync`` runs on the thread's event loop, making one it leaves open when
    there is none: give it one, closed after the test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


class Status(BaseModel):
    parcel_id: int
    state: str


MODELS = {"chat": OpenAIChatModel, "responses": OpenAIResponsesModel}


def make_agent(api: fake.FakeAPI, ran: list[int], model_api: str = "chat") -> Agent[None, str]:
    client = AsyncOpenAI(
        http_client=api.async_client(), api_key="sk-test", base_url="http://llm.test/v1"
    )
    model = MODELS[model_api]("gpt-4o", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model)

    @agent.tool_plain
    def parcel_status(parcel_id: int) -> Status:
        ran.append(parcel_id)
        return Status(parcel_id=parcel_id, state="shipped")

    return instrument(agent)


def tool_call_chunks(call: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed chat completion whose answer is one tool call (the text chunks, emptied)."""
    chunks = fake.chat_chunks([""])
    chunks[1]["choices"][0]["delta"] = {"tool_calls": [{"index": 0, **call}]}
    chunks[2]["choices"][0]["finish_reason"] = "tool_calls"
    return chunks


FUNCTION_CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "parcel_status",
    "arguments": '{"parcel_id": 42}',
    "status": "completed",
}


def function_call_response() -> dict[str, Any]:
    """A Responses API response whose output is one call of ``parcel_status``."""
    return {**fake.response_object(""), "output": [FUNCTION_CALL]}


def function_call_events() -> list[dict[str, Any]]:
    """The same response streamed: the call's item added, its arguments, done."""
    added = {**FUNCTION_CALL, "arguments": "", "status": "in_progress"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": fake.response_object("", status="in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": FUNCTION_CALL["arguments"],
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": FUNCTION_CALL["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": FUNCTION_CALL},
        {"type": "response.completed", "response": function_call_response()},
    ]
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def script(api: fake.FakeAPI, *, stream: bool, model_api: str = "chat") -> None:
    if model_api == "responses":
        if stream:
            api.reply_stream(function_call_events(), named=True, done=False)
            api.reply_stream(fake.response_events(["It ", "shipped."]), named=True, done=False)
        else:
            api.reply_json(function_call_response())
            api.reply_json(fake.response_object("It shipped."))
        return
    call = fake.tool_call("call_1", "parcel_status", {"parcel_id": 42})
    if stream:
        api.reply_stream(tool_call_chunks(call), named=False, done=True)
        api.reply_stream(fake.chat_chunks(["It ", "shipped."]), named=False, done=True)
    else:
        api.reply_json(fake.chat_completion(tool_calls=[call]))
        api.reply_json(fake.chat_completion("It shipped."))


@pytest.mark.parametrize("model_api", ["chat", "responses"])
@pytest.mark.parametrize("how", ["run_sync", "run", "run_stream", "run_stream_sync"])
def test_replay_returns_pydantic_ai_messages_without_requests_or_tool_runs(
    tmp_path: Path, how: str, model_api: str
) -> None:
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    ran: list[int] = []
    agent = make_agent(api, ran, model_api)
    script(api, stream=how.startswith("run_stream"), model_api=model_api)

    async def streamed() -> tuple[str, list[Any]]:
        async with agent.run_stream(PROMPT) as result:
            text = "".join([piece async for piece in result.stream_text(delta=True)])
        return text, result.all_messages()

    def run() -> tuple[str, list[Any]]:
        if how == "run_sync":
            result = agent.run_sync(PROMPT)
        elif how == "run":
            result = asyncio.run(agent.run(PROMPT))
        elif how == "run_stream_sync":
            streaming = agent.run_stream_sync(PROMPT)
            text = "".join(streaming.stream_text(delta=True))
            return text, streaming.all_messages()
        else:
            return asyncio.run(streamed())
        return result.output, result.all_messages()

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", api, run)

    assert replayed[0] == recorded[0] == "It shipped."
    assert ran == [42]  # the tool ran when recorded, not when replayed
    [call_part] = [p for m in replayed[1] for p in m.parts if isinstance(p, ToolCallPart)]
    assert (call_part.tool_name, call_part.args_as_dict()) == ("parcel_status", {"parcel_id": 42})
    [returned] = [p for m in replayed[1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returned.content == Status(parcel_id=42, state="shipped")
    assert any(isinstance(m, ModelResponse) for m in replayed[1])
    calls = load_bundle(tmp_path / "run.sftrace").calls
    assert [(c.kind, c.name) for c in calls] == [
        ("llm", "gpt-4o"),
        ("tool", "parcel_status"),
        ("llm", "gpt-4o"),
    ]
    assert calls[1].input == {"parcel_id": 42}
    assert len(session.matched) == 3


def test_an_agent_on_another_model_is_refused() -> None:
    from pydantic_ai.models.test import TestModel

    with pytest.raises(ConfigError, match="TestModel"):
        instrument(Agent(TestModel()))


def test_a_tool_asking_the_model_to_retry_replays_the_retry(tmp_path: Path) -> None:
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    client = AsyncOpenAI(
        http_client=api.async_client(), api_key="sk-test", base_url="http://llm.test/v1"
    )
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)))
    ran: list[int] = []

    @agent.tool_plain
    def parcel_status(parcel_id: int) -> str:
        ran.append(parcel_id)
        if parcel_id != 42:
            raise ModelRetry(f"no parcel {parcel_id}; the customer's is 42")
        return "shipped"

    instrument(agent)
    for parcel_id in (41, 42):
        call = fake.tool_call(f"call_{parcel_id}", "parcel_status", {"parcel_id": parcel_id})
        api.reply_json(fake.chat_completion(tool_calls=[call]))
    api.reply_json(fake.chat_completion("It shipped."))

    def run() -> list[Any]:
        messages = agent.run_sync(PROMPT).all_messages()
        # Pydantic AI answers the model's tool call with the retry message: as a
        # RetryPromptPart (1.32 to 2.0 at least), as a ToolReturnPart (2.68)
        answers = (ToolReturnPart, RetryPromptPart)
        return [p.content for m in messages for p in m.parts if isinstance(p, answers)]

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, run)

    assert replayed == recorded == ["no parcel 41; the customer's is 42", "shipped"]
    assert ran == [41, 42]
