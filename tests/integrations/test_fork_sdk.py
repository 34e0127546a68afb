"""A fork's override at an SDK call becomes the SDK's own response object, as a recorded
answer does; nothing is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import fake_llm_api as fake
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion

from sftrace import fork, record, trace_tool
from sftrace.integrations import anthropic as anthropic_integration
from sftrace.integrations import openai as openai_integration

TOOLS_RUN: list[str] = []


@trace_tool
def escalate(ticket: str) -> str:
    TOOLS_RUN.append(f"escalate:{ticket}")
    return f"escalated {ticket}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    TOOLS_RUN.clear()


def _openai_agent(llm: Any, *, stream: bool = False) -> str:
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "ticket 7"}]}
    if stream:
        text = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in llm.chat.completions.create(**request, stream=True)
            if chunk.choices
        )
    else:
        reply = llm.chat.completions.create(**request)
        assert isinstance(reply, ChatCompletion)
        text = reply.choices[0].message.content
    return escalate("7") if text == "escalate" else f"answered: {text}"


@pytest.mark.parametrize("stream", [False, True])
def test_openai_override_is_built_into_the_sdk_response(tmp_path: Path, stream: bool) -> None:
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    if stream:
        api.reply_stream(fake.chat_chunks(["all ", "good"]), named=False, done=True)
    else:
        api.reply_json(fake.chat_completion("all good"))
    llm = openai_integration.instrument(
        api.sdk_client(
            openai.OpenAI,
            openai.AsyncOpenAI,
            is_async=False,
            api_key="sk-test",
            base_url="http://llm.test/v1",
        )
    )
    path = tmp_path / "run.sftrace"
    with record("agent", output=path) as session:
        session.set_output(_openai_agent(llm, stream=stream))
    api.offline()
    # The override has the shape the integration records: the response JSON, or for a
    # stream {"chunks": [...]}.
    override: Any = (
        {"chunks": fake.chat_chunks(["escalate"], usage=False), "complete": True}
        if stream
        else fake.chat_completion("escalate")
    )
    result = fork(path, lambda: _openai_agent(llm, stream=stream), at=1, override=override)
    assert result.status == "completed", result.error
    assert result.return_value == "escalated 7"
    assert TOOLS_RUN == ["escalate:7"]
    assert api.refused == []
    assert [m.action for m in result.matched] == ["overridden", "live"]


def test_anthropic_override_is_built_into_the_sdk_response(tmp_path: Path) -> None:
    api = fake.FakeAPI("anthropic", request_id_header="request-id")
    api.reply_json(fake.message("all good"))
    llm = anthropic_integration.instrument(
        api.sdk_client(
            anthropic.Anthropic,
            anthropic.AsyncAnthropic,
            is_async=False,
            api_key="sk-ant-test",
            base_url="http://llm.test",
        )
    )

    def agent() -> str:
        reply = llm.messages.create(
            model="claude-test-1",
            max_tokens=64,
            messages=[{"role": "user", "content": "ticket 7"}],
        )
        assert isinstance(reply, Message)
        text = reply.content[0].text
        return escalate("7") if text == "escalate" else f"answered: {text}"

    path = tmp_path / "run.sftrace"
    with record("agent", output=path) as session:
        session.set_output(agent())
    api.offline()
    result = fork(path, agent, at="claude-test-1#1", override=fake.message("escalate"))
    assert result.return_value == "escalated 7"
    assert TOOLS_RUN == ["escalate:7"]
    assert api.refused == []
