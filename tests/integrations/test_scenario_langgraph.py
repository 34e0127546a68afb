"""End to end on a LangGraph refund agent: record, replay frozen without reaching the
model or a tool body, compare, change, export a pytest test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import langgraph_refund_agent as agent
import pytest

import sftrace
from regress_helpers import assert_exported_test_judges_the_fix

REQUEST = {"question": "Refund my order A-7"}
RECORDED = {"decision": "refunded", "reply": "Your refund of 80.0 is on its way."}
EXPECTED = {**RECORDED, "decision": "needs_review"}

pytest_plugins = ["pytester"]


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "refund.sftrace"
    agent.MODEL.replies = agent.script_replies()
    agent.MODEL.calls.clear()
    agent.MODEL.is_offline = False
    with sftrace.record("refund-graph", output=path, run_input=REQUEST) as session:
        session.set_output(agent.handle(REQUEST))
    agent.MODEL.is_offline = True
    agent.BODIES.clear()
    yield path
    assert agent.MODEL.refused == []


def test_unchanged_agent_replays_offline_and_compares_clean(bundle: Path) -> None:
    result = sftrace.replay_run(bundle, agent.handle)
    assert result.status == "completed", result.divergence
    assert result.output == RECORDED
    assert agent.BODIES == []
    report = sftrace.compare(bundle, result)
    assert [f.code for f in report.findings if f.severity != "info"] == []


def test_the_fix_changes_exactly_the_output_value(bundle: Path) -> None:
    result = sftrace.replay_run(bundle, agent.handle_fixed)
    assert result.status == "completed"
    assert result.output == EXPECTED
    report = sftrace.compare(bundle, result)
    assert [(f.code, f.severity) for f in report.findings if f.severity != "info"] == [
        ("OUTPUT_VALUE_CHANGED", "error")
    ]


def test_reworded_question_is_one_divergence_at_the_first_model_call(bundle: Path) -> None:
    result = sftrace.replay_run(bundle, agent.handle_reworded)
    assert result.status == "diverged"
    assert "Please hurry." in str(result.divergence)
    report = sftrace.compare(bundle, result)
    assert [f.code for f in report.findings if f.severity == "error"] == ["REPLAY_DIVERGED"]


def test_exported_test_fails_on_the_buggy_agent_and_passes_on_the_fixed_one(
    bundle: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    here = Path(agent.__file__).parent
    shutil.copy(here / "langgraph_refund_agent.py", pytester.path / "graph_agent_copy.py")
    shutil.copy(here / "scripted_chat_model.py", pytester.path / "scripted_chat_model.py")
    assert_exported_test_judges_the_fix(pytester, bundle, "graph_agent_copy", EXPECTED)
