"""The LiteLLM integration: real ``litellm.completion``/``acompletion`` calls (through
LiteLLM's OpenAI route, answered by an ``httpx.MockTransport``) recorded, then replayed
as LiteLLM's own objects with no request sent."""

from __future__ import annotations

import os

# LiteLLM downloads its model-cost map when imported unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_llm_api as fake
import litellm
import openai
import pytest
from litellm import CustomStreamWrapper, ModelResponse
from litellm.types.utils import ModelResponseStream
from roundtrip import record_then_replay

from sftrace import (
    ReplayExhaustedError,
    ReplayMismatchError,
    load_bundle,
    record,
    replay,
)
from sftrace.integrations.litellm import instrument, uninstrument

MESSAGES = [{"role": "user", "content": "Where is my parcel 42?"}]
PIECES = ["Your parcel ", "ships ", "today."]


@pytest.fixture
def api() -> fake.FakeAPI:
    return fake.FakeAPI("openai", request_id_header="x-request-id")


@pytest.fixture(autouse=True)
def instrumented() -> Iterator[None]:
    instrument()
    yield
    uninstrument()


@pytest.fixture(autouse=True)
def event_loop_litellm_may_use() -> Iterator[None]:
    """LiteLLM's synchronous path looks up the thread's event loop (for its logging
    callbacks) and leaves a loop it made unclosed; give it one, closed after the test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


def openai_client(api: fake.FakeAPI, *, is_async: bool) -> Any:
    return api.sdk_client(
        openai.OpenAI,
        openai.AsyncOpenAI,
        is_async=is_async,
        api_key="sk-test",
        base_url="http://llm.test/v1",
    )


def request(api: fake.FakeAPI, *, is_async: bool, stream: bool) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "model": "openai/gpt-4o",
        "messages": MESSAGES,
        "client": openai_client(api, is_async=is_async),
        "api_key": "sk-test",
    }
    if stream:
        arguments |= {"stream": True, "stream_options": {"include_usage": True}}
    return arguments


def agent_for(api: fake.FakeAPI, *, is_async: bool, stream: bool) -> Any:
    def agent() -> Any:
        if is_async:
            return asyncio.run(async_agent(api, stream))
        result = litellm.completion(**request(api, is_async=False, stream=stream))
        if not stream:
            return result
        assert isinstance(result, CustomStreamWrapper)
        return list(result)

    return agent


async def async_agent(api: fake.FakeAPI, stream: bool) -> Any:
    result = await litellm.acompletion(**request(api, is_async=True, stream=stream))
    if not stream:
        return result
    assert isinstance(result, CustomStreamWrapper)
    return [chunk async for chunk in result]


def script(api: fake.FakeAPI, stream: bool) -> None:
    if stream:
        api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True)
    else:
        api.reply_json(fake.chat_completion("".join(PIECES)))


def fields(response: ModelResponse) -> tuple[Any, ...]:
    """What an agent reads of a response."""
    choice = response.choices[0]
    return (
        response.id,
        response.model,
        response.created,
        choice.finish_reason,
        choice.message.content,
        choice.message.tool_calls,
        response.usage.model_dump(),  # type: ignore[attr-defined]
    )


def texts(result: Any) -> list[Any]:
    if isinstance(result, ModelResponse):
        return [choice.message.content for choice in result.choices]
    return [chunk.choices[0].delta.content if chunk.choices else None for chunk in result]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_replay_returns_litellm_objects_without_any_request(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool, stream: bool
) -> None:
    script(api, stream)
    agent = agent_for(api, is_async=is_async, stream=stream)

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert texts(replayed) == texts(recorded)
    if stream:
        assert all(isinstance(chunk, ModelResponseStream) for chunk in replayed)
        assert "".join(t for t in texts(replayed) if t) == "".join(PIECES)
        rebuilt = litellm.stream_chunk_builder(replayed)
        assert rebuilt is not None
        assert rebuilt.choices[0].message.content == "".join(PIECES)
    else:
        assert type(replayed) is ModelResponse
        assert fields(replayed) == fields(recorded)
        assert replayed._hidden_params["custom_llm_provider"] == "openai"
    assert [m.action for m in session.matched] == ["substituted"]
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert (call.provider, call.name) == ("openai", "gpt-4o")
    # What is compared: the request, not the transport (client, api_key).
    assert set(call.input) == {"model", "messages"} | (
        {"stream", "stream_options"} if stream else set()
    )
    assert "sk-test" not in json.dumps(call.input)
    assert call.attributes["gen_ai.usage.input_tokens"] == fake.USAGE["prompt_tokens"]
    assert call.attributes["gen_ai.usage.output_tokens"] == fake.USAGE["completion_tokens"]


KEPT_HIDDEN = (
    "custom_llm_provider",
    "response_cost",
    "api_base",
    "model_id",
    "litellm_model_name",
    "provider_response_model",
)


def hidden(value: Any) -> dict[str, Any]:
    """What an agent reads of LiteLLM's ``_hidden_params`` (run-to-run timings and ids left
    out)."""
    return {key: value._hidden_params.get(key, "absent") for key in KEPT_HIDDEN}


def seen(result: Any) -> Any:
    """Everything an agent reads of a response, or of a stream read to its end."""
    if isinstance(result, ModelResponse):
        return (
            result.model_dump(),
            [choice.logprobs for choice in result.choices],
            hidden(result),
        )
    stream, chunks = result
    return (
        stream.model,
        stream.custom_llm_provider,
        hidden(stream),
        [(chunk.model_dump(), hidden(chunk)) for chunk in chunks],
    )


def read_whole(api: fake.FakeAPI, *, is_async: bool, stream: bool) -> Any:
    """An agent keeping LiteLLM's response, or its stream and the chunks it yielded."""

    async def aread() -> Any:
        result = await litellm.acompletion(**request(api, is_async=True, stream=stream))
        return (result, [chunk async for chunk in result]) if stream else result

    if is_async:
        return seen(asyncio.run(aread()))
    result = litellm.completion(**request(api, is_async=False, stream=stream))
    return seen((result, list(result)) if stream else result)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_replay_hands_back_what_the_recorded_run_read(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool, stream: bool
) -> None:
    """The same fields (a None ``logprobs`` too), the same provider and model the stream
    was routed to (``openai``, ``gpt-4o``, not the ``openai/gpt-4o`` asked for) and the
    same ``_hidden_params``, on the response, the stream and each chunk."""
    script(api, stream)
    recorded, replayed, _ = record_then_replay(
        tmp_path / "run.sftrace",
        api,
        lambda: read_whole(api, is_async=is_async, stream=stream),
    )
    assert replayed == recorded
    if stream:
        assert recorded[:2] == ("gpt-4o", "openai")
        assert recorded[3][0][1]["custom_llm_provider"] == "openai"
    else:
        assert recorded[1] == [None]
    assert recorded[2]["api_base"] == "https://api.openai.com"


