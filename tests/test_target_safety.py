"""Bundles are written only where they belong: nothing but a bundle is ever replaced,
and no name read from disk takes a write outside its directory (issue 13 items 1, 2, 4).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sftrace import BundleError, load_bundle, record, recover_bundle, replay_run, trace_tool
from sftrace._bundle.format import HEADER_FILE, JOURNAL_FILE, PARTIAL_SUFFIX
from sftrace._bundle.names import bundle_name, is_plain_name


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city}


def agent(question: str = "Lisbon") -> dict[str, Any]:
    return lookup(question)


def _recorded(path: Path) -> Path:
    with record("safety", output=path) as session:
        session.set_output(agent())
    return path


def _tree(path: Path) -> dict[str, bytes | None]:
    """Everything at ``path`` (names and bytes), to show it was not touched."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {
        str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(path.rglob("*"))
    }


def _source_tree(path: Path) -> None:
    (path / "pkg").mkdir(parents=True)
    (path / "pkg" / "main.py").write_text("print('precious')\n")
    (path / "README.md").write_text("# my project\n")


def _plain_file(path: Path) -> None:
    path.write_text("not a directory\n")


def _stepfork_bundle(path: Path) -> None:
    path.mkdir()
    (path / "manifest.json").write_bytes(orjson.dumps({"format": "stepfork", "run_id": "x"}))
    (path / "events.jsonl").write_text("{}\n")


def _unreadable_manifest(path: Path) -> None:
    path.mkdir()
    (path / "manifest.json").write_text("{not json")
    (path / "spans.jsonl").write_text("\n")


def _unfinished_recording(path: Path) -> None:
    path.mkdir()
    (path / HEADER_FILE).write_text("{}")
    (path / JOURNAL_FILE).write_text("")


TARGETS: dict[str, Callable[[Path], None]] = {
    "source-tree": _source_tree,
    "plain-file": _plain_file,
    "stepfork-bundle": _stepfork_bundle,
    "unreadable-manifest": _unreadable_manifest,
    "unfinished-recording": _unfinished_recording,
}


def _write_by_record(target: Path, tmp_path: Path) -> None:
    with record("safety", output=target, overwrite=True) as session:
        session.set_output(agent())


def _write_by_replay(target: Path, tmp_path: Path) -> None:
    bundle = _recorded(tmp_path / "source.sftrace")
    replay_run(bundle, agent, save=target, overwrite=True)


def _write_by_recover(target: Path, tmp_path: Path) -> None:
    holder: dict[str, Path] = {}

    @trace_tool
    def dies(city: str) -> None:
        session_path = session.path
        assert session_path is not None
        [live] = [
            p for p in session_path.parent.glob(f".*{PARTIAL_SUFFIX}") if session.run_id in p.name
        ]
        holder["partial"] = tmp_path / "crash" / live.name
        shutil.copytree(live, holder["partial"])

    with record("safety", output=tmp_path / "live" / "r.sftrace") as session:
        lookup("Porto")
        dies("Porto")
    recover_bundle(holder["partial"], output=target, overwrite=True)


WRITERS: dict[str, Callable[[Path, Path], None]] = {
    "record": _write_by_record,
    "replay-save": _write_by_replay,
    "recover": _write_by_recover,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_overwrite_replaces_only_a_bundle(tmp_path: Path, kind: str, writer: str) -> None:
    """overwrite=True on anything but an sftrace bundle (a source tree, a file, another
    tool's bundle, an unreadable manifest, an unfinished recording) is refused with a
    BundleError naming the path, and nothing there is touched."""
    name = f".x.sftrace.1{PARTIAL_SUFFIX}" if kind == "unfinished-recording" else "out"
    target = tmp_path / "place" / name
    target.parent.mkdir()
    TARGETS[kind](target)
    before = _tree(target)
    with pytest.raises(BundleError, match="only an sftrace bundle is ever replaced") as caught:
        WRITERS[writer](target, tmp_path)
    assert str(target) in str(caught.value)
    assert _tree(target) == before


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_overwrite_still_replaces_a_bundle(tmp_path: Path, writer: str) -> None:
    """A directory holding a readable sftrace bundle is replaced when asked."""
    target = _recorded(tmp_path / "old.sftrace")
    old_run = load_bundle(target).run_id
    WRITERS[writer](target, tmp_path)
    assert load_bundle(target, verify_integrity=True).run_id != old_run


@pytest.mark.parametrize(
    "agent_name", ["../../outside/planted", "/tmp/absolute-planted", "..", ".hidden"]
)
def test_recover_never_writes_outside_the_directory(tmp_path: Path, agent_name: str) -> None:
    """A planted unfinished recording whose manifest names its agent with a path (``../``,
    absolute) is recovered inside the directory given, under a safe name."""
    source = _recorded(tmp_path / "src.sftrace")
    directory = tmp_path / "runs" / "inner"
    directory.mkdir(parents=True)
    planted = directory / f".planted{PARTIAL_SUFFIX}"
    shutil.copytree(source, planted)
    manifest = orjson.loads((planted / "manifest.json").read_bytes())
    manifest["agent_name"] = agent_name
    text = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    (planted / "manifest.json").write_bytes(text)
    digests = {
        name: hashlib.sha256((planted / name).read_bytes()).hexdigest()
        for name in ("manifest.json", "spans.jsonl")
    }
    (planted / "checksums.sha256").write_text(
        "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    )
    before = {p for p in tmp_path.rglob("*") if "inner" not in p.parts}
    written = recover_bundle(planted)
    assert written.parent == directory
    assert not written.name.startswith(".")
    assert load_bundle(written).agent_name == agent_name
    assert {p for p in tmp_path.rglob("*") if "inner" not in p.parts} == before
    assert not os.path.exists("/tmp/absolute-planted")


def test_sftrace_names_are_safe_file_names() -> None:
    """Every name from a bundle becomes one plain file name."""
    for agent_name in ("../../x", "/abs", "..", ".", "a/b\\c", "\0", ""):
        name = bundle_name(agent_name, "../run")
        assert is_plain_name(name), name
        assert Path(name).name == name


def test_two_processes_recording_to_one_path_keep_both_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process finishes a bundle at the same path while this run records: this
    run's session.path does not name the other's bundle; this run is kept under its own
    name and the log says where."""
    target = tmp_path / "shared.sftrace"
    winner = (
        "from sftrace import record\n"
        f"with record('winner', output={str(target)!r}) as session:\n"
        "    session.set_output('first')\n"
    )
    with caplog.at_level("WARNING", logger="sftrace"), record("loser", output=target) as session:
        lookup("Lisbon")
        subprocess.run([sys.executable, "-c", winner], check=True)
        session.set_output("second")
    assert load_bundle(target).agent_name == "winner"
    assert session.path is not None
    assert session.path != target
    kept = load_bundle(session.path, verify_integrity=True)
    assert (kept.agent_name, kept.run_id, kept.output) == ("loser", session.run_id, "second")
    assert str(session.path) in caplog.text
