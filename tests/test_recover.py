"""Crash safety: what a run that died leaves behind turns into a valid bundle.

A SIGKILL leaves exactly what the operating system had received: the journal directory
as it was at that instant. Most tests take that state by copying a live run's journal
directory (the copy is what a kill at that moment would leave); the slow test kills
real processes at random moments.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import sftrace
from crash_helpers import partials, snapshot
from sftrace import BundleError, load_bundle, record, recover_bundle, trace_tool
from sftrace._bundle.format import HEADER_FILE, JOURNAL_FILE, PARTIAL_SUFFIX
from sftrace._bundle.partial import unfinished_recordings
from sftrace._cli.bundle import register as register_bundle
from sftrace._cli.main import cli
from sftrace._cli.safety import register

register(cli)
register_bundle(cli)


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "weather": "sunny"}


@trace_tool
def plan(city: str) -> list[Any]:
    return [lookup(city), lookup(city + " airport")]


@pytest.fixture
def crashed(tmp_path: Path) -> tuple[Path, sftrace.RecordingSession]:
    """A run killed after 3 finished calls, inside a fourth one (plan -> lookup)."""
    crash_dir = tmp_path / "crash"
    holder: dict[str, Path] = {}

    @trace_tool
    def dies_inside(city: str) -> Any:
        lookup(city)  # finishes: reaches the journal; its parent never does
        holder["partial"] = snapshot(session, crash_dir)
        return None

    with record(
        "trip",
        output=tmp_path / "live" / "trip.sftrace",
        run_input={"goal": "Lisbon", "api_key": "live-key-123"},
        metadata={"team": "agents"},
    ) as session:
        plan("Lisbon")
        dies_inside("Porto")
    return holder["partial"], session


def test_killed_run_recovers_every_finished_call(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """The recovered bundle holds every call that had finished, keeps the run's own ids,
    input and redactions, and is marked interrupted with notes of what was lost."""
    partial, session = crashed
    path = recover_bundle(partial)
    assert path == partial.parent / "trip.sftrace"
    assert not partial.exists()
    bundle = load_bundle(path, verify_integrity=True)
    assert bundle.status == "interrupted"
    assert bundle.manifest.trace_id == session.trace_id
    assert bundle.manifest.run_id == session.run_id
    assert [(c.seq, c.name, c.input) for c in bundle.calls] == [
        (1, "plan", {"city": "Lisbon"}),
        (2, "lookup", {"city": "Lisbon"}),
        (3, "lookup", {"city": "Lisbon airport"}),
        (5, "lookup", {"city": "Porto"}),
    ]
    assert bundle.run_input == {"goal": "Lisbon", "api_key": "[REDACTED:sensitive_key]"}
    assert bundle.redactions == [
        {"field": "run.input", "path": "$.api_key", "rule": "sensitive_key", "seq": 0}
    ]
    assert not bundle.has_output
    notes = "\n".join(bundle.manifest.notes)
    assert "status 'interrupted'" in notes
    assert "call 5 (execute_tool lookup) was inside a span that never finished" in notes
    assert "after call 5" in notes
    run_span_id = bundle.run_span["spanId"]
    assert bundle.manifest.root_span_id == run_span_id
    assert bundle.calls[-1].parent_span_id == run_span_id  # re-attached to the run
    assert bundle.calls[1].parent_span_id == bundle.calls[0].span_id  # intact nesting
    assert sftrace.validate_bundle(path, verify_integrity=True) == []


def test_recovered_run_replays_its_finished_calls(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """A recovered bundle is a normal bundle: it replays its calls offline."""
    path = recover_bundle(crashed[0])
    with sftrace.replay(path) as session:
        plan("Lisbon")
    assert [m.action for m in session.matched] == ["substituted"]
    assert [c.seq for c in session.unused] == [5]


def test_load_bundle_allow_partial_recovers_in_memory(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """load_bundle(allow_partial=True) reads an unfinished recording without writing."""
    partial, _ = crashed
    before = sorted((p.name, p.stat().st_size) for p in partial.iterdir())
    for path in (partial, partial.parent / "trip.sftrace"):
        bundle = load_bundle(path, allow_partial=True)
        assert bundle.status == "interrupted"
        assert [c.seq for c in bundle.calls] == [1, 2, 3, 5]
    assert sorted((p.name, p.stat().st_size) for p in partial.iterdir()) == before
    assert not (partial.parent / "trip.sftrace").exists()
    with pytest.raises(BundleError, match=r"unfinished recording.*sftrace recover"):
        load_bundle(partial)


def _journal_lines(partial: Path) -> list[bytes]:
    return (partial / JOURNAL_FILE).read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize(
    ("damage", "note"),
    [
        (lambda lines: [*lines, lines[0][: len(lines[0]) // 2]], "cut off mid-write"),
        (lambda lines: [*lines, b"\0" * 4096], None),
        (lambda lines: [lines[0], b"\0" * 512 + lines[1], *lines[2:]], None),
        (lambda lines: [lines[0], b"{not json\n", *lines[1:]], "line 2 was not valid JSON"),
        (lambda lines: [*lines, lines[0]], "repeated span"),
        (lambda lines: [b'{"spanId": "zz"}\n', *lines], "line 1 was dropped: spanId"),
    ],
    ids=["torn-last-line", "zero-tail", "zero-gap", "garbage-line", "duplicate", "bad-span"],
)
def test_damaged_journal_keeps_every_intact_span(
    crashed: tuple[Path, sftrace.RecordingSession], damage: Any, note: str | None
) -> None:
    """A torn last line, zeros left by a power cut or a garbled line lose only themselves;
    the notes say what was dropped."""
    partial, _ = crashed
    (partial / JOURNAL_FILE).write_bytes(b"".join(damage(_journal_lines(partial))))
    bundle = load_bundle(recover_bundle(partial), verify_integrity=True)
    assert [c.seq for c in bundle.calls] == [1, 2, 3, 5]
    if note is not None:
        assert any(note in text for text in bundle.manifest.notes), bundle.manifest.notes


def test_journal_line_the_reader_would_refuse_is_dropped(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """A journal line the bundle reader refuses (an OTLP kind of 9) is dropped with a
    note, as recovery promises: recovery checks lines with the reader's own validator, so
    it never writes a bundle it cannot read back."""
    partial, _ = crashed
    lines = _journal_lines(partial)
    odd = orjson.loads(lines[0])
    odd.update(spanId="00000000000000aa", kind=9, attributes=[])
    (partial / JOURNAL_FILE).write_bytes(b"".join([*lines, orjson.dumps(odd) + b"\n"]))
    bundle = load_bundle(recover_bundle(partial), verify_integrity=True)
    assert [c.seq for c in bundle.calls] == [1, 2, 3, 5]
    assert "00000000000000aa" not in bundle.span_parents
    [dropped] = [n for n in bundle.manifest.notes if "00000000000000aa" in n]
    assert "kind must be an integer from 0 to 5" in dropped


def test_header_without_the_run_span_infers_it(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """A header that does not describe the run span (an older writer): the run span id is
    the parent the top-level calls name."""
    partial, session = crashed
    header = orjson.loads((partial / HEADER_FILE).read_bytes())
    expected_root = header.pop("run_span")["spanId"]
    (partial / HEADER_FILE).write_bytes(orjson.dumps(header))
    bundle = load_bundle(recover_bundle(partial))
    assert bundle.manifest.root_span_id == expected_root
    assert bundle.manifest.trace_id == session.trace_id
    assert [c.seq for c in bundle.calls] == [1, 2, 3, 5]


def test_calls_that_started_but_never_finished_are_listed(tmp_path: Path) -> None:
    """A call still running when the process died is lost, and the notes name it."""
    started, release = threading.Event(), threading.Event()

    @trace_tool
    def slow() -> str:
        started.set()
        release.wait(10)
        return "late"

    with record("concurrent", output=tmp_path / "c.sftrace") as session:
        worker = threading.Thread(target=slow)
        worker.start()
        started.wait(10)
        lookup("Faro")
        partial = snapshot(session, tmp_path / "crash")
        release.set()
        worker.join()
    bundle = load_bundle(recover_bundle(partial))
    assert [c.seq for c in bundle.calls] == [2]
    assert any("calls 1 are not in the journal" in n for n in bundle.manifest.notes)


def test_run_that_ended_but_was_never_finished_keeps_its_status(tmp_path: Path) -> None:
    """Killed while finishing the bundle (or the disk filled then): the journal holds the
    ended run span, so recovery keeps the run's real status and output."""
    with record("finished", output=tmp_path / "live" / "done.sftrace") as session:
        lookup("Braga")
        session.set_output({"ok": True})
        partial = snapshot(session, tmp_path / "crash")
    # The writer journals the run span, then writes the bundle: die in between.
    run_line = (tmp_path / "live" / "done.sftrace" / "spans.jsonl").read_bytes().split(b"\n")[0]
    with open(partial / JOURNAL_FILE, "ab") as journal:
        journal.write(run_line + b"\n")
    bundle = load_bundle(recover_bundle(partial), verify_integrity=True)
    assert bundle.status == "completed"
    assert bundle.output == {"ok": True}
    assert [c.name for c in bundle.calls] == ["lookup"]
    assert "the run ended but its bundle was never finished" in bundle.manifest.notes[0]


