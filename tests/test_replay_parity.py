"""``replay_and_compare``, agent versions through replay and reports, ``counts_by_code``,
and the counts on ``sftrace test`` FAIL lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sftrace
from regress_helpers import (
    DENIED,
    REQUEST,
    invoke,
    llm,
    record_agent,
    record_steps,
    tool,
    write_agent,
)
from sftrace import ConfigError, Expectations, diff, record, replay, replay_and_compare

STEPS = [tool("lookup", {"days": 45}, order_id="A-1"), llm("m-1", {"ok": True}, q="refund?")]


@pytest.fixture
def agent(tmp_path: Path) -> tuple[Path, str]:
    """The refund agent's module (importable) and a recording of its buggy run."""
    module = write_agent(tmp_path)
    bundle = record_agent(tmp_path, module, tmp_path / "late.sftrace")
    return bundle, module


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))


def test_replay_and_compare_returns_the_replay_and_its_report(
    agent: tuple[Path, str], importable: None
) -> None:
    bundle, module = agent
    result, report = replay_and_compare(bundle, f"{module}:buggy")
    assert result.status == "completed"
    assert report.passed
    result, report = replay_and_compare(
        bundle,
        f"{module}:fixed",
        expect=Expectations(output=DENIED, not_called=["refund"]),
        match="unordered",
    )
    assert result.output == DENIED
    assert report.passed, report.format()
    result, report = replay_and_compare(bundle, f"{module}:fixed")
    assert not report.passed
    assert report.counts_by_code["MISSING_CALL"] == 1


def test_replay_and_compare_refuses_an_unknown_option(agent: tuple[Path, str]) -> None:
    with pytest.raises(ConfigError, match=r"unknown replay option\(s\) \['mdoe'\]"):
        replay_and_compare(agent[0], "x:y", mdoe="live")


def test_replay_and_compare_is_public() -> None:
    assert "replay_and_compare" in sftrace.__all__
    assert sftrace.replay_and_compare is replay_and_compare


def test_counts_by_code_beside_counts(tmp_path: Path) -> None:
    a = record_steps(tmp_path / "a.sftrace", STEPS, output={"x": 1})
    extra = [*STEPS, tool("refund", {}, order_id="A-1"), tool("notify", {}, to="x")]
    b = record_steps(tmp_path / "b.sftrace", extra, output={"x": 2})
    report = diff(a, b)
    assert report.counts_by_code == {"OUTPUT_VALUE_CHANGED": 1, "UNEXPECTED_CALL": 2}
    assert sum(report.counts_by_code.values()) == sum(report.counts.values())
    assert report.to_dict()["counts_by_code"] == report.counts_by_code
    assert diff(a, a).counts_by_code == {}


def test_agent_version_override_on_replay(agent: tuple[Path, str], importable: None) -> None:
    bundle, module = agent
    versioned = bundle.with_name("v.sftrace")
    with record("refund-agent", output=versioned, run_input=REQUEST, agent_version="1.0"):
        __import__(module).buggy(REQUEST)
    saved = bundle.with_name("replayed.sftrace")
    result = sftrace.replay_run(versioned, f"{module}:buggy", agent_version="1.1", save=saved)
    assert result.agent_version == "1.1"
    assert sftrace.load_bundle(saved).manifest.agent_version == "1.1"
    assert sftrace.load_bundle(versioned).manifest.agent_version == "1.0"
    report = sftrace.compare(versioned, result)
    assert "  agent version: recorded 1.0, replayed 1.1" in report.format().splitlines()
    assert report.to_dict()["candidate"]["agent_version"] == "1.1"
    # Without an override the replayed run keeps the recorded version.
    assert sftrace.replay_run(versioned, f"{module}:buggy").agent_version == "1.0"
    # replay() takes it too; a report of unversioned runs says nothing about versions.
    with replay(bundle, agent_version="2.0") as session:
        __import__(module).buggy(REQUEST)
    assert session.options.agent_version == "2.0"
    assert (
        "agent version"
        not in sftrace.compare(bundle, sftrace.replay_run(bundle, f"{module}:buggy")).format()
    )
    with pytest.raises(ConfigError, match="agent_version must be"):
        sftrace.replay_run(bundle, f"{module}:buggy", agent_version="")


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, str]:
    module = write_agent(tmp_path)
    (tmp_path / "bundles").mkdir()
    record_agent(tmp_path, module, tmp_path / "bundles" / "late.sftrace")
    path = tmp_path / "refunds.sftrace-suite.toml"
    path.write_text(
        f"""
name = "refunds"
entrypoint = "{module}:fixed"

[[cases]]
name = "late"
bundle = "bundles/late.sftrace"
"""
    )
    return path, module


def test_test_fail_line_carries_the_counts(suite: tuple[Path, str]) -> None:
    result = invoke("test", suite[0])
    assert result.exit_code == 1, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("FAIL  refunds::late  2 errors, 0 warnings (")


def test_test_agent_version_reaches_the_report(suite: tuple[Path, str]) -> None:
    result = invoke("test", suite[0], "--agent-version", "2.0.0", "--json")
    assert result.exit_code == 1, result.output
    [case] = json.loads(result.stdout)["cases"]
    report: dict[str, Any] = case["report"]
    assert report["candidate"]["agent_version"] == "2.0.0"
    assert report["baseline"]["agent_version"] is None


def test_test_bad_agent_version_exits_2_before_running(suite: tuple[Path, str]) -> None:
    result = invoke("test", suite[0], "--agent-version", "a\nb", "--junit-xml", "out.xml")
    assert result.exit_code == 2
    assert "agent_version must be" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    assert not Path("out.xml").exists()
