"""What a replay reports and saves about the run: its output, status and failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import sample_agents as agents
from sftrace import diff, load_bundle, record, replay_run
from sftrace._cli import regress as regress_commands
from sftrace._cli import replay as replay_commands
from sftrace._cli.main import cli

replay_commands.register(cli)
regress_commands.register(cli)


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


def run_agent(task: str) -> dict[str, Any]:
    """The README's agent: its entrypoint returns the answer, the caller records it."""
    return agents.booking_agent(task)


def failing_agent(task: str) -> dict[str, Any]:
    flights = agents.search_flights(task)
    return agents.book(flights[0].id)  # TP1 is sold out: the recorded ValueError


def readme_recording(path: Path, agent: Any, task: str = "Lisbon") -> Path:
    """Record as the README shows: ``session.set_output(run_agent(task))``."""
    try:
        with record("agent", output=path, run_input=task) as session:
            session.set_output(agent(task))
    except ValueError:
        pass
    agents.EXECUTED.clear()
    return path


def test_output_is_the_return_value_when_the_replayed_run_sets_none(tmp_path: Path) -> None:
    """With set_output outside the entrypoint, output is what the entrypoint returned."""
    bundle = readme_recording(tmp_path / "r.sftrace", run_agent)
    result = replay_run(bundle, run_agent)
    assert result.status == "completed"
    assert result.return_value == {"ok": True, "flight_id": "FR2"}
    assert result.output == {"ok": True, "flight_id": "FR2"}
    assert result.output == load_bundle(bundle).output
    assert not result.has_output  # the replayed run itself never called set_output
    assert result.reproduced


def test_output_set_inside_the_entrypoint_wins_over_the_return_value(tmp_path: Path) -> None:
    """When the replayed run calls set_output, output is that value, not the return value."""

    def agent(task: str) -> str:
        with record("agent") as session:  # inert inside the replay: reports to it
            session.set_output({"answer": task})
        return "ignored"

    path = tmp_path / "s.sftrace"
    with record("agent", output=path, run_input="x"):
        pass
    result = replay_run(path, agent)
    assert (result.output, result.has_output, result.return_value) == (
        {"answer": "x"},
        True,
        "ignored",
    )


def test_output_is_none_when_the_entrypoint_returns_none(tmp_path: Path) -> None:
    """An entrypoint that returns None and sets no output has output None."""
    bundle = readme_recording(tmp_path / "n.sftrace", run_agent)
    result = replay_run(bundle, lambda task: None)
    assert result.output is None
    assert not result.reproduced  # the recording's output was a booking


def test_saved_replay_of_an_unchanged_agent_diffs_clean(tmp_path: Path) -> None:
    """replay_run(save=) keeps the run's output: diffing it against the recording passes."""
    bundle = readme_recording(tmp_path / "r.sftrace", run_agent)
    saved = tmp_path / "saved.sftrace"
    result = replay_run(bundle, run_agent, save=saved)
    assert result.saved_path == saved
    replayed = load_bundle(saved)
    assert (replayed.status, replayed.has_output) == ("completed", True)
    assert replayed.output == {"ok": True, "flight_id": "FR2"}
    report = diff(bundle, saved)
    assert report.passed, report.findings


def test_saved_replay_keeps_the_failure_of_the_replayed_run(tmp_path: Path) -> None:
    """A replay that reproduces a recorded failure saves a failed run with that failure."""
    bundle = readme_recording(tmp_path / "f.sftrace", failing_agent)
    assert load_bundle(bundle).status == "failed"
    saved = tmp_path / "saved.sftrace"
    result = replay_run(bundle, failing_agent, save=saved)
    assert result.status == "failed"
    replayed = load_bundle(saved)
    recorded = load_bundle(bundle)
    assert replayed.status == "failed"
    assert replayed.failure is not None
    assert recorded.failure is not None
    assert (replayed.failure.type, replayed.failure.message, replayed.failure.step) == (
        recorded.failure.type,
        recorded.failure.message,
        recorded.failure.step,
    )
    assert not replayed.has_output
    assert diff(bundle, saved).passed


def test_cli_replay_save_then_diff_passes_on_an_unchanged_agent(tmp_path: Path) -> None:
    """`sftrace replay --save` then `sftrace diff recorded saved` exits 0."""
    bundle = readme_recording(tmp_path / "r.sftrace", agents.booking_agent)
    runner = CliRunner()
    saved = tmp_path / "saved.sftrace"
    replayed = runner.invoke(
        cli, ["replay", str(bundle), "-e", "sample_agents:booking_agent", "--save", str(saved)]
    )
    assert replayed.exit_code == 0, replayed.output
    compared = runner.invoke(cli, ["diff", str(bundle), str(saved)])
    assert compared.exit_code == 0, compared.output


@pytest.mark.parametrize("use_async", [False, True], ids=["replay_run", "areplay_run"])
def test_an_async_entrypoint_that_raises_returned_nothing(tmp_path: Path, use_async: bool) -> None:
    """return_value is None when the awaited entrypoint raised, never its coroutine."""
    import asyncio

    from sftrace import areplay_run

    async def failing(task: str) -> dict[str, Any]:
        return failing_agent(task)

    bundle = readme_recording(tmp_path / "failed.sftrace", failing_agent)
    result = asyncio.run(areplay_run(bundle, failing)) if use_async else replay_run(bundle, failing)
    assert result.reproduced_failure
    assert result.return_value is None