def test_an_address_is_recorded_without_its_credentials(tmp_path: Path, api: fake.FakeAPI) -> None:
    """LiteLLM keeps the URL it called (``api_base``): recorded without the user, password
    and query that may hold a key, whatever their form."""
    script(api, stream=False)
    arguments = request(api, is_async=False, stream=False) | {
        "api_base": "http://alice:Tr0ub4dor@llm.test/v1?code=Zq9xLmN4pR7tV2wY"
    }
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        litellm.completion(**arguments)
    bundle = "".join(p.read_text() for p in path.iterdir() if p.is_file())
    assert "Tr0ub4dor" not in bundle
    assert "Zq9xLmN4pR7tV2wY" not in bundle
    api.offline()
    with replay(path):
        response = litellm.completion(**arguments)
    assert response._hidden_params["api_base"] == "http://llm.test/v1"


def test_a_stream_recorded_before_its_routing_was_replays_where_litellm_routes_it(
    tmp_path: Path, api: fake.FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bundles recorded before the stream's own state was keep replaying, the stream
    reporting the provider and model LiteLLM routes the call to."""
    import sftrace.integrations.litellm as integration

    script(api, stream=True)
    path = tmp_path / "run.sftrace"
    with monkeypatch.context() as older:
        older.setattr(integration, "_STREAM", "not_read_by_replays", raising=False)
        with record("agent", output=path):
            list(litellm.completion(**request(api, is_async=False, stream=True)))
    api.offline()
    with replay(path) as session:
        stream = litellm.completion(**request(api, is_async=False, stream=True))
        assert "".join(t for t in texts(list(stream)) if t) == "".join(PIECES)
    assert session.divergence is None
    assert (stream.model, stream.custom_llm_provider) == ("gpt-4o", "openai")


def read_stream(api: fake.FakeAPI, *, is_async: bool, limit: int | None = None) -> str:
    """An agent reading a stream's texts: ``limit`` chunks (None: all), keeping what it
    read if the stream raises."""
    texts: list[str] = []

    def keep(chunk: Any) -> bool:
        texts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
        return limit is not None and len(texts) == limit

    async def aread() -> None:
        async for chunk in await litellm.acompletion(**request(api, is_async=True, stream=True)):
            if keep(chunk):
                break

    try:
        if is_async:
            asyncio.run(aread())
        else:
            for chunk in litellm.completion(**request(api, is_async=False, stream=True)):
                if keep(chunk):
                    break
    except Exception as exc:
        return f"kept {''.join(texts)!r} ({type(exc).__name__})"
    return "".join(texts)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_stream_cut_off_midway_replays_its_chunks_then_the_error(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The connection drops after 3 chunks: a replay yields them, then raises the error."""
    api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True, fail_after=3)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: read_stream(api, is_async=is_async)
    )
    assert replayed == recorded
    assert recorded.startswith("kept 'Your parcel ships '")
    call = load_bundle(path).calls[0]
    assert call.error is not None
    assert (call.output["complete"], len(call.output["chunks"])) == (False, 3)


