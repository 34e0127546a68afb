"""sftrace.fork: replay up to a step, answer or run that step, run everything after it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import sample_agents as agents
from fork_agents import async_entry, live_nested_agent, nested_agent, picking_agent
from sample_agents import recorded
from sftrace import (
    ConfigError,
    FindingCode,
    ForkPointError,
    IncompleteReplayError,
    ReplayMismatchError,
    afork,
    compare,
    fork,
    load_bundle,
    replay_run,
)
from sftrace._replay.fork import resolve_at


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return recorded(tmp_path / "b.sftrace", picking_agent)


def test_override_answers_the_fork_point_and_the_agent_takes_the_other_branch(
    bundle: Path,
) -> None:
    result = fork(bundle, picking_agent, at=2, override={"text": "TP1"})
    # search answered from the recording, the LLM answered with the override, and the
    # booking the other branch makes runs for real (TP1 is sold out).
    assert [(m.action, m.recorded.seq) for m in result.matched] == [
        ("substituted", 1),
        ("overridden", 2),
        ("live", 0),
    ]
    assert agents.EXECUTED == ["book:TP1"]
    assert result.status == "failed"
    assert isinstance(result.error, ValueError)
    assert result.fork_number == 2
    assert [call.seq for call in result.unused] == [3]  # the recorded booking of FR2
    assert result.divergence is None


def test_without_override_the_fork_point_runs_for_real(bundle: Path) -> None:
    result = fork(bundle, picking_agent, at=2)
    assert [(m.action, m.recorded.seq) for m in result.matched] == [
        ("substituted", 1),
        ("executed", 2),
        ("live", 0),
    ]
    assert agents.EXECUTED == ["llm", "book:FR2"]
    assert result.status == "completed"
    assert result.output == {"ok": True, "flight_id": "FR2"}


def test_fork_at_the_first_call_runs_everything(bundle: Path) -> None:
    result = fork(bundle, picking_agent, at=1)
    assert [m.action for m in result.matched] == ["executed", "live", "live"]
    assert agents.EXECUTED == ["search:Lisbon", "llm", "book:FR2"]


def test_none_is_an_override(bundle: Path) -> None:
    """``override=None`` answers with JSON null; leaving it out runs the call."""

    def agent() -> Any:
        return agents.ask("pick")

    path = recorded(bundle.parent / "one.sftrace", agent)
    result = fork(path, agent, at=1, override=None)
    assert result.return_value is None
    assert agents.EXECUTED == []


@pytest.mark.parametrize(
    ("at", "index"),
    [(1, 0), ("2", 1), (" 3 ", 2), ("flight_search#1", 0), ("fake-1#1", 1), ("fake/fake-1#1", 1)],
)
def test_at_names_a_call_by_number_or_name_and_count(bundle: Path, at: Any, index: int) -> None:
    assert resolve_at(load_bundle(bundle).calls, at) == index


def test_name_k_counts_calls_of_that_name(tmp_path: Path) -> None:
    def agent() -> Any:
        agents.book("FR2")
        agents.ask("one")
        return agents.book("FR2")

    path = recorded(tmp_path / "two.sftrace", agent)
    assert resolve_at(load_bundle(path).calls, "book#2") == 2
    result = fork(path, agent, at="book#2", override={"ok": False})
    assert result.return_value == {"ok": False}
    assert agents.EXECUTED == []


@pytest.mark.parametrize(
    ("at", "message"),
    [
        (0, "at=0 is out of range: the recording has 3 calls, numbered 1 to 3"),
        (4, "at=4 is out of range"),
        ("7", "at='7' is out of range"),
        (-1, "at=-1 is out of range"),
        ("-1", "neither a call number"),
        ("book", "neither a call number"),
        ("#1", "neither a call number"),
        ("book#0", "neither a call number"),
        ("book#x", "neither a call number"),
        ("refund#1", "no call of 'refund'; its tools and models are 'book', 'fake-1'"),
        ("book#2", "has only 1 call of 'book'"),
        (True, "at must be a call number"),
        (2.0, "at must be a call number"),
    ],
)
def test_bad_at_is_a_fork_point_error_before_anything_runs(
    bundle: Path, at: Any, message: str
) -> None:
    with pytest.raises(ForkPointError, match=message):
        fork(bundle, picking_agent, at=at)
    assert agents.EXECUTED == []


def test_a_recording_without_calls_has_nothing_to_fork(tmp_path: Path) -> None:
    path = recorded(tmp_path / "empty.sftrace", lambda: 1)
    with pytest.raises(ForkPointError, match="no calls: there is nothing to fork at"):
        fork(path, lambda: 1, at=1)


def test_an_override_that_is_not_json_is_a_config_error(bundle: Path) -> None:
    with pytest.raises(ConfigError, match=r"override must be a JSON value.*got object"):
        fork(bundle, picking_agent, at=2, override=object())
    assert agents.EXECUTED == []


def test_a_fork_has_no_on_miss(bundle: Path) -> None:
    """(match="unordered" is tests/test_fork_unordered.py)"""
    options: dict[str, Any] = {"on_miss": "live"}
    with pytest.raises(TypeError):
        fork(bundle, picking_agent, at=2, **options)


def test_a_call_inside_a_substituted_tool_is_no_fork_point(tmp_path: Path) -> None:
    path = recorded(tmp_path / "nested.sftrace", nested_agent)
    assert [call.name for call in load_bundle(path).calls] == ["outer", "inner", "book"]
    with pytest.raises(ForkPointError) as caught:
        fork(path, nested_agent, at="inner#1")
    assert caught.value.step == 2
    assert "call 2 (tool inner) cannot be a fork point: it was made inside call 1" in str(
        caught.value
    )
    assert "fork at call 1 instead" in str(caught.value)
    assert agents.EXECUTED == []


def test_a_call_inside_a_tool_whose_body_runs_is_a_fork_point(tmp_path: Path) -> None:
    path = recorded(tmp_path / "live_nested.sftrace", live_nested_agent)
    result = fork(path, live_nested_agent, at=2, override=10)
    assert result.return_value == 12
    assert agents.EXECUTED == ["live_outer:3", "book:FR2"]
    assert [m.action for m in result.matched] == ["executed", "overridden", "live"]


def test_overriding_a_tool_leaves_the_calls_inside_it_unmade(tmp_path: Path) -> None:
    path = recorded(tmp_path / "nested.sftrace", nested_agent)
    result = fork(path, nested_agent, at=1, override=100)
    assert result.return_value == 101
    assert agents.EXECUTED == ["book:FR2"]  # after the fork point: runs for real
    assert [call.name for call in result.covered] == ["inner"]
    assert [call.name for call in result.unused] == ["book"]


def test_forking_a_tool_without_override_runs_its_body_and_the_calls_inside(
    tmp_path: Path,
) -> None:
    path = recorded(tmp_path / "nested.sftrace", nested_agent)
    result = fork(path, nested_agent, at=1)
    assert agents.EXECUTED == ["outer:3", "inner:3", "book:FR2"]
    assert [m.action for m in result.matched] == ["executed", "live", "live"]


def test_a_different_call_at_the_fork_point_diverges(bundle: Path) -> None:
    def skips_the_llm() -> Any:
        agents.search_flights("Lisbon")
        return agents.book("FR2")

    result = fork(bundle, skips_the_llm, at=2, override={"text": "TP1"})
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert "reached tool book, but the recording has llm fake/fake-1" in str(result.divergence)
    assert result.fork_number is None
    assert agents.EXECUTED == []


def test_a_run_that_ends_before_the_fork_point_diverged(bundle: Path) -> None:
    def stops_early() -> Any:
        return agents.search_flights("Lisbon")

    result = fork(bundle, stops_early, at=3)
    assert result.status == "diverged"
    assert isinstance(result.divergence, IncompleteReplayError)
    assert "ended before reaching its fork point, call 3 (tool book" in str(result.divergence)


def test_saved_fork_says_where_it_came_from_and_replays_frozen(
    bundle: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "forked.sftrace"
    result = fork(bundle, picking_agent, at="fake-1#1", override={"text": "TP1"}, save=saved)
    assert result.saved_path == saved
    original = load_bundle(bundle)
    forked = load_bundle(saved)
    assert forked.manifest.derived_from == {
        "run_id": original.run_id,
        "how": "fork",
        "step": 2,
        "overridden": True,
    }
    assert forked.status == "failed"
    assert [(call.name, call.output) for call in forked.calls[:2]] == [
        ("flight_search", [{"id": "TP1", "price": 120}, {"id": "FR2", "price": 90}]),
        ("fake-1", {"text": "TP1"}),
    ]
    run_span = next(span for span in result.spans if span.parent is None)
    assert [
        (format(link.context.span_id, "016x"), format(link.context.trace_id, "032x"))
        for link in run_span.links
    ] == [(original.manifest.root_span_id, original.manifest.trace_id)]
    # The forked bundle is an ordinary recording: a frozen replay runs nothing.
    agents.EXECUTED.clear()
    frozen = replay_run(saved, picking_agent)
    assert agents.EXECUTED == []
    assert frozen.unused == []
    assert frozen.reproduced_failure
    assert compare(saved, frozen).verdict == "pass"


def test_saved_fork_without_override(bundle: Path, tmp_path: Path) -> None:
    saved = tmp_path / "forked.sftrace"
    fork(bundle, picking_agent, at=2, save=saved)
    derived = load_bundle(saved).manifest.derived_from
    assert derived is not None
    assert (derived["how"], derived["step"], derived["overridden"]) == ("fork", 2, False)


def test_compare_reports_the_calls_after_the_fork_point_as_live(bundle: Path) -> None:
    result = fork(bundle, picking_agent, at=2, override={"text": "TP1"})
    codes = [finding.code for finding in compare(bundle, result).findings]
    assert FindingCode.CALL_ADDED_LIVE in codes


def testasync_entrypoint_with_sync_fork(tmp_path: Path) -> None:
    path = tmp_path / "async.sftrace"
    recorded(path, lambda: asyncio.run(async_entry()))
    result = fork(path, async_entry, at="fake-1#1", override={"text": "forked"})
    assert result.status == "completed", result.divergence
    assert result.return_value == "forked"
    assert agents.EXECUTED == []  # the gathers were answered; their fetches covered
    assert len(result.covered) == 4


def test_afork_awaits_in_the_running_loop(tmp_path: Path) -> None:
    path = tmp_path / "async.sftrace"
    recorded(path, lambda: asyncio.run(async_entry()))
    result = asyncio.run(afork(path, async_entry, at=1))
    assert result.status == "completed", result.divergence
    # Forked at the first gather: everything runs for real from there.
    assert sorted(agents.EXECUTED) == sorted(
        ["fetch:x-a", "fetch:x-b", "fetch:y-a", "fetch:y-b", "allm"]
    )
    assert result.return_value == "about fork"
    assert result.matched[0].action == "executed"


def test_the_replay_page_marks_the_fork_point_overridden(bundle: Path) -> None:
    from sftrace import render_html

    result = fork(bundle, picking_agent, at=2, override={"text": "FR2"})
    page = render_html(result)
    assert '"act":"overridden"' in page
    assert ".b-overridden" in page


def test_an_override_is_redacted_in_the_saved_fork_but_reaches_the_agent_as_given(
    tmp_path: Path,
) -> None:
    """The override was never recorded, so it is redacted like a result produced now."""
    from secret_corpus import OPENAI

    def agent() -> Any:
        return agents.ask("which key?")["text"]

    path = recorded(tmp_path / "one.sftrace", agent)
    saved = tmp_path / "forked.sftrace"
    result = fork(path, agent, at=1, override={"text": f"use {OPENAI.text}"}, save=saved)
    assert result.return_value == f"use {OPENAI.text}"
    stored = b"".join(p.read_bytes() for p in saved.rglob("*") if p.is_file())
    assert OPENAI.text.encode() not in stored
    assert load_bundle(saved).calls[0].attributes.get("sftrace.redactions")


@pytest.mark.parametrize(
    ("prompt", "tier", "paths"),
    [
        ("pick from ['TP1', 'FR2']  ", "normalized", ["$.prompt"]),  # whitespace only
        ("choose one", None, ["$.prompt"]),  # matches at no tier: forked all the same
    ],
)
def test_the_fork_point_may_be_reached_with_another_input(
    bundle: Path, prompt: str, tier: str | None, paths: list[str]
) -> None:
    """The fork point is a position: its input may differ; the tier and paths say how."""

    def reworded() -> Any:
        agents.search_flights("Lisbon")
        return agents.ask(prompt)["text"]

    result = fork(bundle, reworded, at=2, override={"text": "forked"})
    assert result.return_value == "forked"
    point = result.matched[1]
    assert (point.action, point.tier) == ("overridden", tier)
    assert [path for path, _, _ in point.differences] == paths
