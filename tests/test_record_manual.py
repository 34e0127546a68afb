"""Recording by hand and the recording options shared with the peers' users:
``record_tool_call`` / ``record_llm_call``, ``agent_version``, ``cost_usd``,
``llm_call(replay_policy=)``, ``record(serializer=)`` for call values, optional state
values, builtins as tools, and the note on an exception whose bundle was not saved."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest

from sftrace import (
    ConfigError,
    ReplayMismatchError,
    llm_request,
    load_bundle,
    record,
    replay,
    replay_run,
    trace_tool,
)


@trace_tool
def lookup(order_id: str) -> dict[str, Any]:
    raise AssertionError("a replay answers lookup from the recording")


def _agent_using_lookup() -> Any:
    return lookup("A-1")


def test_record_tool_call_is_replayed_for_a_decorated_tool(tmp_path: Path) -> None:
    """A tool call recorded by hand answers a later ``@trace_tool`` of that name."""
    path = tmp_path / "manual.sftrace"
    with record("manual", output=path) as session:
        session.record_tool_call(
            "lookup", {"order_id": "A-1"}, result={"status": "shipped"}, duration_s=1.5
        )
        session.set_output({"status": "shipped"})
    bundle = load_bundle(path)
    [call] = bundle.calls
    assert (call.kind, call.name, call.input, call.output) == (
        "tool",
        "lookup",
        {"order_id": "A-1"},
        {"status": "shipped"},
    )
    # It started duration_s before it was recorded, but not before the run did.
    assert call.start_time_ns == int(bundle.run_span["startTimeUnixNano"])
    result = replay_run(path, _agent_using_lookup)
    assert result.error is None
    assert result.output == {"status": "shipped"}
    assert result.reproduced


def test_record_tool_call_with_an_error_replays_the_error(tmp_path: Path) -> None:
    path = tmp_path / "err.sftrace"
    with record("manual", output=path) as session:
        session.record_tool_call(
            "lookup",
            {"order_id": "A-1"},
            error=TimeoutError("carrier API timed out"),
            duration_s=0,
        )
    [call] = load_bundle(path).calls
    assert call.start_time_ns == call.end_time_ns
    assert call.error is not None
    assert call.error.type == "TimeoutError"
    assert call.error.message == "carrier API timed out"
    with replay(path), pytest.raises(TimeoutError, match="carrier API timed out"):
        _agent_using_lookup()


def test_record_llm_call_records_usage_and_cost(tmp_path: Path) -> None:
    path = tmp_path / "llm.sftrace"
    with record("manual", output=path) as session:
        session.record_llm_call(
            provider="openai",
            model="gpt-4o",
            input={"messages": [{"role": "user", "content": "hi"}]},
            output={"text": "hello"},
            usage={"prompt_tokens": 7, "completion_tokens": 3},
            cost_usd=0.0021,
        )
    bundle = load_bundle(path)
    [call] = bundle.calls
    assert (call.kind, call.provider, call.name, call.output) == (
        "llm",
        "openai",
        "gpt-4o",
        {"text": "hello"},
    )
    totals = bundle.manifest.totals
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens) == (7, 3, 10)
    assert totals.cost_usd == pytest.approx(0.0021)

    def agent() -> Any:
        return llm_request(
            provider="openai",
            model="gpt-4o",
            input={"messages": [{"role": "user", "content": "hi"}]},
            call=lambda: pytest.fail("a replay answers the call from the recording"),
        )

    assert replay_run(path, agent).output == {"text": "hello"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "", "arguments": {}}, "name must be a non-empty string"),
        ({"name": "t", "arguments": [1]}, "arguments must be a dict"),
        ({"name": "t", "arguments": {}, "error": "boom"}, "error must be an exception"),
        ({"name": "t", "arguments": {}, "result": 1, "error": ValueError()}, "not both"),
        ({"name": "t", "arguments": {}, "duration_s": -1}, "duration_s must be"),
    ],
)
def test_record_tool_call_rejects_bad_arguments(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.sftrace"
    with record("manual", output=path) as session:
        name, arguments = kwargs.pop("name"), kwargs.pop("arguments")
        with pytest.raises(ConfigError, match=message):
            session.record_tool_call(name, arguments, **kwargs)
    assert load_bundle(path).calls == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"provider": ""}, "provider must be a non-empty string"),
        ({"usage": {"tokens": 3}}, "unknown usage keys"),
        ({"usage": {"input_tokens": -1}}, r"usage\['input_tokens'\] must be a token count"),
        ({"cost_usd": "free"}, "cost_usd must be a number"),
    ],
)
def test_record_llm_call_rejects_bad_arguments(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.sftrace"
    with record("manual", output=path) as session:
        call = {"provider": "openai", "model": "m", "input": "q", "output": "a", **kwargs}
        with pytest.raises(ConfigError, match=message):
            session.record_llm_call(**call)
    assert load_bundle(path).calls == []


def test_record_tool_call_outside_the_block_is_refused() -> None:
    session = record("manual")
    with pytest.raises(ConfigError, match="inside the `with record"):
        session.record_tool_call("t", {}, result=1)


def test_agent_version_is_in_the_manifest_and_on_the_run_span(tmp_path: Path) -> None:
    path = tmp_path / "v.sftrace"
    with record("versioned", output=path, agent_version="1.4.2"):
        pass
    bundle = load_bundle(path)
    assert bundle.manifest.agent_version == "1.4.2"
    assert bundle.run_span["attributes"]  # the run span exists
    attributes = {a["key"]: a["value"] for a in bundle.run_span["attributes"]}
    assert attributes["sftrace.agent_version"] == {"stringValue": "1.4.2"}


def test_a_bundle_without_agent_version_has_none(tmp_path: Path) -> None:
    path = tmp_path / "plain.sftrace"
    with record("plain", output=path):
        pass
    assert load_bundle(path).manifest.agent_version is None
    assert "agent_version" not in (path / "manifest.json").read_text()


@pytest.mark.parametrize("bad", ["", "a\nb", 3, "x" * 201])
def test_bad_agent_version_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigError, match="agent_version must be"):
        record("a", agent_version=bad)


def test_llm_request_cost_usd_is_recorded_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "cost.sftrace"
    with record("cost", output=path):
        llm_request(provider="p", model="m", input="q", call=lambda: "a", cost_usd=0.5)
    assert load_bundle(path).manifest.totals.cost_usd == 0.5
    with pytest.raises(ConfigError, match="cost_usd must be a number"):
        llm_request(provider="p", model="m", input="q", call=lambda: "a", cost_usd=-1)


def test_manual_llm_call_takes_a_replay_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.sftrace"
    with record("policy", output=path) as session:
        with session.llm_call(model="m", input="q", replay_policy="live") as handle:
            handle.set_output("a")
        with pytest.raises(ConfigError, match="replay_policy"):
            session.llm_call(model="m", input="q", replay_policy="sometimes")
    [call] = load_bundle(path).calls
    assert call.policy == "live"


def _serialize(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(type(value).__name__)


@trace_tool
def due_date(day: dt.date) -> dt.date:
    return day + dt.timedelta(days=1)


def test_record_serializer_applies_to_tool_and_llm_values(tmp_path: Path) -> None:
    path = tmp_path / "ser.sftrace"
    with record("ser", output=path, serializer=_serialize) as session:
        due_date(dt.date(2026, 1, 1))
        llm_request(provider="p", model="m", input=dt.date(2026, 1, 2), call=lambda: "ok")
        session.record_state_change(key="when", after=dt.date(2026, 1, 3))
    bundle = load_bundle(path)
    assert [(c.input, c.output) for c in bundle.calls] == [
        ({"day": "2026-01-01"}, "2026-01-02"),
        ("2026-01-02", "ok"),
    ]
    assert bundle.state_changes[0].after == "2026-01-03"


def test_state_change_values_are_optional(tmp_path: Path) -> None:
    path = tmp_path / "state.sftrace"
    with record("state", output=path) as session:
        session.record_state_change(key="cart", after=["book"])
        session.record_state_change(key="coupon", before="X10", after=None)
    raw = (path / "spans.jsonl").read_text()
    changes = load_bundle(path).state_changes
    assert [(c.key, c.before, c.after) for c in changes] == [
        ("cart", None, ["book"]),
        ("coupon", "X10", None),
    ]
    # Omitted: no attribute at all; None: recorded as JSON null.
    assert raw.count("sftrace.state.before") == 1
    assert raw.count("sftrace.state.after") == 2


def test_builtin_without_signature_is_recorded_as_args_and_kwargs(tmp_path: Path) -> None:
    traced_max = trace_tool(name="max")(max)
    traced_len = trace_tool(name="len")(len)
    path = tmp_path / "builtin.sftrace"
    with record("builtins", output=path):
        assert traced_max(3, 9, 4) == 9
        assert traced_max([1, 2], default=0) == 2
        assert traced_len("abc") == 3
    calls = load_bundle(path).calls
    assert calls[0].input == {"args": [3, 9, 4], "kwargs": {}}
    assert calls[0].output == 9
    assert calls[1].input == {"args": [[1, 2]], "kwargs": {"default": 0}}
    assert calls[2].input == {"obj": "abc"}  # len has a signature: by parameter name
    with replay(path):
        assert traced_max(3, 9, 4) == 9
        with pytest.raises(ReplayMismatchError):
            traced_max(1, 2)


def test_unsaved_bundle_adds_a_note_to_the_runs_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sftrace._bundle.writer import BundleWriter

    def refuse(*args: Any, **kwargs: Any) -> Path:
        raise OSError("disk full")

    monkeypatch.setattr(BundleWriter, "finalize", refuse)
    caplog.set_level(logging.WARNING, logger="sftrace")
    with pytest.raises(KeyError) as caught, record("noted", output=tmp_path / "n.sftrace"):
        raise KeyError("agent bug")
    notes = getattr(caught.value, "__notes__", [])
    assert notes == ["sftrace: the bundle of this run could not be saved: disk full"]
    assert "disk full" in caplog.text