def test_reading_a_stream_further_than_the_recording_did_diverges(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """The recorded agent read 2 chunks; one reading on diverges after them."""
    script(api, stream=True)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: read_stream(api, is_async=False, limit=2)
    )
    assert replayed == recorded == "Your parcel "
    with replay(path) as session:
        assert read_stream(api, is_async=False) == "kept 'Your parcel ' (ReplayExhaustedError)"
    assert isinstance(session.divergence, ReplayExhaustedError)


def test_positional_arguments_are_recorded_by_name(tmp_path: Path, api: fake.FakeAPI) -> None:
    script(api, stream=False)
    client = openai_client(api, is_async=False)
    with record("agent", output=tmp_path / "run.sftrace"):
        litellm.completion("openai/gpt-4o", MESSAGES, client=client, api_key="sk-test")
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert call.input == {"model": "openai/gpt-4o", "messages": MESSAGES}


def test_a_changed_prompt_is_a_strict_mismatch_naming_the_field(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    script(api, stream=False)
    client = openai_client(api, is_async=False)
    with record("agent", output=tmp_path / "run.sftrace"):
        litellm.completion(model="openai/gpt-4o", messages=MESSAGES, client=client)
    api.offline()
    changed = [{"role": "user", "content": "Where is my parcel 43?"}]
    with (
        pytest.raises(ReplayMismatchError, match=r"\$\.messages\[0\]\.content"),
        replay(tmp_path / "run.sftrace"),
    ):
        litellm.completion(model="openai/gpt-4o", messages=changed, client=client)
    assert api.refused == []


def test_a_provider_error_is_recorded_and_raised_again(tmp_path: Path, api: fake.FakeAPI) -> None:
    for _ in range(3):  # LiteLLM may try again on a 429 before it gives up
        api.reply_json({"error": {"message": "slow down", "type": "rate_limit"}}, status=429)
    client = openai_client(api, is_async=False)

    def agent() -> str:
        try:
            litellm.completion(model="openai/gpt-4o", messages=MESSAGES, client=client)
        except Exception as exc:  # what an agent catching LiteLLM's errors sees
            return type(exc).__name__
        return "answered"

    with record("agent", output=tmp_path / "run.sftrace"):
        recorded = agent()
    assert recorded == "RateLimitError"
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert call.error is not None
    assert call.error.type.endswith("RateLimitError")
    api.offline()
    with (
        replay(tmp_path / "run.sftrace") as session,
        pytest.raises(litellm.RateLimitError) as raised,
    ):
        litellm.completion(model="openai/gpt-4o", messages=MESSAGES, client=client)
    assert str(raised.value) == call.error.message
    assert raised.value.status_code == 429
    assert session.divergence is None
    assert api.refused == []


def test_outside_a_recording_and_after_uninstrument_litellm_is_untouched(
    api: fake.FakeAPI,
) -> None:
    script(api, stream=False)
    client = openai_client(api, is_async=False)
    result = litellm.completion(model="openai/gpt-4o", messages=MESSAGES, client=client)
    assert result.choices[0].message.content == "".join(PIECES)
    uninstrument()
    assert not hasattr(litellm.completion, "__sftrace_wrapped__")
    instrument()
    instrument()  # idempotent
    assert litellm.completion.__sftrace_wrapped__ is not None  # type: ignore[attr-defined]
    assert not hasattr(litellm.completion.__sftrace_wrapped__, "__sftrace_wrapped__")  # type: ignore[attr-defined]


def test_an_instrumented_openai_client_underneath_is_not_recorded_twice(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    from sftrace.integrations.openai import instrument as instrument_openai

    script(api, stream=False)
    client = instrument_openai(openai_client(api, is_async=False))
    with record("agent", output=tmp_path / "run.sftrace"):
        litellm.completion(model="openai/gpt-4o", messages=MESSAGES, client=client)
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert call.input == {"model": "openai/gpt-4o", "messages": MESSAGES}
