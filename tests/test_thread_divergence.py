"""A strict replay diverging in a worker thread: the report leads with the one divergence,
and what stopping there caused (the run's failure, its missing output, the calls not
reached) is folded into it, also when the run ended on a later mismatch that another
thread reached after the divergence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import sftrace
import thread_order_agent as agent
from sftrace._cli import replay as replay_cli
from sftrace._cli.main import cli
from sftrace._record import boundary

replay_cli.register(cli)


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "threads.sftrace"
    agent.ORDER = ("a", "b", "c")
    # Recorded without sftrace.handed_off (as before it existed): the pool's calls, run
    # one after another, then look sequential, and a strict replay keeps their order.
    with monkeypatch.context() as patched:
        patched.setattr(boundary, "handed_off", lambda context: False)
        with sftrace.record("threads", output=path, run_input="t") as session:
            session.set_output(agent.run("t"))
    # The replay reaches c (call 1, recorded a: the divergence), then b (call 2, compared
    # with a again: a follow-on mismatch), then a; the entrypoint, waiting on a then b,
    # raises b's follow-on mismatch.
    agent.ORDER = ("c", "b", "a")
    yield path
    agent.ORDER = ("a", "b", "c")


def test_the_run_ends_on_a_follow_on_mismatch_not_the_divergence(bundle: Path) -> None:
    """The set-up this file is about: the entrypoint raises the second mismatch."""
    result = sftrace.replay_run(bundle, agent.run)
    assert isinstance(result.divergence, sftrace.ReplayMismatchError)
    assert result.divergence.call_number == 1
    assert isinstance(result.error, sftrace.ReplayMismatchError)
    assert result.error is not result.divergence
    assert result.error.call_number == 2


def test_the_report_leads_with_the_one_divergence(bundle: Path) -> None:
    result, report = sftrace.replay_and_compare(bundle, agent.run)
    assert result.status == "diverged"
    assert [finding.code.value for finding in report.findings] == ["REPLAY_DIVERGED"]
    text = report.format()
    assert "replay diverged at call 1" in text
    assert "call 2" not in text  # the follow-on mismatch is not a second story
    assert "the replay stopped there, so 1 recorded call from there on was not reached" in text
    # fetch(a), reached third and answered by recorded call 1, is not a CALL_ORDER_CHANGED
    assert "1 call reached after it (concurrently, in other threads or tasks) differs" in text
    assert "--match unordered" in text


def test_the_cli_names_the_divergence_once(bundle: Path) -> None:
    outcome = CliRunner().invoke(
        cli, ["replay", str(bundle), "--entrypoint", "thread_order_agent:run"]
    )
    assert outcome.exit_code == 1, outcome.output
    assert "result: diverged: the replay raised sftrace.ReplayMismatchError at call 1" in (
        outcome.output
    )
    assert "replay diverged at call 2" not in outcome.output


def test_unordered_replay_of_the_other_order_passes(bundle: Path) -> None:
    result, report = sftrace.replay_and_compare(bundle, agent.run, match="unordered")
    assert result.status == "completed", result.divergence
    assert report.verdict == "pass", report.format()
