"""``llm_request`` around a real SDK call that no integration instruments (the README's
Record example): the replay hands the agent the SDK's own object again, rebuilt from the
recorded JSON, without sending anything. The integrations, which rebuild their objects
themselves, record no ``sftrace.output.type``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import fake_llm_api as fake
import openai
import pytest
from openai.types.chat import ChatCompletion
from roundtrip import record_then_replay

from sftrace import allm_request, llm_request, load_bundle, record, replay
from sftrace._model import attributes as A
from sftrace.integrations.anthropic import instrument as instrument_anthropic
from sftrace.integrations.openai import instrument as instrument_openai
from sftrace.integrations.openai import uninstrument_all

MESSAGES = [{"role": "user", "content": "Where is my parcel 42?"}]


@pytest.fixture
def api() -> fake.FakeAPI:
    return fake.FakeAPI("openai", request_id_header="x-request-id")


@pytest.fixture(autouse=True)
def _no_class_patches() -> Any:
    yield
    uninstrument_all()


def openai_client(api: fake.FakeAPI, *, is_async: bool = False) -> Any:
    return api.sdk_client(
        openai.OpenAI,
        openai.AsyncOpenAI,
        is_async=is_async,
        api_key="sk-test",
        base_url="http://llm.test/v1",
    )


def llm_calls(path: Path) -> list[Any]:
    return [call for call in load_bundle(path).calls if call.kind == A.KIND_LLM]


def test_chat_completion_round_trips(tmp_path: Path, api: fake.FakeAPI) -> None:
    api.reply_json(fake.chat_completion("Your parcel ships today."))
    client = openai_client(api)

    def agent() -> ChatCompletion:
        return llm_request(
            provider="openai",
            model="gpt-4o",
            input={"messages": MESSAGES},
            call=lambda: client.chat.completions.create(model="gpt-4o", messages=MESSAGES),
        )

    bundle = tmp_path / "b.sftrace"
    recorded, replayed, _ = record_then_replay(bundle, api, agent)

    assert type(replayed) is ChatCompletion
    assert replayed.choices[0].message.content == "Your parcel ships today."
    assert replayed.usage is not None
    assert replayed.usage.prompt_tokens == 21
    assert replayed.model_dump() == recorded.model_dump()
    (call,) = llm_calls(bundle)
    assert call.attributes[A.OUTPUT_TYPE] == "openai.types.chat.chat_completion.ChatCompletion"


def test_async_chat_completion_round_trips(tmp_path: Path, api: fake.FakeAPI) -> None:
    api.reply_json(fake.chat_completion("Tomorrow."))
    client = openai_client(api, is_async=True)

    async def agent() -> str:
        reply = await allm_request(
            provider="openai",
            model="gpt-4o",
            input={"messages": MESSAGES},
            call=lambda: client.chat.completions.create(model="gpt-4o", messages=MESSAGES),
        )
        return str(reply.choices[0].message.content)

    bundle = tmp_path / "b.sftrace"
    recorded, replayed, _ = record_then_replay(bundle, api, lambda: asyncio.run(agent()))

    assert recorded == replayed == "Tomorrow."


def test_anthropic_message_round_trips(tmp_path: Path) -> None:
    api = fake.FakeAPI("anthropic", request_id_header="request-id")
    api.reply_json(fake.message("Ships today."))
    client = api.sdk_client(
        anthropic.Anthropic,
        anthropic.AsyncAnthropic,
        is_async=False,
        api_key="sk-ant-test",
        base_url="http://llm.test",
    )

    def agent() -> Any:
        return llm_request(
            provider="anthropic",
            model="claude-test-1",
            input={"messages": MESSAGES},
            call=lambda: client.messages.create(
                model="claude-test-1", max_tokens=100, messages=MESSAGES
            ),
        )

    recorded, replayed, _ = record_then_replay(tmp_path / "b.sftrace", api, agent)

    assert type(replayed) is anthropic.types.Message
    assert replayed.content[0].text == "Ships today."
    assert replayed.model_dump() == recorded.model_dump()


def test_integrations_record_no_output_type(tmp_path: Path, api: fake.FakeAPI) -> None:
    """The OpenAI and Anthropic integrations rebuild the SDK's objects themselves: their
    spans carry no sftrace.output.type, and their replays are what they were."""
    api.reply_json(fake.chat_completion("From the integration."))
    ant = fake.FakeAPI("anthropic", request_id_header="request-id")
    ant.reply_json(fake.message("Also."))
    client = instrument_openai(openai_client(api))
    claude = instrument_anthropic(
        ant.sdk_client(
            anthropic.Anthropic,
            anthropic.AsyncAnthropic,
            is_async=False,
            api_key="sk-ant-test",
            base_url="http://llm.test",
        )
    )

    def agent() -> tuple[Any, Any]:
        return (
            client.chat.completions.create(model="gpt-4o", messages=MESSAGES),
            claude.messages.create(model="claude-test-1", max_tokens=100, messages=MESSAGES),
        )

    bundle = tmp_path / "b.sftrace"
    with record("agent", output=bundle):
        recorded = agent()
    api.offline()
    ant.offline()
    with replay(bundle) as session:
        replayed = agent()
    session.verify_complete()

    assert [A.OUTPUT_TYPE in call.attributes for call in llm_calls(bundle)] == [False, False]
    assert type(replayed[0]) is ChatCompletion
    assert type(replayed[1]) is anthropic.types.Message
    assert replayed[0].choices[0].message.content == recorded[0].choices[0].message.content
    assert replayed[1].content[0].text == recorded[1].content[0].text
