"""The OpenAI integration: real SDK calls recorded, then replayed with no HTTP request."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import fake_llm_api as fake
import openai
import pytest
from openai.resources.chat import Completions
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from roundtrip import record_then_replay

from sftrace import (
    ConfigError,
    ReplayExhaustedError,
    ReplayMismatchError,
    compare,
    load_bundle,
    record,
    replay,
    replay_run,
    trace_tool,
)
from sftrace._model.jsondiff import MISSING
from sftrace._record import cancellation
from sftrace.integrations._common import StreamRecorder
from sftrace.integrations.openai import instrument, instrument_all, uninstrument_all

QUESTION = "Where is my parcel 42?"
CHAT_REQUEST: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": QUESTION}],
}
RESPONSES_REQUEST: dict[str, Any] = {"model": "gpt-4.1", "input": QUESTION}
PIECES = ["Your parcel ", "ships ", "today."]


@pytest.fixture
def api() -> fake.FakeAPI:
    return fake.FakeAPI("openai", request_id_header="x-request-id")


@pytest.fixture(autouse=True)
def _no_class_patches() -> Any:
    yield
    uninstrument_all()


def client(api: fake.FakeAPI, *, is_async: bool = False, instrumented: bool = True) -> Any:
    made = api.sdk_client(
        openai.OpenAI,
        openai.AsyncOpenAI,
        is_async=is_async,
        api_key="sk-test",
        base_url="http://llm.test/v1",
    )
    return instrument(made) if instrumented else made


def llm_spans(spans: InMemorySpanExporter) -> list[Any]:
    return [
        s for s in spans.get_finished_spans() if (s.attributes or {}).get("sftrace.kind") == "llm"
    ]


# --- every endpoint, sync and async, streamed and not ---------------------------------------


def script(api: fake.FakeAPI, endpoint: str, stream: bool) -> None:
    if endpoint == "chat" and stream:
        api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True)
    elif endpoint == "chat":
        api.reply_json(fake.chat_completion("".join(PIECES)))
    elif stream:
        api.reply_stream(fake.response_events(PIECES), named=True, done=False)
    else:
        api.reply_json(fake.response_object("".join(PIECES)))


def request_for(endpoint: str, stream: bool) -> dict[str, Any]:
    request = dict(CHAT_REQUEST if endpoint == "chat" else RESPONSES_REQUEST)
    if stream:
        request["stream"] = True
        if endpoint == "chat":
            request["stream_options"] = {"include_usage": True}
    return request


def sync_agent(llm: Any, endpoint: str, stream: bool) -> Any:
    resource = llm.chat.completions if endpoint == "chat" else llm.responses
    result = resource.create(**request_for(endpoint, stream))
    if not stream:
        return result
    assert isinstance(result, openai.Stream)
    with result:
        return list(result)


async def async_agent(llm: Any, endpoint: str, stream: bool) -> Any:
    resource = llm.chat.completions if endpoint == "chat" else llm.responses
    result = await resource.create(**request_for(endpoint, stream))
    if not stream:
        return result
    assert isinstance(result, openai.AsyncStream)
    async with result:
        return [item async for item in result]


EXPECTED_USAGE = {"chat": (21, 7, 28), "responses": (30, 9, 39)}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("endpoint", ["chat", "responses"])
def test_replay_returns_the_recorded_sdk_objects_without_http(
    tmp_path: Path, api: fake.FakeAPI, endpoint: str, is_async: bool, stream: bool
) -> None:
    """Each endpoint replays as equal SDK objects (chunks and usage included), sending nothing."""
    script(api, endpoint, stream)
    llm = client(api, is_async=is_async)

    def agent() -> Any:
        if is_async:
            return asyncio.run(async_agent(llm, endpoint, stream))
        return sync_agent(llm, endpoint, stream)

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert replayed == recorded
    if stream:
        assert [type(item) for item in replayed] == [type(item) for item in recorded]
        assert len(replayed) == len(
            fake.chat_chunks(PIECES) if endpoint == "chat" else fake.response_events(PIECES)
        )
    else:
        assert type(replayed) is type(recorded)
        assert replayed._request_id == recorded._request_id == "req_001"
    assert [m.action for m in session.matched] == ["substituted"]
    call = load_bundle(tmp_path / "run.sftrace").calls[0]
    assert (call.provider, call.name) == ("openai", request_for(endpoint, stream)["model"])
    assert call.input == json.loads(json.dumps(request_for(endpoint, stream)))
    input_tokens, output_tokens, total = EXPECTED_USAGE[endpoint]
    for attributes in (call.attributes, dict(session.spans[0].attributes or {})):
        assert attributes["gen_ai.usage.input_tokens"] == input_tokens
        assert attributes["gen_ai.usage.output_tokens"] == output_tokens
        assert attributes["sftrace.usage.total_tokens"] == total


def test_streamed_call_is_recorded_chunk_by_chunk_with_final_usage(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A stream's recorded output is its chunks in order, complete, with the last usage."""
    script(api, "chat", stream=True)
    llm = client(api)
    with record("agent", output=tmp_path / "run.sftrace"):
        chunks = sync_agent(llm, "chat", stream=True)
    output = load_bundle(tmp_path / "run.sftrace").calls[0].output
    assert output["chunks"] == [
        chunk.model_dump(mode="json", exclude_unset=True) for chunk in chunks
    ]
    assert output["complete"] is True
    assert output["usage"] == fake.USAGE
    assert output["_request_id"] == "req_001"


