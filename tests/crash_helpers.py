"""What a SIGKILL leaves: a copy of a live run's journal directory, taken mid-run."""

from __future__ import annotations

import shutil
from pathlib import Path

import sftrace
from sftrace._bundle.format import PARTIAL_SUFFIX


def partials(directory: Path) -> list[Path]:
    return sorted(directory.glob(f".*{PARTIAL_SUFFIX}"))


def snapshot(session: sftrace.RecordingSession, into: Path) -> Path:
    """What a SIGKILL at this instant would leave: a copy of the run's journal directory."""
    assert session.path is not None
    [live] = [p for p in partials(session.path.parent) if session.run_id in p.name]
    into.mkdir(parents=True, exist_ok=True)
    copy = into / live.name
    shutil.copytree(live, copy)
    return copy
