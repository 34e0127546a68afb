"""Bringing recordings from the peers (stepfork, agenttrace-vcr) into sftrace.

:func:`import_peer_runs` reads stepfork bundles or agenttrace-vcr recordings and writes
one sftrace bundle per run, which replays the same agent once it is instrumented with
sftrace's ``@trace_tool`` / ``llm_request`` under the same tool names and inputs.
Every input is read and checked before anything is written, so bad input writes
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from sftrace._bundle.names import bundle_name
from sftrace._errors import BundleError, ConfigError
from sftrace._export.collector_import import ImportedRun, ImportResult
from sftrace._record.redaction import Redactor
from sftrace._regress.peers.agenttrace import read_agenttrace
from sftrace._regress.peers.model import PeerRun
from sftrace._regress.peers.stepfork import read_stepfork
from sftrace._regress.peers.write import span_ids, write_peer_run

READERS: Final[dict[str, Callable[[str | os.PathLike[str]], PeerRun]]] = {
    "stepfork": read_stepfork,
    "agenttrace": read_agenttrace,
}


def read_peer_runs(source: str, paths: Iterable[str | os.PathLike[str]]) -> list[PeerRun]:
    """Every recording read and checked (``BundleError`` at the first bad one)."""
    reader = READERS.get(source)
    if reader is None:
        choices = ", ".join(repr(name) for name in READERS)
        raise ConfigError(f"unknown source {source!r}; expected one of {choices}")
    runs = [reader(path) for path in paths]
    if not runs:
        raise ConfigError("no recording given to import")
    return runs


def bundle_path_for(run: PeerRun, output: Path) -> Path:
    """Where a run is imported to: ``<agent>-<run_id>.sftrace`` in ``output``."""
    return output / bundle_name(run.agent_name, run.run_id)


def write_runs(
    runs: list[tuple[PeerRun, Path]], *, overwrite: bool, redactor: Redactor | None = None
) -> ImportResult:
    """Write each run to its path; a run that holds nothing to replay, or whose bundle
    exists (without ``overwrite``), is skipped with the reason."""
    result = ImportResult()
    for run, path in runs:
        spans = len(run.calls) + 1
        imported = ImportedRun(span_ids(run)[0], run.run_id, run.agent_name, spans)
        if run.problem is not None:
            imported.problem = f"{run.path}: {run.problem}"
        elif path.exists() and not overwrite:
            imported.problem = f"{path} already exists; pass --overwrite to replace it"
        else:
            write_peer_run(run, path, overwrite=overwrite, redactor=redactor)
            imported.path = path
        result.runs.append(imported)
        result.spans_read += spans
    return result


def import_peer_runs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    source: str,
    output: str | os.PathLike[str],
    overwrite: bool = False,
) -> ImportResult:
    """Convert a peer's recordings into sftrace bundles, one per run, in ``output``.

    ``source``: ``"stepfork"`` (stepfork ``.sftrace`` bundle directories, schema 0.1)
    or ``"agenttrace"`` (agenttrace-vcr recordings: JSON files with ``events``).
    Bundles are named ``<agent>-<run_id>.sftrace``; values go through the redaction
    rules of ``configure(redaction=...)``. A recording that holds no finished run, or
    whose bundle exists and ``overwrite`` is False, is skipped (its ``problem`` says
    why). Raises ``BundleError`` for a recording that cannot be read, and
    ``ConfigError`` for an unknown ``source``; then nothing is written.
    """
    runs = read_peer_runs(source, paths)
    target = Path(output)
    planned = [(run, bundle_path_for(run, target)) for run in runs]
    seen: dict[Path, PeerRun] = {}
    for run, path in planned:
        if path in seen and run.problem is None:
            raise BundleError(
                f"{run.path} and {seen[path].path} hold the same run ({run.run_id!r}); "
                f"import each run once",
                path=str(run.path),
            )
        seen[path] = run
    return write_runs(planned, overwrite=overwrite)
