"""A tool that calls another tool: when the outer call is answered from the recording,
the calls recorded inside it are covered, never missing, in every verdict path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sftrace
from sftrace import load_suite

AGENT = """
from sftrace import trace_tool

BODIES = []


@trace_tool
def price(item: str) -> float:
    BODIES.append("price")
    return {"tea": 3.5, "cake": 4.0}[item]


@trace_tool
def basket_total(items: list) -> float:
    BODIES.append("basket_total")
    return sum(price(item) for item in items)


def checkout(request):
    return {"total": basket_total(request["items"])}
"""

REQUEST = {"items": ["tea", "cake"]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    (tmp_path / "nested_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("nested_agent")
    bundle = tmp_path / "nested.sftrace"
    with sftrace.record("shop", output=bundle, run_input=REQUEST) as session:
        session.set_output(module.checkout(REQUEST))
    module.BODIES.clear()
    return bundle, module


def test_inner_calls_are_covered_not_unused(project: tuple[Path, Any]) -> None:
    bundle, module = project
    result = sftrace.replay_run(bundle, module.checkout)
    assert result.status == "completed"
    assert module.BODIES == []
    assert [call.name for call in result.covered] == ["price", "price"]
    assert result.unused == []


def test_compare_finds_nothing_on_the_unchanged_agent(project: tuple[Path, Any]) -> None:
    bundle, module = project
    report = sftrace.compare(bundle, sftrace.replay_run(bundle, module.checkout))
    assert list(report.findings) == []
    assert report.verdict == "pass"


def test_a_suite_case_of_the_unchanged_agent_passes(project: tuple[Path, Any]) -> None:
    bundle, _ = project
    suite_path = bundle.parent / "shop.sftrace-suite.toml"
    suite_path.write_text(
        'name = "shop"\nentrypoint = "nested_agent:checkout"\n\n'
        '[[cases]]\nname = "as recorded"\nbundle = "nested.sftrace"\n'
    )
    (result,) = load_suite(suite_path).run()
    assert result.outcome == "passed", result.report.format() if result.report else result


def test_verify_complete_accepts_covered_calls(project: tuple[Path, Any]) -> None:
    bundle, module = project
    with sftrace.replay(bundle) as session:
        module.checkout(REQUEST)
    session.verify_complete()
    assert [call.name for call in session.covered] == ["price", "price"]


def test_a_real_change_inside_still_shows(project: tuple[Path, Any]) -> None:
    """Covering is not hiding: the outer call's changed input is still a finding."""
    bundle, module = project
    result = sftrace.replay_run(bundle, lambda request: module.checkout({"items": ["tea"]}))
    assert result.status == "diverged"
    report = sftrace.compare(bundle, result)
    assert [f.code for f in report.findings if f.severity == "error"] == ["REPLAY_DIVERGED"]


def test_diff_of_a_saved_replay_of_the_unchanged_agent_passes(project: tuple[Path, Any]) -> None:
    """A saved replay keeps no record of the covered calls: diff must not call them missing."""
    bundle, module = project
    saved = bundle.parent / "replayed.sftrace"
    sftrace.replay_run(bundle, module.checkout, save=saved)
    report = sftrace.diff(bundle, saved)
    assert list(report.findings) == [], report.format()


def test_diff_of_a_saved_replay_still_reports_a_changed_outer_call(
    project: tuple[Path, Any],
) -> None:
    """Only the calls inside an outer call the saved replay answered unchanged are covered."""
    bundle, module = project
    saved = bundle.parent / "replayed.sftrace"
    sftrace.replay_run(
        bundle,
        lambda request: module.checkout({"items": ["tea"]}),
        save=saved,
        on_miss="live",
        allow_live_tools=["*"],
    )
    report = sftrace.diff(bundle, saved)
    codes = sorted(f.code for f in report.findings if f.severity == "error")
    assert "MISSING_CALL" in codes or "CALL_INPUT_CHANGED" in codes, report.format()


def test_diff_of_an_unrelated_run_does_not_cover_inner_calls(project: tuple[Path, Any]) -> None:
    """A recording that only looks like a replay (not derived from the baseline) covers nothing."""
    bundle, _ = project
    other = bundle.parent / "other.sftrace"
    with sftrace.record("shop", output=other, run_input=REQUEST) as session:
        session.record_tool_call("basket_total", {"items": REQUEST["items"]}, result=7.5)
        session.set_output({"total": 7.5})
    report = sftrace.diff(bundle, other)
    assert [f.code for f in report.findings] == ["MISSING_CALL", "MISSING_CALL"]


def test_an_extra_call_counts_the_covered_calls_apart(project: tuple[Path, Any]) -> None:
    """The calls recorded inside an answered call were never reached: an extra call's
    message says how many of the "used" calls they are."""
    bundle, module = project

    def more(request: Any) -> Any:
        module.checkout(request)
        return module.price("tea")

    result = sftrace.replay_run(bundle, more)
    assert result.status == "diverged"
    assert "all 3 recorded calls were already used (2 of them inside calls answered from" in (
        str(result.divergence)
    )


def test_expectations_count_the_calls_made_inside_a_covered_call(
    project: tuple[Path, Any], tmp_path: Path
) -> None:
    """The replayed run made the calls recorded inside the call answered for it: a test
    that ``price`` is never called must fail for the unchanged agent (it was, inside
    ``basket_total``), and counts and order see them where the recording has them."""
    from sftrace.testing import (
        assert_call_count,
        assert_expectations,
        assert_not_called,
        assert_sequence,
    )

    bundle, module = project
    result = sftrace.replay_run(bundle, module.checkout)
    assert [call.name for call in result.calls] == ["basket_total"]
    assert [call.name for call in result.made_calls] == ["basket_total", "price", "price"]
    assert [call.input for call in result.made_calls[1:]] == [{"item": "tea"}, {"item": "cake"}]
    with pytest.raises(AssertionError, match="expected 'price' not to be called"):
        assert_not_called(result, "price")
    assert_call_count(result, "price", 2)
    assert_sequence(result, ["basket_total", "price", "price"])
    with pytest.raises(AssertionError, match="EXPECTATION_FAILED"):
        assert_expectations(result, not_called=["price"])
    suite = tmp_path / "nested.sftrace-suite.toml"
    suite.write_text(
        f'entrypoint = "nested_agent:checkout"\n[[cases]]\nname = "no pricing"\n'
        f'bundle = "{bundle.name}"\n[cases.expect]\nnot_called = ["price"]\n'
    )
    (case,) = load_suite(suite).run()
    assert case.outcome == "failed"
    assert case.report is not None
    assert "expected 'price' not to be called" in case.report.format()


def test_the_replay_report_counts_the_covered_calls(project: tuple[Path, Any]) -> None:
    """`sftrace replay` says how many recorded calls were covered (text and --json), so
    its counts add up: recorded = matched + unused + covered."""
    import json

    from click.testing import CliRunner

    from sftrace._cli.main import cli
    from sftrace._cli.replay import register

    bundle, _ = project
    register(cli)
    text = CliRunner().invoke(cli, ["replay", str(bundle), "-e", "nested_agent:checkout"])
    assert text.exit_code == 0, text.output
    assert "2 recorded calls inside calls answered from the recording" in text.output
    document = CliRunner().invoke(
        cli, ["replay", str(bundle), "-e", "nested_agent:checkout", "--json"]
    )
    parsed = json.loads(document.stdout)
    assert [call["name"] for call in parsed["covered"]] == ["price", "price"]
    assert parsed["recorded"]["calls"] == len(parsed["matched"]) + len(parsed["unused"]) + len(
        parsed["covered"]
    )
