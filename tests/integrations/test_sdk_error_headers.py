"""A replayed SDK API error carries the response headers the agent's handler reads: when
to retry (``retry-after``, ``retry-after-ms``), which request it was (``exc.request_id``)
and the rate-limit counters; other headers (cookies) are never recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import fake_llm_api as fake
import openai
import pytest

from sftrace import load_bundle, record, replay, replay_run
from sftrace.integrations import anthropic as sftrace_anthropic
from sftrace.integrations import openai as sftrace_openai

HEADERS = {
    "retry-after-ms": "250",
    "x-ratelimit-remaining-requests": "0",
    "set-cookie": "session=cookie-never-recorded",
}


@pytest.fixture(autouse=True)
def _no_class_patches() -> Iterator[None]:
    yield
    sftrace_openai.uninstrument_all()
    sftrace_anthropic.uninstrument_all()


def openai_agent(api: fake.FakeAPI) -> Callable[[], str]:
    client = sftrace_openai.instrument(
        api.sdk_client(
            openai.OpenAI,
            openai.AsyncOpenAI,
            is_async=False,
            api_key="sk-test",
            base_url="http://llm.test/v1",
        )
    )

    def agent() -> str:
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        except openai.RateLimitError as exc:
            wait = exc.response.headers.get("retry-after-ms")
            return f"waited {wait}ms request_id={exc.request_id}"
        return "answered"

    return agent


def anthropic_agent(api: fake.FakeAPI) -> Callable[[], str]:
    client = sftrace_anthropic.instrument(
        api.sdk_client(
            anthropic.Anthropic,
            anthropic.AsyncAnthropic,
            is_async=False,
            api_key="sk-ant-test",
            base_url="http://llm.test",
        )
    )

    def agent() -> str:
        try:
            client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}]
            )
        except anthropic.RateLimitError as exc:
            wait = exc.response.headers.get("retry-after-ms")
            return f"waited {wait}ms request_id={exc.request_id}"
        return "answered"

    return agent


@pytest.mark.parametrize(
    ("sdk", "request_id_header", "make_agent"),
    [("openai", "x-request-id", openai_agent), ("anthropic", "request-id", anthropic_agent)],
)
def test_a_handler_reading_the_errors_headers_replays(
    tmp_path: Path, sdk: str, request_id_header: str, make_agent: Callable[[fake.FakeAPI], Any]
) -> None:
    api = fake.FakeAPI(sdk, request_id_header=request_id_header)
    api.reply_json(
        {"error": {"type": "rate_limit_error", "message": "slow"}}, status=429, headers=HEADERS
    )
    agent = make_agent(api)
    path = tmp_path / "h.sftrace"
    with record("agent", output=path) as session:
        session.set_output(agent())
    assert load_bundle(path).output == "waited 250ms request_id=req_001"
    error = load_bundle(path).calls[0].error
    assert error is not None
    assert error.headers_json is not None
    assert "cookie" not in (path / "spans.jsonl").read_text()
    api.offline()
    result = replay_run(path, agent)
    assert (result.status, result.output, result.reproduced) == (
        "completed",
        "waited 250ms request_id=req_001",
        True,
    )
    with replay(path):
        assert agent() == "waited 250ms request_id=req_001"
    assert api.refused == []
