"""``sftrace fork``: the report before, at and after the fork point, -o, --json, exit 0/1/2."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

import sample_agents as agents
from fork_agents import nested_agent, picking_agent
from sample_agents import recorded
from sftrace import load_bundle
from sftrace._cli import fork as fork_cli
from sftrace._cli import replay as replay_cli
from sftrace._cli.main import cli

fork_cli.register(cli)
replay_cli.register(cli)

REFUND = Path(__file__).resolve().parent.parent / "examples" / "refund_agent"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return recorded(tmp_path / "b.sftrace", picking_agent)


def test_refund_example_forked_at_the_decision_escalates_for_real_then_replays_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented command: the override flips the model's decision, the agent opens
    a ticket for real instead of refunding, and the saved fork replays frozen."""
    monkeypatch.syspath_prepend(str(REFUND))
    import refund_agent

    refund_agent.ESCALATIONS.clear()
    refund_agent.REFUNDS_ISSUED.clear()
    forked = tmp_path / "forked.sftrace"
    result = invoke(
        "fork",
        REFUND / "bundles" / "refund_outside_window.sftrace",
        "-e",
        "refund_agent:handle",
        "--at",
        "support-1#1",
        "--override",
        f"@{REFUND / 'escalate.json'}",
        "-o",
        forked,
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "at call 2 (llm fakellm/support-1, answered with the override)" in lines[0]
    before = lines.index("before the fork point (answered from the recording):")
    at = lines.index("at the fork point:")
    after = lines.index("after the fork point (run for real):")
    assert lines[before + 1].split() == [
        "1.",
        "#1",
        "tool",
        "lookup_order",
        "substituted",
        "[exact]",
    ]
    assert lines[at + 1].split() == [
        "2.",
        "#2",
        "llm",
        "fakellm/support-1",
        "overridden",
        "[exact]",
    ]
    assert lines[after + 1].split() == ["3.", "new", "tool", "escalate_to_human", "live"]
    assert "recorded calls not made: 1" in result.stdout
    assert "#3 tool issue_refund" in result.stdout
    assert "forked at call 2: completed" in result.stdout
    assert refund_agent.ESCALATIONS == ["A-1001"]
    assert refund_agent.REFUNDS_ISSUED == []
    saved = load_bundle(forked)
    assert saved.output["decision"] == "escalated"
    assert saved.manifest.derived_from is not None
    assert saved.manifest.derived_from["how"] == "fork"
    refund_agent.ESCALATIONS.clear()
    frozen = invoke("replay", forked, "-e", "refund_agent:handle")
    assert frozen.exit_code == 0, frozen.output
    assert refund_agent.ESCALATIONS == []


def test_refund_example_script_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/refund_agent/fork_decision.py forks, saves and replays the fork frozen."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REFUND))
    spec = importlib.util.spec_from_file_location("fork_decision", REFUND / "fork_decision.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path / "f.sftrace")]) == 0
    out = capsys.readouterr().out
    assert "3. tool escalate_to_human   live" in out
    assert "tickets opened for real: ['A-1001']" in out
    assert "frozen replay of the fork: completed, compare pass" in out
    assert "tickets opened by the frozen replay: []" in out


def test_inline_override_and_the_run_failing_after_the_fork_point(bundle: Path) -> None:
    """A forked run that fails after the fork point was still forked: exit 0."""
    override = '{"text": "TP1"}'
    result = invoke(
        "fork", bundle, "-e", "fork_agents:picking_agent", "--at", "2", "--override", override
    )
    assert result.exit_code == 0, result.output
    assert "result: failed: ValueError: sold out" in result.stdout
    assert agents.EXECUTED == ["book:TP1"]


def test_without_override_the_fork_point_runs(bundle: Path) -> None:
    result = invoke("fork", bundle, "-e", "fork_agents:picking_agent", "--at", "fake-1#1")
    assert result.exit_code == 0, result.output
    assert "(llm fake/fake-1, run for real)" in result.stdout
    assert agents.EXECUTED == ["llm", "book:FR2"]


def test_json_document(bundle: Path) -> None:
    override = '{"text": "FR2"}'
    result = invoke(
        "fork",
        bundle,
        "-e",
        "fork_agents:picking_agent",
        "--at",
        "2",
        "--override",
        override,
        "--json",
    )
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    assert document["fork"] == {
        "at": "2",
        "step": 2,
        "overridden": True,
        "override": {"text": "FR2"},
        "fork_number": 2,
    }
    assert [m["action"] for m in document["matched"]] == ["substituted", "overridden", "live"]


def test_async_entrypoint(tmp_path: Path) -> None:
    import asyncio

    from fork_agents import async_entry

    path = recorded(tmp_path / "async.sftrace", lambda: asyncio.run(async_entry()))
    at, override = "fake-1#1", '{"text": "x"}'
    result = invoke(
        "fork", path, "-e", "fork_agents:async_entry", "--at", at, "--override", override
    )
    assert result.exit_code == 0, result.output
    assert 'returned "x"' in result.stdout
    assert agents.EXECUTED == []


def test_a_run_that_never_reaches_the_fork_point_exits_1(bundle: Path) -> None:
    saved = bundle.parent / "f.sftrace"
    result = invoke("fork", bundle, "-e", "fork_agents:stops_early", "--at", "3", "-o", saved)
    assert result.exit_code == 1, result.output
    assert "not forked: the run did not reach the fork point" in result.stdout
    assert f"saved the run (not forked): {saved}" in result.stdout
    assert "saved the forked run" not in result.stdout


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--at", "9"], "at='9' is out of range: the recording has 3 calls"),
        (["--at", "x#1"], "no call of 'x'"),
        (["--at", "book#"], "neither a call number"),
        (["--at", "2", "--override", "escalate"], "--override is not JSON"),
        (["--at", "2", "--override", "{'a': 1}"], "--override is not JSON"),
        (["--at", "2", "--override", "@missing.json"], "cannot read the --override file"),
        (["--at", "2", "--override", "@bad.json"], "--override file 'bad.json' is not JSON"),
        (["--at", "2", "-o", "b.sftrace"], "exists"),
        (["--at", "2", "--tiers", "relaxed"], "must include 'exact'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(
    bundle: Path, tmp_path: Path, options: list[str], message: str
) -> None:
    _write(tmp_path, "bad.json", "{not json")
    result = invoke("fork", bundle, "-e", "fork_agents:picking_agent", *options)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert agents.EXECUTED == []


def test_a_call_inside_a_substituted_tool_is_bad_input(tmp_path: Path) -> None:
    path = recorded(tmp_path / "nested.sftrace", nested_agent)
    result = invoke("fork", path, "-e", "fork_agents:nested_agent", "--at", "inner#1")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "sftrace: error: call 2 (tool inner) cannot be a fork point: it was made inside call "
        "1 (tool outer), which the fork answers from the recording without running its body "
        "(it comes before the fork point), so call 2 is never made; fork at call 1 instead"
    ]
    assert agents.EXECUTED == []


def test_missing_at_is_a_usage_error(bundle: Path) -> None:
    result = invoke("fork", bundle, "-e", "fork_agents:picking_agent")
    assert result.exit_code == 2
    assert "--at" in result.output
