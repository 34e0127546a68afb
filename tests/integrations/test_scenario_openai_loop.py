"""End to end on an OpenAI-SDK tool loop with streaming and an HTTP 400: record, replay
frozen without a request or a tool body, compare, change, export a pytest test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import fake_llm_api as fake
import openai
import openai_loop_agent as agent
import pytest

import sftrace
from regress_helpers import assert_exported_test_judges_the_fix
from sftrace.integrations.openai import uninstrument_all

REQUEST = {"question": "Where is my parcel 42?"}
SORRY = {"answer": "Sorry, I could not look that up.", "status": 400}

pytest_plugins = ["pytester"]


@pytest.fixture
def api() -> Iterator[fake.FakeAPI]:
    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    agent.ANSWER.append(api.handler)
    agent.BODIES.clear()
    yield api
    agent.ANSWER.pop()


@pytest.fixture(autouse=True)
def _no_class_patches() -> Iterator[None]:
    yield
    uninstrument_all()


def _script_success(api: fake.FakeAPI) -> None:
    api.reply_json(
        fake.chat_completion(
            tool_calls=[fake.tool_call("call_1", "order_status", {"order_id": "42"})]
        )
    )
    api.reply_json(fake.chat_completion("Parcel 42 is in transit."))
    api.reply_stream(fake.chat_chunks(["Your parcel ", "ships ", "today."]), named=False, done=True)


def _script_failure(api: fake.FakeAPI) -> None:
    api.reply_json(
        fake.chat_completion(
            tool_calls=[fake.tool_call("call_1", "order_status", {"order_id": "42"})]
        )
    )
    api.reply_json(
        {
            "error": {
                "message": "context too long",
                "type": "invalid_request_error",
                "param": None,
                "code": "context_length_exceeded",
            }
        },
        status=400,
    )


def _record(path: Path) -> None:
    with sftrace.record("parcel-agent", output=path, run_input=REQUEST) as session:
        session.set_output(agent.handle(REQUEST))


def test_unchanged_agent_replays_offline_and_compares_clean(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    _script_success(api)
    path = tmp_path / "ok.sftrace"
    _record(path)
    agent.BODIES.clear()
    api.offline()
    result = sftrace.replay_run(path, agent.handle)
    assert result.status == "completed", result.divergence
    assert result.output == {"answer": "Your parcel ships today."}
    assert agent.BODIES == []
    assert api.refused == []
    report = sftrace.compare(path, result)
    assert [f.code for f in report.findings if f.severity != "info"] == []


def test_changed_temperature_is_one_divergence_naming_the_field(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    _script_success(api)
    path = tmp_path / "ok.sftrace"
    _record(path)
    api.offline()
    result = sftrace.replay_run(path, agent.handle_warmer)
    assert result.status == "diverged"
    assert "$.temperature" in str(result.divergence)
    assert api.refused == []
    report = sftrace.compare(path, result)
    assert [f.code for f in report.findings if f.severity == "error"] == ["REPLAY_DIVERGED"]


def test_recorded_http_400_replays_as_the_sdk_error_and_reproduces_the_failure(
    tmp_path: Path, api: fake.FakeAPI
) -> None:
    """The production failure comes back as ``openai.BadRequestError`` with its status
    code and body: the replay is ``failed``, not ``diverged``."""
    _script_failure(api)
    path = tmp_path / "failed.sftrace"
    with pytest.raises(openai.BadRequestError):
        _record(path)
    assert sftrace.load_bundle(path).manifest.status == "failed"
    api.offline()
    result = sftrace.replay_run(path, agent.handle)
    assert result.status == "failed"
    assert result.reproduced_failure is True
    assert api.refused == []
    fixed = sftrace.replay_run(path, agent.handle_fixed)
    assert fixed.status == "completed"
    assert fixed.output == SORRY


def test_exported_test_fails_on_the_buggy_agent_and_passes_on_the_fixed_one(
    tmp_path: Path,
    api: fake.FakeAPI,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _script_failure(api)
    bundle = tmp_path / "failed.sftrace"
    with pytest.raises(openai.BadRequestError):
        _record(bundle)
    api.offline()
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    shutil.copy(Path(agent.__file__), pytester.path / "parcel_agent_copy.py")
    assert_exported_test_judges_the_fix(pytester, bundle, "parcel_agent_copy", SORRY)