def test_bundle_whose_target_appeared_is_kept_under_its_own_name(tmp_path: Path) -> None:
    """When the target appeared while the run recorded (here, something that is not a
    bundle), the finished bundle is kept beside it under a name with the run id, and
    session.path names it; what appeared is not touched."""
    target = tmp_path / "done.sftrace"
    with record("finished", output=target) as session:
        lookup("Braga")
        session.set_output({"ok": True})
        target.mkdir()
        (target / "squatter.txt").write_text("not a bundle")
    assert session.path == tmp_path / f"done.{session.run_id}.sftrace"
    bundle = load_bundle(session.path, verify_integrity=True)
    assert (bundle.status, bundle.output) == ("completed", {"ok": True})
    assert [p.name for p in target.iterdir()] == ["squatter.txt"]
    assert partials(tmp_path) == []


def test_complete_bundle_left_before_its_rename_is_placed(tmp_path: Path) -> None:
    """Killed after the bundle was complete but before the rename: it is moved into place
    as it was (status and digests intact)."""
    with record("late", output=tmp_path / "a" / "late.sftrace") as session:
        lookup("Evora")
        session.set_output("fine")
    partial = tmp_path / "b" / f".late.sftrace.{session.run_id}{PARTIAL_SUFFIX}"
    shutil.copytree(tmp_path / "a" / "late.sftrace", partial)
    path = recover_bundle(partial)
    assert path == tmp_path / "b" / "late.sftrace"
    bundle = load_bundle(path, verify_integrity=True)
    assert (bundle.status, bundle.output) == ("completed", "fine")
    assert "only the final rename into place was interrupted" in bundle.manifest.notes[-1]


