"""End to end on an asyncio agent with ``gather``, nested tools and a raising tool:
record, replay frozen with no tool body run, compare, change, export a pytest test."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
import scenario_support_agent as agent

import sftrace
from regress_helpers import assert_exported_test_judges_the_fix
from sftrace.testing import assert_same_as_recorded

REQUEST = {"customer_id": "c-42"}
RECORDED_OUTPUT = {"customer": "cached:c-42", "tier": "silver", "points": 15}
CORRECT_OUTPUT = {"customer": "cached:c-42", "tier": "gold", "points": 15}

pytest_plugins = ["pytester"]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "support.sftrace"

    async def main() -> None:
        async with sftrace.record("support-agent", output=path, run_input=REQUEST) as session:
            session.set_output(await agent.handle(REQUEST))

    asyncio.run(main())
    agent.BODIES.clear()
    return path


def test_the_recording_holds_every_call_with_nesting(bundle: Path) -> None:
    """Both gathered tools, the nested calls and the raising tool are recorded."""
    loaded = sftrace.load_bundle(bundle)
    names = sorted(call.name for call in loaded.calls)
    assert names == sorted(
        ["fetch_orders", "fetch_profile", "score_customer", "loyalty_points", "loyalty_points"]
    )
    profile = next(call for call in loaded.calls if call.name == "fetch_profile")
    assert profile.error is not None
    assert profile.error.type.endswith("QuotaExceeded")
    assert loaded.manifest.status == "completed"


def test_frozen_replay_of_the_unchanged_agent_runs_no_body_and_passes_compare(
    bundle: Path,
) -> None:
    """The replay completes, runs no tool body, its handler catches the replayed
    ``QuotaExceeded``, the output is the recorded one, and compare finds nothing."""
    result = sftrace.replay_run(bundle, agent.handle)
    assert result.status == "completed", result.divergence
    assert agent.BODIES == []
    assert result.output == RECORDED_OUTPUT
    assert result.unused == []
    assert {call.name for call in result.covered} == {"loyalty_points"}
    report = assert_same_as_recorded(result)
    assert [f.code for f in report.findings if f.severity != "info"] == []


def test_the_replayed_exception_is_the_agents_own_class(bundle: Path) -> None:
    """``except QuotaExceeded`` in the agent catches the replayed failure, args intact."""
    seen: list[BaseException] = []

    async def probe(request: dict[str, Any]) -> Any:
        try:
            await agent.fetch_profile(request["customer_id"])
        except agent.QuotaExceeded as exc:
            seen.append(exc)
        return await agent.handle(request)

    with sftrace.replay(bundle, match="unordered"), pytest.raises(agent.QuotaExceeded) as info:
        asyncio.run(agent.fetch_profile("c-42"))
    assert info.value.args == ("CRM quota exceeded for c-42", 12)
    assert agent.BODIES == []


def test_a_changed_argument_is_reported_at_its_path(bundle: Path) -> None:
    """Asking for another customer diverges at the first call, naming the input path."""
    result = sftrace.replay_run(bundle, agent.handle_changed)
    assert result.status == "diverged"
    assert agent.BODIES == []
    message = str(result.divergence)
    assert "$.customer_id" in message
    assert "c-42-x" in message
    report = sftrace.compare(bundle, result)
    errors = [f.code for f in report.findings if f.severity == "error"]
    assert errors == ["REPLAY_DIVERGED"]


def test_the_fix_changes_exactly_the_output_value(bundle: Path) -> None:
    """The corrected threshold changes the tier and nothing else."""
    result = sftrace.replay_run(bundle, agent.handle_fixed)
    assert result.status == "completed"
    assert result.output == CORRECT_OUTPUT
    report = sftrace.compare(bundle, result)
    assert [(f.code, f.severity) for f in report.findings if f.severity != "info"] == [
        ("OUTPUT_VALUE_CHANGED", "error")
    ]


def test_exported_test_fails_on_the_buggy_agent_and_passes_on_the_fixed_one(
    pytester: pytest.Pytester, bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exported pytest file states the corrected output: red on the recorded code,
    green on the fix, run from another directory."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    shutil.copy(Path(agent.__file__), pytester.path / "scenario_support_agent.py")
    assert_exported_test_judges_the_fix(pytester, bundle, "scenario_support_agent", CORRECT_OUTPUT)
