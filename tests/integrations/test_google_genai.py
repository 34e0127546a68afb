"""The Google GenAI integration: a real ``google.genai.Client`` (its HTTP layer answered
by an ``httpx.MockTransport``) recorded, then replayed as the SDK's own response types
with no request sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel
from roundtrip import record_then_replay

from sftrace import ReplayExhaustedError, ReplayMismatchError, load_bundle, record, replay
from sftrace.integrations.google_genai import instrument

MODEL = "gemini-2.5-flash"
PROMPT = "Where is my parcel 42?"
PIECES = ["Your parcel ", "ships ", "today."]
USAGE = {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14}


def answer(text: str, *, usage: bool = True) -> dict[str, Any]:
    """A generateContent response body as the Gemini API sends it."""
    body: dict[str, Any] = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "modelVersion": MODEL,
        "responseId": "resp-1",
    }
    if usage:
        body["usageMetadata"] = USAGE
    return body


class FakeGemini:
    """Canned replies for the Gemini API; ``offline()`` refuses every further request."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, str, bytes]] = []
        self.requests: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self._offline = False

    def reply_json(self, body: dict[str, Any], *, status: int = 200) -> None:
        self.replies.append((status, "application/json", json.dumps(body).encode()))

    def reply_stream(self, bodies: list[dict[str, Any]]) -> None:
        events = "".join(f"data: {json.dumps(body)}\r\n\r\n" for body in bodies)
        self.replies.append((200, "text/event-stream", events.encode()))

    def offline(self) -> None:
        self._offline = True

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self._offline:
            self.refused.append(f"{request.method} {request.url}")
            raise AssertionError(f"a request was sent during replay: {request.url}")
        self.requests.append(json.loads(request.content))
        status, content_type, content = self.replies.pop(0)
        return httpx.Response(status, headers={"content-type": content_type}, content=content)

    def client(self, **settings: Any) -> genai.Client:
        transport = httpx.MockTransport(self.handler)
        options = types.HttpOptions(
            base_url="http://llm.test",
            httpx_client=httpx.Client(transport=transport),
            httpx_async_client=httpx.AsyncClient(transport=transport),
        )
        return instrument(genai.Client(api_key="test-key", http_options=options, **settings))


@pytest.fixture
def api() -> FakeGemini:
    return FakeGemini()


def script(api: FakeGemini, stream: bool) -> None:
    if stream:
        chunks = [answer(piece, usage=False) for piece in PIECES]
        chunks[-1]["usageMetadata"] = USAGE
        api.reply_stream(chunks)
    else:
        api.reply_json(answer("".join(PIECES)))


def agent_for(api: FakeGemini, *, is_async: bool, stream: bool) -> Any:
    client = api.client()
    config = types.GenerateContentConfig(temperature=0.2, system_instruction="Be brief.")

    async def async_agent() -> Any:
        models = client.aio.models
        if stream:
            chunks = await models.generate_content_stream(
                model=MODEL, contents=PROMPT, config=config
            )
            return [chunk async for chunk in chunks]
        return await models.generate_content(model=MODEL, contents=PROMPT, config=config)

    def agent() -> Any:
        if is_async:
            return asyncio.run(async_agent())
        if stream:
            chunks = client.models.generate_content_stream(
                model=MODEL, contents=PROMPT, config=config
            )
            return list(chunks)
        return client.models.generate_content(model=MODEL, contents=PROMPT, config=config)

    return agent