def test_stream_closed_early_records_what_was_read_and_replays_it(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A stream the caller stops reading ends its span, marked incomplete; replay gives the same."""
    script(api, "chat", stream=True)
    llm = client(api)

    def agent() -> list[str]:
        stream = llm.chat.completions.create(**request_for("chat", stream=True))
        texts = []
        for chunk in stream:
            texts.append(chunk.choices[0].delta.content)
            if len(texts) == 2:
                break
        stream.close()
        return texts

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, agent)
    assert replayed == recorded == ["", "Your parcel "]
    output = load_bundle(tmp_path / "run.sftrace").calls[0].output
    assert output["complete"] is False
    assert len(output["chunks"]) == 2


def test_stream_helpers_replay_their_final_objects(tmp_path: Path, api: fake.FakeAPI) -> None:
    """chat.completions.stream and responses.stream go through create: replayed, same results."""
    script(api, "chat", stream=True)
    script(api, "responses", stream=True)
    llm = client(api)

    def agent() -> tuple[Any, ...]:
        with llm.chat.completions.stream(**request_for("chat", stream=False)) as stream:
            chat_events = [event.type for event in stream]
            completion = stream.get_final_completion()
        with llm.responses.stream(**RESPONSES_REQUEST) as stream:
            texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
            response = stream.get_final_response()
        return chat_events, completion, texts, response

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, agent)
    assert replayed == recorded
    assert replayed[1].choices[0].message.content == "".join(PIECES)
    assert replayed[2] == PIECES
    assert replayed[3].output_text == "".join(PIECES)


# --- streams read further than recorded, or cut off midway ------------------------------


def read_stream(llm: Any, *, is_async: bool, limit: int | None = None) -> list[str]:
    """An agent reading a streamed chat completion's texts: ``limit`` chunks, then it
    breaks out (None: to the end)."""

    def keep(texts: list[str], chunk: Any) -> bool:
        texts.append(chunk.choices[0].delta.content if chunk.choices else "")
        return limit is not None and len(texts) == limit

    async def aread() -> list[str]:
        texts: list[str] = []
        async with await llm.chat.completions.create(**request_for("chat", True)) as stream:
            async for chunk in stream:
                if keep(texts, chunk):
                    break
        return texts

    if is_async:
        return asyncio.run(aread())
    texts: list[str] = []
    with llm.chat.completions.create(**request_for("chat", True)) as stream:
        for chunk in stream:
            if keep(texts, chunk):
                break
    return texts


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_reading_a_stream_further_than_the_recording_did_diverges(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The recorded agent read 2 chunks and stopped (complete: false). The same agent
    replays; one reading on gets a ReplayExhaustedError after those 2 chunks, and the replay
    diverges, instead of a stream that ends there (a changed output that 'reproduced')."""
    script(api, "chat", stream=True)
    llm = client(api, is_async=is_async)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: read_stream(llm, is_async=is_async, limit=2)
    )
    assert replayed == recorded == ["", "Your parcel "]
    assert load_bundle(path).calls[0].output["complete"] is False

    with (
        replay(path) as session,
        pytest.raises(ReplayExhaustedError, match="stopped reading after 2 chunks") as raised,
    ):
        read_stream(llm, is_async=is_async)
    assert session.divergence is raised.value
    assert "the replayed agent reads more of it" in str(raised.value)
    result = replay_run(path, lambda: read_stream(llm, is_async=is_async))
    assert isinstance(result.divergence, ReplayExhaustedError)
    assert result.reproduced is False
    assert api.refused == []


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_reading_less_of_a_stream_than_the_recording_did_diverges(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The recorded agent read the stream to its end; a changed one stops after 2 chunks
    (at a tool call, say). No later call need show it, and the replay said "reproduced"
    when the output was free text: it diverges, naming how much each read."""
    script(api, "chat", stream=True)
    llm = client(api, is_async=is_async)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: read_stream(llm, is_async=is_async)
    )
    assert replayed == recorded
    result = replay_run(path, lambda: read_stream(llm, is_async=is_async, limit=2))
    assert result.status == "diverged"
    assert "stopped reading it after 2 chunks" in str(result.divergence)
    assert "(to its end)" in str(result.divergence)
    again = replay_run(path, lambda: read_stream(llm, is_async=is_async))
    assert (again.status, again.divergence) == ("completed", None)


def cut_off_agent(llm: Any, *, is_async: bool) -> str:
    """An agent keeping the text read before the connection dropped."""
    texts: list[str] = []

    async def aread() -> None:
        async for chunk in await llm.chat.completions.create(**request_for("chat", True)):
            texts.append(chunk.choices[0].delta.content)

    try:
        if is_async:
            asyncio.run(aread())
        else:
            for chunk in llm.chat.completions.create(**request_for("chat", True)):
                texts.append(chunk.choices[0].delta.content)
    except openai.APIConnectionError as exc:
        return f"kept {''.join(texts)!r} ({type(exc).__name__})"
    return "".join(texts)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_stream_cut_off_midway_replays_its_chunks_then_the_error(
    tmp_path: Path, api: fake.FakeAPI, is_async: bool
) -> None:
    """The connection drops after 3 chunks: the call records those chunks (complete:
    false) and the SDK's error; a replay yields the same 3 chunks, then raises the error."""
    api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True, fail_after=3)
    llm = client(api, is_async=is_async)
    path = tmp_path / "run.sftrace"
    recorded, replayed, session = record_then_replay(
        path, api, lambda: cut_off_agent(llm, is_async=is_async)
    )
    assert replayed == recorded == "kept 'Your parcel ships ' (APIConnectionError)"
    call = load_bundle(path).calls[0]
    assert call.error is not None
    assert call.error.type == "openai.APIConnectionError"
    assert call.output["complete"] is False
    assert len(call.output["chunks"]) == 3
    # The replay's span, as the recording's: the chunks and the error.
    (span,) = [s for s in session.spans if (s.attributes or {}).get("sftrace.kind") == "llm"]
    attributes = dict(span.attributes or {})
    assert json.loads(str(attributes["sftrace.output"])) == call.output
    assert attributes["sftrace.error.type"] == "openai.APIConnectionError"


