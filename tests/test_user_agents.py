"""A user's agent, written without sftrace in mind (tests/user_travel_agent.py), through the
documented workflow: record, replay (unordered: its tool calls run concurrently in a shared
pool), diff of the saved replay, and the divergence reports of three one-line changes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import sftrace
import user_travel_agent as agent

TASK = "Plan a trip"


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "travel.sftrace"

    async def record() -> None:
        async with sftrace.record("travel", output=path, run_input=TASK) as session:
            session.set_output(await agent.run(TASK))

    agent.CHANGE = ""
    asyncio.run(record())
    agent.BODIES.clear()
    yield path
    agent.CHANGE = ""


def test_the_recording_holds_the_run_and_no_secret(bundle: Path) -> None:
    """Every call is recorded (nested tools, SDK errors, the tool's own exception) and the
    API key, sent in a header and passed in an llm_request input, is in no file."""
    recorded = sftrace.load_bundle(bundle)
    assert recorded.status == "completed"
    names = sorted(call.name for call in recorded.calls)
    expected = ["hotel_search"] * 3 + ["price_of"] * 4 + ["gpt-4o"] * 3 + ["gpt-4o-mini"]
    assert names == sorted(expected)
    errors = sorted(call.error.type for call in recorded.calls if call.error is not None)
    assert errors == [
        "openai.InternalServerError",
        "openai.RateLimitError",
        "user_travel_agent.InventoryUnavailable",
    ]
    for file in bundle.iterdir():
        assert agent.API_KEY not in file.read_text(), file.name


def test_the_unchanged_agent_replays_as_recorded_every_time(bundle: Path, tmp_path: Path) -> None:
    """Unordered replays of the unchanged agent pass, run no tool body, and the diff of a
    saved replay against the recording finds nothing (nested calls covered, order free)."""
    for attempt in range(3):
        saved = tmp_path / f"replayed-{attempt}.sftrace"
        result, report = sftrace.replay_and_compare(
            bundle, agent.run, match="unordered", save=saved
        )
        assert result.status == "completed", result.divergence
        assert report.findings == (), report.format()
        assert sftrace.diff(bundle, saved).findings == ()
        assert [call.name for call in result.covered] == ["price_of"] * 4
    assert agent.BODIES == []


def test_a_changed_nested_argument_names_the_call_and_the_path(bundle: Path) -> None:
    agent.CHANGE = "deep"
    result = sftrace.replay_run(bundle, agent.run, match="unordered")
    assert result.status == "diverged"
    assert isinstance(result.divergence, sftrace.ReplayMismatchError)
    assert [tuple(d) for d in result.divergence.differences] == [
        ("$.query.filters.price[1].min", 50, 51)
    ]
    assert "$.query.filters.price[1].min: recorded 50, reached 51" in str(result.divergence)


def test_a_changed_character_in_a_50kb_prompt_shows_where(bundle: Path) -> None:
    agent.CHANGE = "prompt"
    result = sftrace.replay_run(bundle, agent.run, match="unordered")
    assert result.status == "diverged"
    message = str(result.divergence)
    assert "$.messages[0].content" in message
    assert "first difference at character 25001" in message
    assert len(message) < 2000  # a window around the difference, not 2 x 50 KB


def test_another_order_of_the_concurrent_calls_is_accepted_unordered(bundle: Path) -> None:
    agent.CHANGE = "order"
    result, report = sftrace.replay_and_compare(bundle, agent.run, match="unordered")
    assert result.status == "completed"
    assert report.verdict == "pass", report.format()