def texts(result: Any) -> list[str | None]:
    if isinstance(result, list):
        return [chunk.text for chunk in result]
    return [result.text]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_replay_returns_the_sdk_response_types_without_any_request(
    tmp_path: Path, api: FakeGemini, is_async: bool, stream: bool
) -> None:
    script(api, stream)
    agent = agent_for(api, is_async=is_async, stream=stream)

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert texts(replayed) == texts(recorded)
    assert "".join(t or "" for t in texts(replayed)) == "".join(PIECES)
    chunks = replayed if stream else [replayed]
    assert all(type(chunk) is types.GenerateContentResponse for chunk in chunks)
    last = chunks[-1]
    assert last.usage_metadata is not None
    assert last.usage_metadata.total_token_count == USAGE["totalTokenCount"]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert [m.action for m in session.matched] == ["substituted"]
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert (call.provider, call.name) == ("gcp.gemini", MODEL)
    # What is compared: the request, not the transport (api key, base URL).
    assert call.input == {
        "model": MODEL,
        "contents": PROMPT,
        "config": {"temperature": 0.2, "system_instruction": "Be brief."},
    } | ({"stream": True} if stream else {})
    assert "test-key" not in json.dumps(call.input)
    assert call.attributes["gen_ai.usage.input_tokens"] == USAGE["promptTokenCount"]
    assert call.attributes["gen_ai.usage.output_tokens"] == USAGE["candidatesTokenCount"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_reading_a_stream_further_than_the_recording_did_diverges(
    tmp_path: Path, api: FakeGemini, is_async: bool
) -> None:
    """The recorded agent read the first chunk and stopped; one reading on diverges."""
    script(api, stream=True)
    client = api.client()

    def agent(limit: int | None) -> list[str | None]:
        async def aread() -> list[str | None]:
            got: list[str | None] = []
            stream = await client.aio.models.generate_content_stream(model=MODEL, contents=PROMPT)
            async for chunk in stream:
                got.append(chunk.text)
                if len(got) == limit:
                    break
            return got

        if is_async:
            return asyncio.run(aread())
        got: list[str | None] = []
        for chunk in client.models.generate_content_stream(model=MODEL, contents=PROMPT):
            got.append(chunk.text)
            if len(got) == limit:
                break
        return got

    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(path, api, lambda: agent(1))
    assert replayed == recorded == PIECES[:1]
    with (
        replay(path) as session,
        pytest.raises(ReplayExhaustedError, match="stopped reading after 1 chunk"),
    ):
        agent(None)
    assert isinstance(session.divergence, ReplayExhaustedError)


def test_a_changed_prompt_is_a_strict_mismatch_naming_the_path(
    tmp_path: Path, api: FakeGemini
) -> None:
    script(api, stream=False)
    client = api.client()
    contents = [types.Content(role="user", parts=[types.Part(text=PROMPT)])]
    with record("agent", output=tmp_path / "run.sftrace"):
        client.models.generate_content(model=MODEL, contents=contents)
    api.offline()
    changed = [types.Content(role="user", parts=[types.Part(text="Where is my parcel 43?")])]
    with (
        pytest.raises(ReplayMismatchError, match=r"\$\.contents\[0\]\.parts\[0\]\.text"),
        replay(tmp_path / "run.sftrace"),
    ):
        client.models.generate_content(model=MODEL, contents=changed)
    assert api.refused == []


def test_an_api_error_is_recorded_and_raised_again_as_the_sdk_error(
    tmp_path: Path, api: FakeGemini
) -> None:
    body = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    api.reply_json(body, status=429)
    client = api.client()

    def agent() -> tuple[str, int, str | None, str | None]:
        try:
            client.models.generate_content(model=MODEL, contents=PROMPT)
        except errors.ClientError as exc:  # what an agent catching the SDK's errors sees
            return type(exc).__name__, exc.code, exc.status, exc.message
        return "answered", 0, None, None

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert recorded == ("ClientError", 429, "RESOURCE_EXHAUSTED", "Quota exceeded")
    assert replayed == recorded


class Parcel(BaseModel):
    parcel_id: int
    status: str


def test_a_structured_answer_replays_parsed_as_the_schema_class(
    tmp_path: Path, api: FakeGemini
) -> None:
    api.reply_json(answer(json.dumps({"parcel_id": 42, "status": "shipped"})))
    client = api.client()
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=Parcel
    )

    def agent() -> Any:
        return client.models.generate_content(model=MODEL, contents=PROMPT, config=config).parsed

    recorded, replayed, _ = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert replayed == recorded == Parcel(parcel_id=42, status="shipped")
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    schema = call.input["config"]["response_schema"]
    assert schema["python_type"].endswith("Parcel")


def test_a_chat_session_records_each_turn(tmp_path: Path, api: FakeGemini) -> None:
    api.reply_json(answer("It ships today."))
    api.reply_json(answer("Tomorrow."))
    client = api.client()

    def agent() -> list[str | None]:
        chat = client.chats.create(model=MODEL)
        return [chat.send_message(PROMPT).text, chat.send_message("And arrives?").text]

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", api, agent)

    assert replayed == recorded == ["It ships today.", "Tomorrow."]
    assert len(session.matched) == 2


def test_outside_a_run_the_client_is_untouched(api: FakeGemini) -> None:
    api.reply_json(answer("hello"))
    client = api.client()
    assert instrument(client) is client
    assert client.models.generate_content(model=MODEL, contents=PROMPT).text == "hello"
    assert len(api.requests) == 1


def test_a_vertex_ai_client_records_the_vertex_ai_provider(tmp_path: Path, api: FakeGemini) -> None:
    api.reply_json(answer("hello"))
    client = api.client(vertexai=True)  # Vertex AI express mode: an API key, no project
    with record("agent", output=tmp_path / "run.sftrace"):
        client.models.generate_content(model=MODEL, contents=PROMPT)
    [call] = load_bundle(tmp_path / "run.sftrace").calls
    assert (call.provider, call.name) == ("gcp.vertex_ai", MODEL)