def test_a_bundle_holding_only_a_streams_error_replays_it_at_the_call(
    tmp_path: Path, api: fake.FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bundles recorded before the chunks read before a failure were kept hold the error
    and no output: the replayed call raises the error, as it did."""

    def error_alone(recorder: StreamRecorder, kind: object, exc: Any, traceback: object) -> None:
        if exc is None or isinstance(exc, GeneratorExit):
            recorder.finish(complete=exc is None)
        else:
            recorder.fail(exc)

    with monkeypatch.context() as patched:
        patched.setattr(StreamRecorder, "__exit__", error_alone)
        api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True, fail_after=3)
        llm = client(api)
        path = tmp_path / "run.sftrace"
        with record("agent", output=path):
            assert cut_off_agent(llm, is_async=False).startswith("kept 'Your parcel ships '")
    call = load_bundle(path).calls[0]
    assert (call.output_json, call.error is not None) == (None, True)
    api.offline()
    with replay(path) as session:
        assert cut_off_agent(llm, is_async=False) == "kept '' (APIConnectionError)"
    assert session.divergence is None


async def timed_out_agent(llm: Any, timeout: float) -> str:
    """An agent giving up on reading a slow stream after ``timeout`` seconds, keeping what
    it read."""
    texts: list[str] = []
    stream = await llm.chat.completions.create(**request_for("chat", True))
    try:
        async with asyncio.timeout(timeout):
            async for chunk in stream:
                texts.append(chunk.choices[0].delta.content if chunk.choices else "")
    except TimeoutError:
        return f"timed out after {''.join(texts)!r}"
    return "".join(texts)


def test_a_stream_timed_out_midway_replays_its_chunks_then_the_timeout(
    tmp_path: Path, api: fake.FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio.timeout cancels a slow stream after a few chunks: the call records them and
    the cancellation; a replay yields them, then waits for the agent's own timeout, so the
    unchanged agent gets the same partial text. An agent no longer timing out diverges."""
    monkeypatch.setattr(cancellation, "MIN_SLACK_S", 0.2)
    api.reply_stream(fake.chat_chunks(PIECES), named=False, done=True, delay=0.05)
    llm = client(api, is_async=True)
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, api, lambda: asyncio.run(timed_out_agent(llm, 0.2))
    )
    call = load_bundle(path).calls[0]
    assert call.error is not None
    assert (call.error.cancelled, call.error.cancelled_within) == (True, False)
    assert call.output["complete"] is False
    read = "".join(
        c["choices"][0]["delta"].get("content", "") for c in call.output["chunks"] if c["choices"]
    )
    assert 0 < len(call.output["chunks"]) < len(fake.chat_chunks(PIECES))
    assert replayed == recorded == f"timed out after {read!r}"

    with replay(path) as session, pytest.raises(asyncio.CancelledError):
        asyncio.run(timed_out_agent(llm, 30))
    assert "did not cancel it" in str(session.divergence)


