"""The Anthropic integration: real SDK calls recorded, then replayed with no HTTP request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import fake_llm_api as fake
import pytest
from anthropic.resources.messages import Messages
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from roundtrip import record_then_replay

from sftrace import (
    ConfigError,
    ReplayExhaustedError,
    ReplayMismatchError,
    load_bundle,
    record,
    replay,
    replay_run,
    trace_tool,
)
from sftrace.integrations.anthropic import instrument, instrument_all, uninstrument_all

MODEL = "claude-test-1"
REQUEST: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 512,
    "messages": [{"role": "user", "content": "Summarise ticket 7"}],
}
PIECES = ["The customer ", "wants a ", "refund."]


@pytest.fixture
def api() -> fake.FakeAPI:
    return fake.FakeAPI("anthropic", request_id_header="request-id")


@pytest.fixture(autouse=True)
def _no_class_patches() -> Any:
    yield
    uninstrument_all()


def client(api: fake.FakeAPI, *, is_async: bool = False, instrumented: bool = True) -> Any:
    made = api.sdk_client(
        anthropic.Anthropic,
        anthropic.AsyncAnthropic,
        is_async=is_async,
        api_key="sk-ant-test",
        base_url="http://llm.test",
    )
    return instrument(made) if instrumented else made


# --- messages.create and messages.stream, sync and async ------------------------------------


def sync_agent(llm: Any, how: str) -> Any:
    if how == "create":
        return llm.messages.create(**REQUEST)
    if how == "create-stream":
        stream = llm.messages.create(**REQUEST, stream=True)
        assert issubclass(type(stream), anthropic.Stream)  # isinstance is off in old SDKs
        with stream:
            return list(stream)
    with llm.messages.stream(**REQUEST) as stream:
        texts = list(stream.text_stream)
        return texts, stream.get_final_message(), stream.get_final_text(), stream.request_id


async def async_agent(llm: Any, how: str) -> Any:
    if how == "create":
        return await llm.messages.create(**REQUEST)
    if how == "create-stream":
        stream = await llm.messages.create(**REQUEST, stream=True)
        assert issubclass(type(stream), anthropic.AsyncStream)
        async with stream:
            return [event async for event in stream]
    async with llm.messages.stream(**REQUEST) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
        return texts, final, await stream.get_final_text(), stream.request_id


@pytest.mark.parametrize("how", ["create", "create-stream", "stream-helper"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_replay_returns_the_recorded_sdk_objects_without_http(
    tmp_path: Path, api: fake.FakeAPI, how: str, is_async: bool
) -> None:
    """Each way of calling messages replays as equal SDK objects, events and usage included."""
    if how == "create":
        api.reply_json(fake.message("".join(PIECES)))
    else:
        api.reply_stream(fake.message_events(PIECES), named=True, done=False)
    llm = client(api, is_async=is_async)

    def agent() -> Any:
        if is_async:
            return asyncio.run(async_agent(llm, how))
        return sync_agent(llm, how)

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert replayed == recorded
    if how == "create":
        assert type(replayed) is anthropic.types.Message
        assert replayed._request_id == "req_001"
    elif how == "create-stream":
        assert [event.type for event in replayed] == [
            e["type"] for e in fake.message_events(PIECES)
        ]
    else:
        texts, final, text, request_id = replayed
        assert texts == PIECES
        assert final.content[0].text == text == "".join(PIECES)
        assert final.usage.output_tokens == 15
        assert request_id == "req_001"
    call = load_bundle(tmp_path / "run.sftrace").calls[0]
    assert (call.provider, call.name) == ("anthropic", MODEL)
    expected_input = {**REQUEST, "stream": True} if how != "create" else REQUEST
    assert call.input == expected_input
    assert call.attributes["gen_ai.usage.input_tokens"] == 40
    assert call.attributes["gen_ai.usage.output_tokens"] == (12 if how == "create" else 15)
    assert call.attributes["gen_ai.response.model"] == "claude-test-1-20260101"


def test_stream_helper_and_streamed_create_share_one_recording(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """messages.stream(...) is recorded as messages.create(stream=True): either replays it."""
    api.reply_stream(fake.message_events(PIECES), named=True, done=False)
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        events = sync_agent(llm, "create-stream")
    api.offline()
    with replay(path) as session:
        texts, final, _, _ = sync_agent(llm, "stream-helper")
    session.verify_complete()
    assert texts == [e.delta.text for e in events if e.type == "content_block_delta"]
    assert final.stop_reason == "end_turn"


# --- streams read further than recorded, or cut off midway ------------------------------


def stream_texts(llm: Any, *, is_async: bool, first_only: bool = False) -> list[str]:
    """An agent reading ``messages.stream``'s text: all of it, or the first piece only."""

    async def aread() -> list[str]:
        async with llm.messages.stream(**REQUEST) as stream:
            if first_only:
                async for text in stream.text_stream:
                    return [text]
            return [await stream.get_final_text()]

    if is_async:
        return asyncio.run(aread())
    with llm.messages.stream(**REQUEST) as stream:
        if first_only:
            return [next(iter(stream.text_stream))]
        return [stream.get_final_text()]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_reading_a_stream_further_than_the_recording_did_diverges(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The recorded agent read the first text and closed the stream; an agent now reading
    the final text diverges after the recorded events instead of getting a cut-off text."""
    api.reply_stream(fake.message_events(PIECES), named=True, done=False)
    llm = client(api, is_async=is_async)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: stream_texts(llm, is_async=is_async, first_only=True)
    )
    assert replayed == recorded == [PIECES[0]]
    output = load_bundle(path).calls[0].output
    assert (output["complete"], len(output["chunks"])) == (False, 3)

    with (
        replay(path) as session,
        pytest.raises(ReplayExhaustedError, match="stopped reading after 3 chunks"),
    ):
        stream_texts(llm, is_async=is_async)
    assert isinstance(session.divergence, ReplayExhaustedError)
    assert api.refused == []


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_stream_cut_off_midway_replays_its_chunks_then_the_error(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The connection drops after 3 events: a replay yields them, then raises the error
    (the SDK passes on its HTTP library's ReadError)."""
    api.reply_stream(fake.message_events(PIECES), named=True, done=False, fail_after=3)
    llm = client(api, is_async=is_async)
    texts: list[str] = []

    async def aread() -> None:
        async with llm.messages.stream(**REQUEST) as stream:
            async for text in stream.text_stream:
                texts.append(text)

    def agent() -> str:
        texts.clear()
        try:
            if is_async:
                asyncio.run(aread())
            else:
                with llm.messages.stream(**REQUEST) as stream:
                    texts.extend(stream.text_stream)
        except Exception as exc:
            return f"kept {texts} ({type(exc).__name__})"
        return "complete"

    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(path, api, agent)
    assert replayed == recorded == f"kept {PIECES[:1]} (ReadError)"
    call = load_bundle(path).calls[0]
    assert call.error is not None
    assert call.error.type == f"{api.http.__name__}.ReadError"
    assert (call.output["complete"], len(call.output["chunks"])) == (False, 3)


# --- a tool-use loop ------------------------------------------------------------------------

TOOLS = [
    {
        "name": "refund",
        "description": "Refund an order",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }
]
REFUNDS: list[str] = []


@trace_tool
def refund(order_id: str) -> str:
    REFUNDS.append(order_id)
    return f"refunded {order_id}"


def tool_loop(llm: Any) -> str:
    messages: list[Any] = list(REQUEST["messages"])
    for _ in range(4):
        response = llm.messages.create(model=MODEL, max_tokens=512, messages=messages, tools=TOOLS)
        if response.stop_reason != "tool_use":
            return str(response.content[0].text)
        messages.append({"role": "assistant", "content": response.content})
        results = [
            {"type": "tool_result", "tool_use_id": block.id, "content": refund(**block.input)}
            for block in response.content
            if block.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    raise AssertionError("the agent did not finish")


def test_tool_use_loop_replays_offline_without_running_tools(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A tool-use loop replays: same answer, the tool answered from the recording."""
    REFUNDS.clear()
    api.reply_json(fake.message("Refunding.", tool_use=("toolu_1", "refund", {"order_id": "A7"})))
    api.reply_json(fake.message("Done: order A7 refunded."))
    llm = client(api)
    recorded, replayed, _ = record_then_replay(
        tmp_path / "run.sftrace", api, lambda: (tool_loop(llm), list(REFUNDS))
    )
    assert recorded == replayed == ("Done: order A7 refunded.", ["A7"])
    calls = load_bundle(tmp_path / "run.sftrace").calls
    assert [call.label for call in calls] == [
        "llm anthropic/claude-test-1",
        "tool refund",
        "llm anthropic/claude-test-1",
    ]
    assert calls[2].input["messages"][1]["content"][1]["type"] == "tool_use"


# --- matching and instrumentation -------------------------------------------------------------


def test_changed_request_is_a_strict_mismatch(tmp_path: Path, api: fake.FakeAPI) -> None:
    """A replayed call with a different system prompt raises; nothing is sent."""
    api.reply_json(fake.message("ok"))
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        llm.messages.create(**REQUEST, system="Be brief.")
    api.offline()
    with replay(path), pytest.raises(ReplayMismatchError) as raised:
        llm.messages.create(**REQUEST, system="Be thorough.")
    assert raised.value.differences == [("$.system", "Be brief.", "Be thorough.")]
    assert api.refused == []


def test_instrument_all_and_instrument_record_each_call_once(
    api: fake.FakeAPI, spans: InMemorySpanExporter
) -> None:
    """Global and per-client instrumentation combine without double spans, and undo cleanly."""
    originals = (Messages.create, Messages.stream)
    api.reply_json(fake.message("ok"))
    api.reply_json(fake.message("ok"))
    api.reply_stream(fake.message_events(PIECES), named=True, done=False)
    api.reply_json(fake.message("ok"))
    instrument_all()
    with record("agent"):
        client(api, instrumented=False).messages.create(**REQUEST)
        instrument(instrument(client(api))).messages.create(**REQUEST)
        assert sync_agent(client(api, instrumented=False), "stream-helper")[0] == PIECES
    uninstrument_all()
    assert (Messages.create, Messages.stream) == originals
    with record("agent"):
        client(api, instrumented=False).messages.create(**REQUEST)
    kinds = [(s.attributes or {}).get("sftrace.kind") for s in spans.get_finished_spans()]
    assert kinds.count("llm") == 3


def test_not_a_client_is_a_config_error() -> None:
    """instrument() names what it expected."""
    with pytest.raises(ConfigError, match=r"anthropic\.Anthropic"):
        instrument(object())


def test_recorded_api_error_is_raised_again_as_the_sdk_error(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """An HTTP 429 recorded as the call's outcome replays as anthropic.RateLimitError with
    its status code and body, without a request, and counts as the reproduced failure."""
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    api.reply_json(body, status=429)
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with pytest.raises(anthropic.RateLimitError) as recorded, record("agent", output=path):
        llm.messages.create(**REQUEST)
    api.offline()
    with replay(path), pytest.raises(anthropic.RateLimitError) as raised:
        llm.messages.create(**REQUEST)
    assert (raised.value.status_code, raised.value.body) == (429, recorded.value.body)
    result = replay_run(path, lambda: llm.messages.create(**REQUEST))
    assert (result.status, result.reproduced_failure, result.divergence) == ("failed", True, None)
    assert api.refused == []
