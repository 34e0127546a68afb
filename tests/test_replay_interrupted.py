"""Replaying a run whose process died (status ``interrupted``, from ``sftrace recover``).

The recording ends where the process died, so an unchanged agent goes past its end: the
replay stops it there (``RecordingEndedError``), and that is the recording reproduced,
not a divergence. A changed agent still diverges before that point. The crash is a copy
of the live run's journal directory taken mid-run (what a SIGKILL would leave).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import sftrace
from crash_helpers import snapshot
from sftrace import (
    RecordingEndedError,
    ReplayExhaustedError,
    ReplayMismatchError,
    compare,
    load_bundle,
    record,
    recover_bundle,
    replay_run,
    trace_tool,
)
from sftrace._cli.main import cli
from sftrace._cli.replay import register
from sftrace._model import attributes as A
from sftrace.testing import assert_same_as_recorded

register(cli)

# The agent's knobs: where the recording is "killed", and what a changed agent does.
crash: dict[str, Any] = {}


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "weather": "sunny"}


@trace_tool
def plan(city: str) -> list[Any]:
    return [lookup(city), lookup(city + " airport")]


@trace_tool
def book(city: str) -> str:
    lookup(city)  # finishes: reaches the journal; book itself never does
    if "session" in crash:
        crash["partial"] = snapshot(crash["session"], crash["into"])
    return f"booked {city}"


def steps(goal: str) -> str:
    """Three lookups, a snapshot (the kill) after the third, then more calls."""
    for number, city in enumerate(crash.get("cities", [goal, "Porto", "Faro", "Braga"])):
        lookup(city)
        if number == 2 and "session" in crash:
            crash["partial"] = snapshot(crash["session"], crash["into"])
    return "done"


def trip(goal: str) -> str:
    """A plan, then a booking the process dies inside, then a last lookup."""
    plan(goal)
    book(crash.get("book", "Porto"))
    lookup("Sagres")
    return "done"


def killed(tmp_path: Path, agent: Any) -> Path:
    """Record ``agent``, "kill" it where it snapshots, and recover the bundle."""
    crash.clear()
    with record("trip", output=tmp_path / "live" / "trip.sftrace", run_input="Lisbon") as s:
        crash.update(session=s, into=tmp_path / "crash")
        s.set_output(agent("Lisbon"))
    partial = crash["partial"]
    crash.clear()
    return recover_bundle(partial)


@pytest.fixture(autouse=True)
def _reset() -> Any:
    yield
    crash.clear()


def test_unchanged_agent_reproduces_up_to_where_the_recording_ends(tmp_path: Path) -> None:
    """Every recorded call matches; the fourth is past the recording: the replay stops
    the agent there, with status ``interrupted``, no divergence, reproduced."""
    bundle = killed(tmp_path, steps)
    assert [c.input["city"] for c in load_bundle(bundle).calls] == ["Lisbon", "Porto", "Faro"]
    result = replay_run(bundle, steps)
    assert result.divergence is None
    assert result.status == "interrupted"
    assert result.reproduced
    assert result.unused == []
    assert isinstance(result.recording_end, RecordingEndedError)
    assert isinstance(result.recording_end, ReplayExhaustedError)  # caught as before
    assert result.recording_end.call_number == 4
    assert result.recording_end.reached["input"] == {"city": "Braga"}
    assert "interrupted after its 3 recorded calls" in str(result.recording_end)
    assert isinstance(result.error, RecordingEndedError)
    report = assert_same_as_recorded(result)
    assert report.passed


def test_cli_replay_of_an_interrupted_run_exits_0(tmp_path: Path) -> None:
    bundle = killed(tmp_path, steps)
    output = CliRunner().invoke(cli, ["replay", str(bundle), "-e", "test_replay_interrupted:steps"])
    assert output.exit_code == 0, output.output
    assert "end of the recording:" in output.output
    assert "result: interrupted: stopped at call 4, past the recording" in output.output
    assert (
        "reproduced: the replay matched the recording up to where the recorded run was "
        "interrupted" in " ".join(output.output.split())
    )
    document = CliRunner().invoke(
        cli, ["replay", str(bundle), "-e", "test_replay_interrupted:steps", "--json"]
    )
    parsed = orjson.loads(document.output)
    assert parsed["verdict"] == "reproduced"
    assert parsed["replay"]["status"] == "interrupted"
    assert parsed["divergence"] is None
    assert parsed["recording_end"]["type"] == "RecordingEndedError"
    assert parsed["recording_end"]["call_number"] == 4


def test_changed_input_before_the_end_still_diverges(tmp_path: Path) -> None:
    bundle = killed(tmp_path, steps)
    crash["cities"] = ["Lisbon", "Porto", "Evora", "Braga"]
    result = replay_run(bundle, steps)
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert result.divergence.call_number == 3
    assert result.recording_end is None
    assert not result.reproduced
    assert not compare(result.bundle, result).passed


def test_agent_that_stops_early_leaves_recorded_calls_unused(tmp_path: Path) -> None:
    bundle = killed(tmp_path, steps)
    crash["cities"] = ["Lisbon", "Porto"]
    result = replay_run(bundle, steps)
    assert result.status == "completed"
    assert [c.input["city"] for c in result.unused] == ["Faro"]
    assert not result.reproduced
    assert not compare(result.bundle, result).passed


def test_unordered_replay_stops_at_the_end_too(tmp_path: Path) -> None:
    bundle = killed(tmp_path, steps)
    result = replay_run(bundle, steps, match="unordered")
    assert result.status == "interrupted"
    assert result.reproduced


def test_live_fallback_runs_past_the_end_for_real(tmp_path: Path) -> None:
    """With ``on_miss="live"`` the calls past the recording that may run live do, as any
    miss does."""
    bundle = killed(tmp_path, steps)
    result = replay_run(bundle, steps, on_miss="live", allow_live_tools=["lookup"])
    assert result.status == "completed"
    assert result.recording_end is None
    assert [m.action for m in result.matched][-1] == "live"


def test_recovery_lists_calls_inside_the_span_the_process_died_in(tmp_path: Path) -> None:
    bundle = load_bundle(killed(tmp_path, trip))
    assert [(c.seq, c.name) for c in bundle.calls] == [
        (1, "plan"),
        (2, "lookup"),
        (3, "lookup"),
        (5, "lookup"),
    ]
    attributes = {a["key"]: a["value"] for a in bundle.run_span["attributes"]}
    assert orjson.loads(attributes[A.INSIDE_UNFINISHED]["stringValue"]) == [5]
    assert sftrace.validate_bundle(bundle.path, verify_integrity=True) == []
    # no private bookkeeping reaches the file
    spans = (bundle.path / "spans.jsonl").read_bytes()
    assert b"original_parent" not in spans


def test_the_call_the_process_died_in_ends_the_replay(tmp_path: Path) -> None:
    """``book`` never finished, so it is not recorded, but its inner lookup is: reaching
    ``book`` where only that lookup is left is the end of the recording, and the lookup
    is covered by it (never reached, not missing)."""
    bundle = killed(tmp_path, trip)
    result = replay_run(bundle, trip)
    assert result.divergence is None, result.divergence
    assert result.status == "interrupted"
    assert result.reproduced
    assert result.unused == []
    assert [c.seq for c in result.covered] == [2, 3, 5]
    assert result.recording_end is not None
    assert result.recording_end.call_number == 2
    assert result.recording_end.reached["name"] == "book"
    assert "recorded call 5 ran inside a call that never finished" in str(result.recording_end)
    assert assert_same_as_recorded(result).passed


def test_a_call_left_that_did_not_run_inside_the_dead_span_still_diverges(
    tmp_path: Path,
) -> None:
    """Only the calls made inside the span the process died in may be left over: an
    agent that skips ``plan`` diverges as before."""
    bundle = killed(tmp_path, trip)

    def skips_plan(goal: str) -> str:
        book("Porto")
        return "done"

    result = replay_run(bundle, skips_plan)
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert result.recording_end is None


def test_a_completed_recording_still_diverges_when_exhausted(tmp_path: Path) -> None:
    with record("trip", output=tmp_path / "done.sftrace", run_input="Lisbon") as session:
        crash["cities"] = ["Lisbon"]
        session.set_output(steps("Lisbon"))
    crash.clear()
    result = replay_run(tmp_path / "done.sftrace", steps)
    assert result.status == "diverged"
    assert type(result.divergence) is ReplayExhaustedError
    assert result.recording_end is None


SLOW_STARTED = threading.Event()
RELEASE_SLOW = threading.Event()


@trace_tool
def slow_fetch(doc: str) -> str:
    SLOW_STARTED.set()
    RELEASE_SLOW.wait(10)
    return doc.upper()


def pool_agent(goal: str) -> list[str]:
    """Two calls at once in a pool; the process "dies" while the slow one still runs."""
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(slow_fetch, "report")
        if "session" in crash:  # recording: the slow call is running when the process dies
            SLOW_STARTED.wait(10)
        elif crash.get("slow_first"):  # replay: the pool reaches the slow call first
            wait([slow], timeout=10)
        quick = pool.submit(lookup, goal)
        found = quick.result()
        if "session" in crash:
            crash["partial"] = snapshot(crash["session"], crash["into"])
        RELEASE_SLOW.set()
        return [slow.result(), found["city"]]


@pytest.mark.parametrize("slow_first", [True, False])
@pytest.mark.parametrize("match", ["strict", "unordered"])
def test_a_call_still_running_among_concurrent_ones_is_where_its_thread_stops(
    tmp_path: Path, match: str, slow_first: bool
) -> None:
    """The slow call was running when the process died: the bundle lacks it. Reached in
    the replay before the concurrent call, it matches none of the recorded calls left,
    so it is taken to be that lost call and its thread is stopped; the concurrent call
    is answered. Reached after it, it is past the recording's end. Whichever the pool
    reaches first (``slow_first=False``: as the scheduler likes), the unchanged agent
    reproduces."""
    SLOW_STARTED.clear()
    RELEASE_SLOW.clear()
    bundle = killed(tmp_path, pool_agent)
    assert [c.name for c in load_bundle(bundle).calls] == ["lookup"]
    crash["slow_first"] = slow_first
    for _ in range(3):
        SLOW_STARTED.clear()
        RELEASE_SLOW.clear()
        result = replay_run(bundle, pool_agent, match=match)
        assert result.divergence is None, result.divergence
        assert (result.status, result.reproduced, result.unused) == ("interrupted", True, [])
        assert result.recording_end is not None
        end = str(result.recording_end)
        if slow_first:
            assert "taken to be one still running then" in end
        else:
            assert "taken to be one still running then" in end or "was never recorded" in end
