"""fork/afork(match="unordered") and `sftrace fork --match unordered`: a concurrent agent
whose calls reach the replay in another order than recorded can be forked (strict forks
diverge on the order)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import sftrace
import thread_order_agent as agent
from sftrace._cli import fork as fork_cli
from sftrace._cli.main import cli

fork_cli.register(cli)


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "threads.sftrace"
    agent.ORDER = ("a", "b", "c")  # recorded: fetch a, fetch b, fetch c, then the LLM call
    with sftrace.record("threads", output=path, run_input="t") as session:
        session.set_output(agent.run("t"))
    agent.ORDER = ("c", "b", "a")  # the fork reaches fetch c first
    yield path
    agent.ORDER = ("a", "b", "c")


def test_a_strict_fork_diverges_on_the_order(bundle: Path) -> None:
    result = sftrace.fork(bundle, agent.run, at=2, override="X")
    assert result.status == "diverged"
    assert result.fork_number is None


def test_an_unordered_fork_answers_earlier_calls_in_any_order(bundle: Path) -> None:
    result = sftrace.fork(bundle, agent.run, at=2, override="X", match="unordered")
    assert result.divergence is None, result.divergence
    assert result.status == "completed"
    actions = [(m.recorded.name, m.recorded.input, m.action) for m in result.matched]
    assert actions == [
        ("fetch", {"key": "c"}, "substituted"),  # recorded after the fork point, reached first
        ("fetch", {"key": "b"}, "overridden"),  # the fork point
        ("fetch", {"key": "a"}, "live"),
        ("m", {"task": "t", "values": ["A", "X", "C"]}, "live"),
    ]
    assert result.fork_number == 2
    assert result.return_value == {"values": ["A", "X", "C"], "summary": "ok"}
    assert [(call.name, call.input) for call in result.unused] == [
        ("fetch", {"key": "a"}),
        ("m", {"task": "t", "values": ["A", "B", "C"]}),
    ]


def test_an_unordered_fork_that_never_reaches_its_point_lists_it_unused(bundle: Path) -> None:
    agent.ORDER = ("a", "b", "c")
    result = sftrace.fork(bundle, agent.run, at=4, match="unordered")  # the LLM call
    assert result.fork_number == 4
    result = sftrace.fork(bundle, lambda task: agent.fetch("a"), at=2, match="unordered")
    assert result.status == "diverged"
    assert isinstance(result.divergence, sftrace.IncompleteReplayError)
    assert {"key": "b"} in [call.input for call in result.unused]


def test_afork_takes_match(bundle: Path) -> None:
    async def entry(task: str) -> object:
        return await asyncio.to_thread(agent.run, task)

    result = asyncio.run(sftrace.afork(bundle, entry, at=2, override="X", match="unordered"))
    assert result.fork_number == 2
    assert result.divergence is None


def test_a_saved_unordered_fork_says_its_order_is_free(bundle: Path, tmp_path: Path) -> None:
    saved = tmp_path / "forked.sftrace"
    sftrace.fork(bundle, agent.run, at=2, match="unordered", save=saved)
    derived = sftrace.load_bundle(saved).manifest.derived_from
    assert derived is not None
    assert (derived["how"], derived["match"]) == ("fork", "unordered")


def test_a_bad_match_is_a_config_error(bundle: Path) -> None:
    with pytest.raises(sftrace.ConfigError, match="match"):
        sftrace.fork(bundle, agent.run, at=2, match="sideways")


def test_the_cli_forks_a_concurrent_agent_with_match_unordered(bundle: Path) -> None:
    args = ["fork", str(bundle), "-e", "thread_order_agent:run", "--at", "2"]
    runner = CliRunner()
    assert runner.invoke(cli, args).exit_code == 1  # strict: diverged on the order
    outcome = runner.invoke(cli, [*args, "--override", '"X"', "--match", "unordered", "--json"])
    assert outcome.exit_code == 0, outcome.output
    document = orjson.loads(outcome.output)
    assert document["match"] == "unordered"
    assert document["fork"]["fork_number"] == 2
