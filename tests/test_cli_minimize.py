"""``sftrace minimize``: the report, the progress line, exit codes 0/1/2."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import minimize_agents as agents
from sftrace import load_bundle, validate_bundle
from sftrace._cli.main import cli
from sftrace._cli.minimize import ProgressBar, register
from sftrace._regress.minimize import MinimizeProgress

register(cli)

ENTRYPOINT = "minimize_agents:book_cheapest"


def minimize_cli(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["minimize", *(str(arg) for arg in args)])


@pytest.fixture
def failing(tmp_path: Path) -> Path:
    return agents.record_failure(tmp_path / "failure.sftrace")


def test_minimize_writes_the_small_bundle_and_reports_what_it_did(
    failing: Path, tmp_path: Path
) -> None:
    result = minimize_cli(failing, "-e", ENTRYPOINT, "-o", tmp_path / "small.sftrace")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Minimized run {load_bundle(failing).run_id}, reproducing ")
    assert "KeyError: 'XXX', in " in lines[0]
    assert "replays (max 500)" in lines[0]
    assert lines[1].split() == ["tool", "search_flights", "33.4", "kB", "->", "32", "B"]
    assert "calls 2 -> 2, recorded call outputs 33.4 kB -> 34 B" in result.stdout
    assert f"wrote {tmp_path / 'small.sftrace'}" in result.stdout
    assert "a strict frozen replay of it reproduces the failure" in result.stdout
    # stderr is not a terminal here: one plain line at the end, no bar; then the tip
    progress, tip = result.stderr.splitlines()
    assert tip.startswith("tip: the minimized run keeps only what the buggy agent reads")
    assert progress.startswith("minimize: ")
    assert progress.endswith("/500 replays, call outputs 33.4 kB -> 34 B")
    validate_bundle(tmp_path / "small.sftrace")


def test_expectation_files_minimize_a_run_that_completed_wrongly(tmp_path: Path) -> None:
    bundle = agents.record_refunds(tmp_path / "refunds.sftrace")
    (tmp_path / "expected.json").write_text('{"refunded": []}')
    (tmp_path / "trajectory.toml").write_text('not_called = ["issue_refund"]\n')
    result = minimize_cli(
        bundle,
        "-e",
        "minimize_agents:refund_all",
        "-o",
        tmp_path / "small.sftrace",
        "--expect-output",
        tmp_path / "expected.json",
        "--expect-trajectory",
        tmp_path / "trajectory.toml",
    )
    assert result.exit_code == 0, result.output
    assert "reproducing 2 expectations not met: output, not_called:issue_refund" in result.stdout
    (lookup, _) = load_bundle(tmp_path / "small.sftrace").calls
    assert len(lookup.output) == 1


def test_keep_passing_keeps_what_the_fixed_agent_reads(tmp_path: Path) -> None:
    bundle = agents.record_refunds(tmp_path / "refunds.sftrace")
    (tmp_path / "trajectory.toml").write_text('not_called = ["issue_refund"]\n')
    result = minimize_cli(
        bundle,
        "-e",
        "minimize_agents:refund_all",
        "-o",
        tmp_path / "small.sftrace",
        "--expect-trajectory",
        tmp_path / "trajectory.toml",
        "--keep-passing",
        "minimize_agents:refund_fixed",
    )
    assert result.exit_code == 0, result.output
    assert "and the fixed agent passes on it" in result.stdout
    (lookup, _) = load_bundle(tmp_path / "small.sftrace").calls
    assert lookup.output[0]["final_sale"] is True
    refused = minimize_cli(
        bundle, "-e", "minimize_agents:refund_all", "-o", tmp_path / "other.sftrace",
        "--expect-trajectory", tmp_path / "trajectory.toml",
        "--keep-passing", "minimize_agents:refund_all",
    )  # fmt: skip
    assert refused.exit_code == 2
    assert "on the recorded run it does not pass" in refused.output


def test_max_replays_stops_early_and_says_so(failing: Path, tmp_path: Path) -> None:
    result = minimize_cli(
        failing, "-e", ENTRYPOINT, "-o", tmp_path / "s.sftrace", "--max-replays", "4"
    )
    assert result.exit_code == 0, result.output
    assert "in 4 replays (max 4)" in result.stdout
    assert "stopped after --max-replays 4" in result.stdout
    assert result.stderr.startswith("minimize: 4/4 replays")


def test_a_bundle_whose_strict_replay_does_not_reproduce_exits_1(
    failing: Path, tmp_path: Path
) -> None:
    agents.RUNS.clear()
    result = minimize_cli(
        failing, "-e", "minimize_agents:flaky", "-o", tmp_path / "s.sftrace", "--max-replays", "3"
    )
    assert result.exit_code == 1, result.output
    assert "did not reproduce the failure" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-e", "no_such_module:run"], "cannot import the entrypoint module 'no_such_module'"),
        (["-e", "minimize_agents:nothing"], "has no attribute 'nothing'"),
        (["-e", "minimize_agents:abook_cheapest", "--max-replays", "2"], "at least 3"),
        (["-e", ENTRYPOINT, "--expect-output", "missing.json"], "'missing.json' not found"),
        (["-e", "minimize_agents:prompt", "--expect-trajectory", "bad.toml"], "invalid TOML"),
        (["-e", "minimize_agents:flights"], "nothing to minimize"),
        (["-e", "minimize_agents:euros"], "does not reproduce the failure"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    failing: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "bad.toml").write_text("not_called = [")
    bundle = failing
    if "minimize_agents:flights" in args:
        bundle = agents.record_refunds(tmp_path / "ok.sftrace")
    result = minimize_cli(bundle, *args, "-o", tmp_path / "s.sftrace")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sftrace: error: ")
    assert message in line
    assert not (tmp_path / "s.sftrace").exists()


def test_an_existing_output_or_a_missing_bundle_is_exit_2(failing: Path, tmp_path: Path) -> None:
    shutil.copytree(failing, tmp_path / "taken.sftrace")
    taken = minimize_cli(failing, "-e", ENTRYPOINT, "-o", tmp_path / "taken.sftrace")
    assert taken.exit_code == 2
    assert "already exists" in taken.stderr
    missing = minimize_cli(tmp_path / "nope.sftrace", "-e", ENTRYPOINT, "-o", tmp_path / "s")
    assert missing.exit_code == 2
    assert len(missing.stderr.splitlines()) == 1


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_bar_is_redrawn_in_place() -> None:
    stream = Terminal()
    bar = ProgressBar(stream)
    bar(MinimizeProgress(1, 4, 2000, 2000))
    bar(MinimizeProgress(2, 4, 30, 2000))
    bar.finish(done=True)
    assert stream.getvalue() == (
        "\rminimize: [#######.......................] 1/4 replays, call outputs 2.0 kB -> 2.0 kB"
        "\rminimize: [###############...............] 2/4 replays, call outputs 2.0 kB -> 30 B"
        "\n"
    )


def test_a_bundle_that_lost_lines_is_refused_before_the_agent_runs(
    failing: Path, tmp_path: Path
) -> None:
    spans = failing / "spans.jsonl"
    spans.write_bytes(b"".join(spans.read_bytes().splitlines(keepends=True)[:-1]))
    agents.RUNS.clear()
    result = minimize_cli(failing, "-e", "minimize_agents:flaky", "-o", tmp_path / "s.sftrace")
    assert result.exit_code == 2
    assert "is incomplete" in result.stderr
    assert agents.RUNS == []