# --- an agent loop ------------------------------------------------------------------------

TOOL_RUNS: list[str] = []
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


@trace_tool
def order_status(order_id: str) -> dict[str, str]:
    TOOL_RUNS.append(order_id)
    return {"order_id": order_id, "status": "in transit"}


def tool_loop(llm: Any) -> str:
    """A minimal tool-calling agent: ask, run the tools the model asks for, ask again."""
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    for _ in range(4):
        response = llm.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message)  # the SDK object itself, as agents commonly do
        for call in message.tool_calls:
            result = order_status(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    raise AssertionError("the agent did not finish")


def test_tool_calling_loop_replays_offline_without_running_tools(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A tool-calling loop replays: same answer, tool answered from the recording, no request."""
    TOOL_RUNS.clear()
    api.reply_json(
        fake.chat_completion(
            tool_calls=[fake.tool_call("call_1", "order_status", {"order_id": "42"})]
        )
    )
    api.reply_json(fake.chat_completion("Parcel 42 is in transit."))
    llm = client(api)
    recorded, replayed, session = record_then_replay(
        tmp_path / "run.sftrace", api, lambda: (tool_loop(llm), list(TOOL_RUNS))
    )
    assert recorded == ("Parcel 42 is in transit.", ["42"])
    assert replayed == ("Parcel 42 is in transit.", ["42"])  # TOOL_RUNS unchanged by the replay
    assert [m.recorded.label for m in session.matched] == [
        "llm openai/gpt-4o",
        "tool order_status",
        "llm openai/gpt-4o",
    ]
    second_request = load_bundle(tmp_path / "run.sftrace").calls[2].input
    assert second_request["messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert api.requests[1]["messages"][2]["role"] == "tool"


# --- matching -----------------------------------------------------------------------------


def test_changed_request_is_a_strict_mismatch_naming_the_field(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A replayed call whose request differs raises ReplayMismatchError; nothing is sent."""
    script(api, "chat", stream=False)
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        llm.chat.completions.create(**CHAT_REQUEST)
    api.offline()
    changed = {**CHAT_REQUEST, "messages": [{"role": "user", "content": "Where is parcel 43?"}]}
    with replay(path) as session, pytest.raises(ReplayMismatchError) as raised:
        llm.chat.completions.create(**changed, temperature=0.2)
    assert sorted(raised.value.differences, key=str) == [
        ("$.messages[0].content", QUESTION, "Where is parcel 43?"),
        ("$.temperature", MISSING, 0.2),
    ]
    assert session.divergence is raised.value
    assert api.refused == []


def test_transport_options_and_ignored_fields_are_not_compared(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """extra_headers, timeout, NOT_GIVEN arguments and ignore_fields never cause a mismatch."""
    script(api, "chat", stream=False)
    llm = instrument(
        client(api, instrumented=False), ignore_fields=["metadata.trace_id", "messages.*.name"]
    )

    def agent(trace_id: str) -> Any:
        return llm.chat.completions.create(
            **CHAT_REQUEST,
            metadata={"trace_id": trace_id, "team": "support"},
            extra_headers={"X-Request-Id": trace_id},
            timeout=12.5 if trace_id == "t1" else 3.0,
            temperature=openai.NOT_GIVEN,
        )

    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        recorded = agent("t1")
    api.offline()
    with replay(path) as session:
        replayed = agent("t2")
    assert replayed == recorded
    session.verify_complete()
    assert load_bundle(path).calls[0].input == {**CHAT_REQUEST, "metadata": {"team": "support"}}


# --- instrumentation ---------------------------------------------------------------------


def test_instrumenting_twice_or_also_globally_records_each_call_once(
    api: fake.FakeAPI, spans: InMemorySpanExporter
) -> None:
    """instrument() is idempotent and combines with instrument_all() without double spans."""
    script(api, "chat", stream=False)
    llm = instrument(client(api))
    instrument_all()
    with record("agent"):
        llm.chat.completions.create(**CHAT_REQUEST)
    assert len(llm_spans(spans)) == 1


def test_instrument_all_records_every_client_until_uninstrumented(
    api: fake.FakeAPI, spans: InMemorySpanExporter
) -> None:
    """instrument_all() patches the SDK classes; uninstrument_all() puts them back."""
    original = Completions.create
    for _ in range(2):
        script(api, "chat", stream=False)
    instrument_all()
    with record("agent"):
        client(api, instrumented=False).chat.completions.create(**CHAT_REQUEST)
    assert len(llm_spans(spans)) == 1
    uninstrument_all()
    assert Completions.create is original
    with record("agent"):
        client(api, instrumented=False).chat.completions.create(**CHAT_REQUEST)
    assert len(llm_spans(spans)) == 1


def test_copies_made_with_with_options_are_instrumented(
    api: fake.FakeAPI, spans: InMemorySpanExporter
) -> None:
    """client.with_options(...) returns a client that records too."""
    script(api, "chat", stream=False)
    llm = client(api)
    with record("agent"):
        llm.with_options(timeout=5).chat.completions.create(**CHAT_REQUEST)
    assert len(llm_spans(spans)) == 1


def test_outside_a_recording_the_client_is_untouched(
    api: fake.FakeAPI, spans: InMemorySpanExporter
) -> None:
    """Without record()/replay() calls go to the API as usual and nothing is recorded."""
    script(api, "chat", stream=True)
    chunks = sync_agent(client(api), "chat", stream=True)
    assert len(chunks) == len(fake.chat_chunks(PIECES))
    assert type(chunks[0]) is openai.types.chat.ChatCompletionChunk
    assert len(api.requests) == 1
    assert spans.get_finished_spans() == ()


BAD_REQUEST = {"error": {"message": "context too long", "type": "invalid_request_error"}}


def test_recorded_api_error_is_raised_again_as_the_sdk_error(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """An HTTP 400 recorded as the call's outcome is raised in replay as the SDK's own
    BadRequestError, with its status code and body, without a request."""
    api.reply_json(BAD_REQUEST, status=400)
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with pytest.raises(openai.BadRequestError) as recorded, record("agent", output=path):
        llm.chat.completions.create(**CHAT_REQUEST)
    error = load_bundle(path).calls[0].error
    assert error is not None
    assert (error.type, error.status_code) == ("openai.BadRequestError", 400)
    assert json.loads(error.body_json or "null") == recorded.value.body
    api.offline()
    with replay(path), pytest.raises(openai.BadRequestError) as raised:
        llm.chat.completions.create(**CHAT_REQUEST)
    assert raised.value.status_code == 400
    assert raised.value.body == recorded.value.body
    assert str(raised.value) == str(recorded.value)
    assert raised.value.response.status_code == 400
    assert api.refused == []


def answer_or_apologize(llm: Any) -> str:
    """An agent handling the SDK's error itself."""
    try:
        return str(llm.chat.completions.create(**CHAT_REQUEST).choices[0].message.content)
    except openai.BadRequestError as exc:
        return f"sorry ({exc.status_code})"


@pytest.mark.parametrize("handled", [False, True])
def test_recorded_http_400_replays_as_the_recorded_failure(
    tmp_path: Path, api: fake.FakeAPI, handled: bool
) -> None:
    """An OpenAI 400 replays as the failure (not a divergence) or as the agent's own
    handling of it; either way the recorded behaviour is reproduced."""
    api.reply_json(BAD_REQUEST, status=400)
    llm = client(api)
    agent = answer_or_apologize if handled else tool_loop
    path = tmp_path / "run.sftrace"
    with contextlib.suppress(openai.BadRequestError), record("agent", output=path) as session:
        session.set_output(agent(llm))
    api.offline()
    result = replay_run(path, lambda: agent(llm))
    assert result.divergence is None
    if handled:
        assert (result.status, result.output) == ("completed", "sorry (400)")
    else:
        assert (result.status, result.reproduced_failure) == ("failed", True)
        assert isinstance(result.error, openai.BadRequestError)
    assert result.reproduced
    assert compare(path, result).passed
    assert api.refused == []


def test_bundle_without_status_code_replays_the_error_by_its_class(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A bundle recorded before status codes were (no sftrace.error.status_code) still
    replays the recorded failure, as a reproduced failure."""
    api.reply_json(BAD_REQUEST, status=400)
    llm = client(api)
    path = tmp_path / "run.sftrace"
    with pytest.raises(openai.BadRequestError), record("agent", output=path):
        llm.chat.completions.create(**CHAT_REQUEST)
    old = load_bundle(path)
    call = old.calls[0]
    assert call.error is not None
    for key in ("sftrace.error.status_code", "sftrace.error.body", "sftrace.error.args"):
        call.attributes.pop(key, None)
    object.__setattr__(
        call,
        "error",
        dataclasses.replace(call.error, status_code=None, body_json=None, args_json=None),
    )
    api.offline()
    result = replay_run(old, lambda: llm.chat.completions.create(**CHAT_REQUEST))
    assert (result.status, result.reproduced_failure, result.divergence) == ("failed", True, None)
    assert isinstance(result.error, openai.BadRequestError)
    assert "context too long" in str(result.error)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"client": object()}, r"expects an openai\.OpenAI"),
        ({"ignore_fields": ["metadata..id"]}, "dotted paths"),
        ({"replay_policy": "sometimes"}, "replay_policy"),
    ],
)
def test_bad_arguments_are_config_errors(
    api: fake.FakeAPI, arguments: dict[str, Any], message: str
) -> None:
    """instrument() rejects what it cannot use, saying what it expected."""
    target = arguments.pop("client", None) or client(api, instrumented=False)
    with pytest.raises(ConfigError, match=message):
        instrument(target, **arguments)


@pytest.mark.slow
def test_openai_agent_example_records_and_replays_offline(tmp_path: Path) -> None:
    """examples/openai_agent/main.py records its tool-calling run and replays it offline."""
    script = Path(__file__).resolve().parents[2] / "examples" / "openai_agent" / "main.py"
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "requests sent: 0; tools run: 0" in result.stdout
    bundle = load_bundle(tmp_path / ".sftrace" / "openai_agent" / "support.sftrace")
    assert [call.kind for call in bundle.calls] == ["llm", "tool", "llm", "tool", "llm", "llm"]
    assert bundle.calls[-1].output["complete"] is True


def test_a_key_split_across_streamed_chunks_is_redacted_in_each_chunk(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """A key the model streams in pieces is redacted in every chunk holding part of it."""
    key = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
    api.reply_stream(
        fake.chat_chunks(["Use ", key[:12], key[12:30], key[30:] + " now."]), named=False, done=True
    )
    with record("agent", output=tmp_path / "run.sftrace"):
        streamed = sync_agent(client(api), "chat", stream=True)
    assert (
        "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        == f"Use {key} now."
    )
    files = b"".join(p.read_bytes() for p in (tmp_path / "run.sftrace").rglob("*") if p.is_file())
    for part in (key[4:12], key[12:30], key[30:]):
        assert part.encode() not in files
    chunks = load_bundle(tmp_path / "run.sftrace").calls[0].output["chunks"]
    contents = [c["choices"][0]["delta"].get("content") for c in chunks if c.get("choices")]
    assert contents[1:5] == [
        "Use ",
        *["[REDACTED:openai_api_key]"] * 2,
        "[REDACTED:openai_api_key] now.",
    ]


def test_concurrent_async_streams_come_back_in_the_order_they_finished(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """Three async streamed calls at once, read as they finish (``as_completed``): the
    replay answered the SDK's async calls without waiting for those that finished first
    in the recording, so the unchanged agent always saw them in the order reached."""
    for number, delay in ((1, 0.03), (2, 0.015), (3, 0.0)):  # answered 3, 2, 1
        api.reply_stream(
            fake.chat_chunks([f"answer {number}"]), named=False, done=True, delay=delay
        )
    llm = client(api, is_async=True)

    async def ask(number: int) -> str:
        request = {
            **request_for("chat", True),
            "messages": [{"role": "user", "content": f"q{number}"}],
        }
        texts = []
        async with await llm.chat.completions.create(**request) as stream:
            async for chunk in stream:
                texts.append(chunk.choices[0].delta.content if chunk.choices else "")
        return "".join(text or "" for text in texts)

    def agent() -> list[str]:
        async def main() -> list[str]:
            return [await done for done in asyncio.as_completed([ask(n) for n in (1, 2, 3)])]

        return asyncio.run(main())

    path = tmp_path / "order.sftrace"
    with record("order", output=path) as session:
        recorded = agent()
        session.set_output(recorded)
    assert recorded == ["answer 3", "answer 2", "answer 1"]
    api.offline()
    for _ in range(3):
        result = replay_run(path, agent)
        assert (result.status, result.divergence) == ("completed", None)
        assert result.output == recorded