def test_a_recording_in_progress_is_refused(tmp_path: Path) -> None:
    """A journal a live process still holds is a recording in progress: not recovered."""
    with record("live", output=tmp_path / "live.sftrace"):
        lookup("Sintra")
        [partial] = partials(tmp_path)
        with pytest.raises(BundleError, match="still being written by a running process"):
            recover_bundle(partial)
        # Reading it is harmless: allow_partial shows the run so far.
        assert [c.name for c in load_bundle(partial, allow_partial=True).calls] == ["lookup"]
    assert load_bundle(tmp_path / "live.sftrace").status == "completed"


def test_nothing_to_recover_says_why(tmp_path: Path) -> None:
    """recover on a finished bundle or on a path with no unfinished recording explains."""
    with record("ok", output=tmp_path / "ok.sftrace"):
        lookup("Tavira")
    with pytest.raises(BundleError, match="finished bundle: there is nothing to recover"):
        recover_bundle(tmp_path / "ok.sftrace")
    with pytest.raises(BundleError, match="no unfinished recording found"):
        recover_bundle(tmp_path / "never.sftrace")


def test_several_crashed_attempts_at_one_path_must_be_chosen(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """Two unfinished recordings for the same bundle path: recovery asks which."""
    partial, _ = crashed
    shutil.copytree(partial, partial.with_name(".trip.sftrace.other-run" + PARTIAL_SUFFIX))
    with pytest.raises(BundleError, match="matches 2 unfinished recordings"):
        recover_bundle(partial.parent / "trip.sftrace")
    assert recover_bundle(partial).name == "trip.sftrace"


# --- the command line ---------------------------------------------------------------------


def test_cli_recover_prints_what_it_did(crashed: tuple[Path, sftrace.RecordingSession]) -> None:
    """`sftrace recover PATH` writes the bundle and prints its status and notes."""
    partial, _ = crashed
    result = CliRunner().invoke(cli, ["recover", str(partial.parent / "trip.sftrace")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"recovered {partial.parent / 'trip.sftrace'}: status interrupted, 4 calls"
    assert any("never finished" in line for line in lines[1:])
    # and inspect shows what was lost, not only recover
    shown = CliRunner().invoke(cli, ["inspect", str(partial.parent / "trip.sftrace")])
    assert shown.exit_code == 0, shown.output
    assert "  note: recovered from the journal of a run that never ended" in shown.output


def test_cli_recover_a_directory_recovers_every_unfinished_run(tmp_path: Path) -> None:
    """`sftrace recover DIR` recovers each unfinished recording in a directory of bundles."""
    crash = tmp_path / "crash"
    for city in ("Lagos", "Aveiro"):
        with record(city.lower(), output=tmp_path / "live" / f"{city}.sftrace") as session:
            lookup(city)
            snapshot(session, crash)
    result = CliRunner().invoke(cli, ["recover", str(crash)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in crash.iterdir()) == ["Aveiro.sftrace", "Lagos.sftrace"]


@pytest.mark.parametrize("args", [["recover", "missing.sftrace"], ["recover", "."]])
def test_cli_recover_errors_are_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    """Nothing to recover: one line on stderr, exit status 2, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "sftrace._cli.main", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("sftrace: error: ")
    assert "Traceback" not in result.stderr


# --- real kills ---------------------------------------------------------------------------

_CHILD = """
import os, random, sys
from sftrace import llm_request, record, trace_tool

out, seed, report_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
report = os.open(report_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

def finished(name, i):
    os.write(report, f"{name}:{i}\\n".encode())

@trace_tool
def inner(i: int) -> int:
    if i % 7 == 0:
        raise ValueError(f"step {i} failed")
    return i * 2

@trace_tool
def step(i: int, payload: str) -> dict:
    try:
        value = inner(i)
        finished("inner", i)
    except ValueError:
        finished("inner", i)
        value = -1
    return {"i": i, "value": value, "payload": payload}

with record("victim", output=out, run_input={"seed": seed}) as session:
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        step(i, "x" * rng.randint(0, 20000))
        finished("step", i)
        if i % 5 == 0:
            llm_request(provider="fake", model="m", input={"i": i}, call=lambda: {"text": "ok"})
            finished("llm", i)
        session.record_state_change(key="i", before=i - 1, after=i)
"""


def _run_and_kill(
    tmp_path: Path, trial: int, rng: random.Random, env: dict[str, str] | None = None
) -> tuple[Path, set[str]]:
    """Start a recording child, kill it with SIGKILL at a random moment; return the bundle
    path it recorded to and the calls it reported finished before it died."""
    work = tmp_path / f"trial-{trial}"
    work.mkdir()
    child = work / "child.py"
    child.write_text(_CHILD)
    report = work / "report.txt"
    out = work / "traces" / "victim.sftrace"
    process = subprocess.Popen(
        [sys.executable, str(child), str(out), str(trial), str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    try:
        if trial % 6 != 0:  # mostly mid-run; sometimes during start-up
            assert process.stdout.readline() == b"ready\n", "the child never started recording"
        time.sleep(rng.uniform(0.0, 0.4))  # the random moment of death
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
    text = report.read_bytes().decode() if report.exists() else ""
    return out, set(text.split("\n")[:-1])  # a last line without its newline is not complete


@pytest.mark.slow
@pytest.mark.parametrize(("fsync", "trials"), [("1", 24), ("0", 12)])
def test_sigkill_at_random_moments_never_loses_a_finished_call(
    tmp_path: Path, fsync: str, trials: int
) -> None:
    """Recording processes killed with SIGKILL at random moments: every one leaves a
    bundle that recovers and validates, holding every call reported finished; also
    without fsync (SFTRACE_FSYNC=0), which only an OS crash could tell from it."""
    rng = random.Random(6)
    kills_mid_run = 0
    for trial in range(trials):
        out, reported = _run_and_kill(tmp_path, trial, rng, {"SFTRACE_FSYNC": fsync})
        left = partials(out.parent) if out.parent.exists() else []
        if not left:
            assert not reported, f"trial {trial}: calls finished but nothing was left"
            continue
        assert len(left) == 1
        loaded = load_bundle(out, allow_partial=True)
        path = recover_bundle(out)
        bundle = load_bundle(path, verify_integrity=True)
        assert sftrace.validate_bundle(path, verify_integrity=True) == []
        assert bundle.status == "interrupted"
        assert [c.seq for c in bundle.calls] == [c.seq for c in loaded.calls]
        recorded = {f"{'llm' if c.kind == 'llm' else c.name}:{c.input['i']}" for c in bundle.calls}
        missing = reported - recorded
        assert not missing, f"trial {trial}: finished calls lost: {sorted(missing)}"
        kills_mid_run += bool(reported)
    assert kills_mid_run >= trials // 2  # most kills landed while calls were being recorded


def test_overwriting_never_leaves_the_path_without_a_bundle(tmp_path: Path) -> None:
    """While a bundle is replaced again and again (overwrite=True), a watcher looking at
    the path at every moment always finds a complete bundle there."""
    path = tmp_path / "same.sftrace"
    with record("first", output=path):
        lookup("Lisbon")
    stop = threading.Event()
    gaps: list[str] = []
    looks = 0

    def watch() -> None:
        nonlocal looks
        while not stop.is_set():
            for name in ("manifest.json", "spans.jsonl", "checksums.sha256"):
                if not (path / name).is_file():
                    gaps.append(name)
            looks += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run_ids = []
        for attempt in range(20):
            with record("again", output=path, overwrite=True) as session:
                lookup(f"city {attempt}")
            run_ids.append(session.run_id)
            assert load_bundle(path).run_id == session.run_id
    finally:
        stop.set()
        watcher.join()
    assert gaps == []
    assert looks > 20
    assert len(set(run_ids)) == 20
    assert [p.name for p in tmp_path.iterdir()] == ["same.sftrace"]  # nothing left behind


def test_a_finished_bundle_is_on_disk_before_it_takes_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file and the directory are flushed to disk (fsync) before the rename that
    gives the bundle its name, and the parent directory right after it."""
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        events.append(("rename", os.fspath(target)))
        real_rename(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    path = tmp_path / "durable.sftrace"
    with record("durable", output=path):
        lookup("Faro")
    placed = events.index(("rename", str(path)))
    before = {Path(name).name for kind, name in events[:placed] if kind == "fsync"}
    assert {"spans.jsonl", "manifest.json", "checksums.sha256"} <= before
    assert any(name.endswith(PARTIAL_SUFFIX) for name in before)  # the directory itself
    assert ("fsync", str(tmp_path)) in events[placed + 1 :]


def _chain(partial: Path, length: int) -> list[bytes]:
    """``length`` spans, each the parent of the next, hanging from the journal's first
    span, written deepest first (the order spans end in)."""
    first = orjson.loads(_journal_lines(partial)[0])
    start = int(first["startTimeUnixNano"])
    lines = []
    parent = first["spanId"]
    for depth in range(length):
        span_id = f"c{depth:015x}"
        span = {
            "traceId": first["traceId"],
            "spanId": span_id,
            "parentSpanId": parent,
            "name": f"step {depth}",
            "kind": 1,
            "startTimeUnixNano": str(start + depth + 1),
            "endTimeUnixNano": str(start + 2 * length - depth),
            "attributes": [],
            "status": {},
        }
        lines.append(orjson.dumps(span) + b"\n")
        parent = span_id
    return lines[::-1]


@pytest.mark.timeout(120)
def test_recovery_is_linear_on_a_long_parent_chain(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """A journal holding a 50,000-span parent chain (deepest span first) recovers with
    every span, parents before children (quadratic recovery took minutes here)."""
    partial, _ = crashed
    lines = _journal_lines(partial)
    (partial / JOURNAL_FILE).write_bytes(b"".join([*lines, *_chain(partial, 50_000)]))
    bundle = load_bundle(recover_bundle(partial), verify_integrity=True)
    assert len(bundle.spans) == len(lines) + 1 + 50_000
    assert bundle.span_parents["c000000000000001"] == "c000000000000000"
    assert [c.seq for c in bundle.calls] == [1, 2, 3, 5]


def test_huge_sequence_numbers_do_not_blow_up_recovery(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """A call numbered 2**62 (a damaged or hostile journal) is kept, and the note counts
    the missing numbers instead of listing them all."""
    partial, _ = crashed
    lines = _journal_lines(partial)
    call = orjson.loads(lines[0])
    call["spanId"] = "00000000000000bb"
    call["attributes"] = [
        item
        if item["key"] != "sftrace.seq"
        else {"key": "sftrace.seq", "value": {"intValue": str(2**62)}}
        for item in call["attributes"]
    ]
    (partial / JOURNAL_FILE).write_bytes(b"".join([*lines, orjson.dumps(call) + b"\n"]))
    bundle = load_bundle(recover_bundle(partial))
    assert [c.seq for c in bundle.calls] == [1, 2, 3, 5, 2**62]
    [note] = [n for n in bundle.manifest.notes if "are not in the journal" in n]
    assert note.startswith("calls 4, 6, 7,")
    assert f"and {2**62 - 5 - 20} more" in note


def _killed_while_replacing(tmp_path: Path, *, overwrite: bool) -> tuple[Path, Path, str]:
    """A finished bundle d/r.sftrace, then a run started to replace it (``overwrite``)
    and killed mid-run: its journal directory beside the old bundle."""
    directory = tmp_path / "d"
    old = directory / "r.sftrace"
    with record("old", output=old):
        lookup("Faro")
    holder: dict[str, Path] = {}

    @trace_tool
    def dies(city: str) -> None:
        holder["partial"] = snapshot(session, directory)

    with record("new", output=tmp_path / "live" / "r.sftrace", overwrite=overwrite) as session:
        lookup("Lagos")
        dies("Lagos")
    assert session.run_id is not None
    return old, holder["partial"], session.run_id


def test_run_killed_while_replacing_a_bundle_is_recovered_by_its_path(tmp_path: Path) -> None:
    """The bundle's path finds the newer interrupted run beside it: load_bundle(...,
    allow_partial=True) returns it, and recover replaces the old bundle as the run's
    own overwrite=True allowed, saying which run it restored."""
    old, partial, run_id = _killed_while_replacing(tmp_path, overwrite=True)
    assert load_bundle(old, allow_partial=True).run_id == run_id
    assert recover_bundle(old) == old
    bundle = load_bundle(old, verify_integrity=True)
    assert (bundle.run_id, bundle.status) == (run_id, "interrupted")
    notes = "\n".join(bundle.manifest.notes)
    assert f"the interrupted run {run_id!r}" in notes
    assert "as the run's own overwrite=True asked" in notes
    assert not partial.exists()


def test_run_that_could_not_overwrite_does_not_replace_by_recovery(tmp_path: Path) -> None:
    """A run started without overwrite=True never replaces the bundle on recovery
    (unless asked); the old bundle stays as it was."""
    old, partial, _ = _killed_while_replacing(tmp_path, overwrite=False)
    before = (old / "manifest.json").read_bytes()
    with pytest.raises(BundleError, match="already exists"):
        recover_bundle(old)
    assert (old / "manifest.json").read_bytes() == before
    assert partial.exists()


def test_bundle_written_after_the_run_started_is_never_replaced(tmp_path: Path) -> None:
    """A bundle written at the path after the interrupted run started is the newer one:
    recovery by path leaves it, and recovering the journal keeps the run beside it."""
    old, partial, run_id = _killed_while_replacing(tmp_path, overwrite=True)
    with record("later", output=old, overwrite=True):
        lookup("Sintra")
    later = (old / "manifest.json").read_bytes()
    assert load_bundle(old, allow_partial=True).agent_name == "later"
    with pytest.raises(BundleError, match="nothing to recover"):
        recover_bundle(old)
    kept = recover_bundle(partial)
    assert kept == old.with_name(f"r.{run_id}.sftrace")
    assert load_bundle(kept).run_id == run_id
    assert (old / "manifest.json").read_bytes() == later


def test_a_bundle_swapped_out_by_a_replacement_is_not_a_run_to_recover(tmp_path: Path) -> None:
    """What a replacement swapped out (the old bundle, left in the new run's directory by
    a kill before it was deleted) is not resurrected as a run."""
    old, partial, _ = _killed_while_replacing(tmp_path, overwrite=True)
    shutil.rmtree(partial)
    shutil.copytree(old, partial)  # the old bundle under the new run's directory name
    assert unfinished_recordings(old) == []
    assert unfinished_recordings(old.parent) == []
    with pytest.raises(BundleError, match="nothing to recover"):
        recover_bundle(old)
    assert load_bundle(old, allow_partial=True).agent_name == "old"


def test_loading_the_path_of_a_run_that_never_finished_points_to_recover(
    crashed: tuple[Path, sftrace.RecordingSession],
) -> None:
    """The bundle path of a killed run does not exist yet: the error says a recording to
    it never finished and how to turn it into a bundle, not only "not found"."""
    partial, _ = crashed
    target = partial.parent / "trip.sftrace"
    with pytest.raises(BundleError, match=r"never finished .*`sftrace recover .*trip.sftrace`"):
        load_bundle(target)
    with pytest.raises(BundleError, match="bundle not found") as plain:
        load_bundle(partial.parent / "other.sftrace")
    assert "recover" not in str(plain.value)
