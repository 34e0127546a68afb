"""End to end on an agent that calls its tools through a shared thread pool and returns
pydantic models with sets: runs keep their own calls, and hash seeds change nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import scenario_notify_agent as agent

import sftrace

HERE = Path(__file__).parent


def _record(path: Path, user: str) -> None:
    with sftrace.record(
        "notify-agent", output=path, run_input={"user": user, "topic": "outage"}
    ) as session:
        session.set_output(agent.notify({"user": user, "topic": "outage"}))


def test_concurrent_runs_sharing_one_pool_keep_their_own_calls(tmp_path: Path) -> None:
    """Two requests in two threads, one module-level pool: each bundle holds exactly its
    own user's calls."""
    barrier = threading.Barrier(2)

    def run(user: str) -> None:
        barrier.wait()
        _record(tmp_path / f"{user}.sftrace", user)

    threads = [threading.Thread(target=run, args=(user,)) for user in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for user in ("alice", "bob"):
        calls = sftrace.load_bundle(tmp_path / f"{user}.sftrace").calls
        users = {call.input["user"] for call in calls}
        assert users == {user}, f"{user}'s bundle holds calls of {users}"
        assert len(calls) == 5  # load_preferences + 4 channels


def test_eight_concurrent_runs_each_hold_their_own_calls(tmp_path: Path) -> None:
    users = [f"user{n}" for n in range(8)]
    threads = [
        threading.Thread(target=_record, args=(tmp_path / f"{user}.sftrace", user))
        for user in users
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for user in users:
        calls = sftrace.load_bundle(tmp_path / f"{user}.sftrace").calls
        assert {call.input["user"] for call in calls} == {user}
        assert len(calls) == 5


def test_frozen_replay_answers_pool_calls_and_runs_no_body(tmp_path: Path) -> None:
    path = tmp_path / "alice.sftrace"
    _record(path, "alice")
    agent.BODIES.clear()
    result = sftrace.replay_run(path, agent.notify, match="unordered")
    assert result.status == "completed", result.divergence
    assert agent.BODIES == []
    assert result.output == sftrace.load_bundle(path).output
    report = sftrace.compare(path, result)
    assert [f.code for f in report.findings if f.severity != "info"] == []


_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import sftrace, scenario_notify_agent as agent
mode, path = sys.argv[1], sys.argv[2]
request = {{"user": "alice", "topic": "outage"}}
if mode == "record":
    with sftrace.record("notify-agent", output=path, run_input=request) as s:
        s.set_output(agent.notify(request))
else:
    result = sftrace.replay_run(path, agent.notify, match="unordered")
    assert agent.BODIES == [], agent.BODIES
    print(result.status, result.divergence)
"""


@pytest.mark.slow
def test_sets_in_pydantic_models_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Recorded with one hash seed, replayed with another: completes, and ``diff`` of two
    recordings made with different seeds finds nothing."""
    script = _SCRIPT.format(here=str(HERE))

    def python(seed: int, *args: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "SFTRACE_STRICT": "1"}
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    python(1, "record", str(tmp_path / "one.sftrace"))
    python(2, "record", str(tmp_path / "two.sftrace"))
    assert python(2, "replay", str(tmp_path / "one.sftrace")) == "completed None"
    report = sftrace.diff(tmp_path / "one.sftrace", tmp_path / "two.sftrace")
    assert [f.code for f in report.findings if f.severity != "info"] == []