# --- chats with automatic function calling ---------------------------------------------

EMAILS: list[str] = []


def send_email(to: str) -> dict[str, Any]:
    """Send an email (a function the SDK runs itself: automatic function calling)."""
    EMAILS.append(to)
    return {"sent": len(EMAILS)}  # differs from run to run, as a message id would


def afc_script(api: FakeGemini, *, stream: bool) -> None:
    ask = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "send_email", "args": {"to": "ana"}}}],
                },
                "finishReason": "STOP",
            }
        ],
        "modelVersion": MODEL,
    }
    if stream:
        api.reply_stream([ask])
        api.reply_stream([answer("Mail "), answer("sent.")])
    else:
        api.reply_json(ask)
        api.reply_json(answer("Mail sent."))


def afc_agent(api: FakeGemini, *, is_async: bool, stream: bool, message: str = PROMPT) -> Any:
    client = api.client()
    config = types.GenerateContentConfig(tools=[send_email])

    def history(chat: Any) -> list[Any]:
        return [
            [content.model_dump(exclude_none=True) for content in chat.get_history(curated=c)]
            for c in (False, True)
        ]

    async def async_agent() -> Any:
        chat = client.aio.chats.create(model=MODEL, config=config)
        if stream:
            chunks = [c.text async for c in await chat.send_message_stream(message)]
            return chunks, history(chat)
        return (await chat.send_message(message)).text, history(chat)

    def agent() -> Any:
        if is_async:
            return asyncio.run(async_agent())
        chat = client.chats.create(model=MODEL, config=config)
        if stream:
            return [c.text for c in chat.send_message_stream(message)], history(chat)
        return chat.send_message(message).text, history(chat)

    return agent


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_chat_with_automatic_function_calling_replays_without_running_the_functions(
    tmp_path: Path, api: FakeGemini, is_async: bool, stream: bool
) -> None:
    afc_script(api, stream=stream)
    EMAILS.clear()
    agent = afc_agent(api, is_async=is_async, stream=stream)
    path = tmp_path / "run.sftrace"

    recorded, replayed, _ = record_then_replay(path, api, agent)

    assert EMAILS == ["ana"]  # ran once, while recording; never during the replay
    [call] = load_bundle(path).calls  # the SDK's whole loop is one call
    assert call.input["chat"] == ("send_message_stream" if stream else "send_message")
    assert replayed == recorded  # the answer, and the chat's history, as live
    text, (history, curated) = replayed
    assert ("".join(t or "" for t in text) if stream else text) == "Mail sent."
    roles = ["user", "model", "user", "model"] + (["model"] if stream else [])  # a chunk each
    assert [content["role"] for content in history] == roles
    assert history[2]["parts"][0]["function_response"]["response"] == {"result": {"sent": 1}}
    assert curated == history


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_chat_with_automatic_function_calling_and_a_changed_message_diverges(
    tmp_path: Path, api: FakeGemini, is_async: bool
) -> None:
    afc_script(api, stream=False)
    EMAILS.clear()
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        afc_agent(api, is_async=is_async, stream=False)()
    assert len(load_bundle(path).calls) == 1
    api.offline()
    changed = afc_agent(api, is_async=is_async, stream=False, message="Where is parcel 43?")
    with (
        pytest.raises(ReplayMismatchError, match=r"\$\.contents\[0\]\.parts\[0\]\.text"),
        replay(path),
    ):
        changed()
    assert EMAILS == ["ana"]
    assert api.refused == []


def test_a_bundle_with_a_chats_afc_rounds_recorded_apart_still_replays(
    tmp_path: Path, api: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As bundles recorded before chats' AFC turns were recorded whole: a call a round.
    from sftrace.integrations import google_genai

    afc_script(api, stream=False)
    EMAILS.clear()
    path = tmp_path / "run.sftrace"
    agent = afc_agent(api, is_async=False, stream=False)
    with monkeypatch.context() as patched, record("agent", output=path):
        patched.setattr(google_genai, "_runs_functions", lambda config: False)
        recorded = agent()
    assert len(load_bundle(path).calls) == 2
    api.offline()
    EMAILS.clear()  # the function runs again between the rounds, as it did then
    with replay(path) as session:
        replayed = agent()
    session.verify_complete()
    assert session.divergence is None
    assert replayed == recorded
    assert EMAILS == ["ana"]
    assert api.refused == []
