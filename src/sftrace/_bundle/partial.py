"""Unfinished recordings: finding the one a path designates, and reading it.

While a run is recorded, its bundle lives in a hidden sibling directory
``.<name>.<run_id>.partial/`` holding ``header.json`` (which run this is, and the run
span as it started) and ``journal.jsonl`` (one span per line, written as each span
ends). A run killed by SIGKILL, an out-of-memory kill or a power cut leaves that
directory behind; :func:`read_partial` turns it back into a run (see ``rebuild``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from sftrace._bundle.files import read_json_object, read_optional_file
from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    FORMAT_NAME,
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    PARTIAL_SUFFIX,
    SPANS_FILE,
)
from sftrace._bundle.integrity import parse_checksums
from sftrace._bundle.manifest import HEX32, Manifest
from sftrace._bundle.names import bundle_name, is_plain_name, parse_utc
from sftrace._bundle.reader import spans_from_data
from sftrace._bundle.rebuild import Recovered, rebuild
from sftrace._errors import BundleError

# --- finding unfinished recordings ---------------------------------------------------


def is_partial(path: Path) -> bool:
    """True for the directory of an unfinished recording (it holds a header or journal)."""
    return path.is_dir() and (
        (path / HEADER_FILE).exists()
        or (path / JOURNAL_FILE).exists()
        or (path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX))
    )


def unfinished_recordings(path: Path) -> list[Path]:
    """Unfinished recordings for ``path``: itself, the ones meant to become the bundle
    ``path``, or (for a directory of bundles) every one inside it. Newest first."""
    if is_partial(path):
        return [path]
    found: list[Path] = []
    parent = path.parent
    if parent.is_dir():
        found = [p for p in parent.glob(f".{_glob_escape(path.name)}.*{PARTIAL_SUFFIX}")]
    if not found and path.is_dir() and not (path / MANIFEST_FILE).exists():
        found = [p for p in path.glob(f".*{PARTIAL_SUFFIX}")]
    found = [p for p in found if p.is_dir() and not p.is_symlink() and _is_recording(p)]
    return sorted(found, key=_mtime, reverse=True)


def _is_recording(path: Path) -> bool:
    """Not what place_directory leaves while replacing a bundle, nor our own temporary
    directories, nor an old bundle a replacement swapped out (its run id is not the
    recording's): none of those is a run to recover."""
    name = path.name
    if name.endswith(f".replaced{PARTIAL_SUFFIX}") or ".recovering-" in name:
        return False
    if os.path.lexists(path / HEADER_FILE) or not os.path.lexists(path / MANIFEST_FILE):
        return True
    try:
        run_id = read_json_object(path, MANIFEST_FILE, MAX_MANIFEST_BYTES).get("run_id")
    except BundleError:
        return True  # damaged: let recovery say what is wrong with it
    return isinstance(run_id, str) and name.endswith(f".{run_id}{PARTIAL_SUFFIX}")


def recording_started(partial: Path) -> _dt.datetime | None:
    """When the run recorded in ``partial`` started (its header's ``created_at``)."""
    for name in (HEADER_FILE, MANIFEST_FILE):
        try:
            started = parse_utc(
                read_json_object(partial, name, MAX_MANIFEST_BYTES).get("created_at")
            )
        except BundleError:
            continue
        if started is not None:
            return started
    return None


def bundle_ended(path: Path) -> _dt.datetime | None:
    """When the run of the finished bundle at ``path`` ended (None: not readable)."""
    try:
        raw = read_json_object(path, MANIFEST_FILE, MAX_MANIFEST_BYTES)
    except BundleError:
        return None
    return parse_utc(raw.get("ended_at")) or parse_utc(raw.get("created_at"))


def started_after(partial: Path, bundle: Path) -> bool:
    """True when the run in ``partial`` started after the bundle at ``bundle`` was
    finished: it is the newer of the two (unknown times count as not newer)."""
    started, ended = recording_started(partial), bundle_ended(bundle)
    return started is not None and ended is not None and started > ended


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def find_partial(path: Path) -> Path | None:
    """The one unfinished recording ``path`` designates, or None if it designates none.

    Raises ``BundleError`` when several match (the caller must choose one).
    """
    if path.exists() and not is_partial(path):
        if not (path / MANIFEST_FILE).exists():
            return None  # not a bundle: the normal loader decides
        # A finished bundle: a run that was replacing it and started after it was
        # written is newer (killed while overwriting it); an older one is not.
        candidates = [p for p in unfinished_recordings(path) if started_after(p, path)]
    else:
        candidates = unfinished_recordings(path)
    if not candidates:
        return None
    if len(candidates) > 1:
        listed = ", ".join(repr(str(c)) for c in candidates[:5])
        raise BundleError(
            f"{str(path)!r} matches {len(candidates)} unfinished recordings ({listed}); "
            f"pass the one to use",
            path=str(path),
        )
    return candidates[0]


# --- reading one ---------------------------------------------------------------------


def read_partial(partial: Path) -> Recovered:
    """Rebuild the run left in ``partial``; raise ``BundleError`` when nothing can be."""
    display = str(partial)
    try:
        info = os.lstat(partial)
    except OSError as exc:
        raise BundleError(f"{display}: cannot read it ({exc.strerror})", path=display) from None
    if not stat.S_ISDIR(info.st_mode):
        raise BundleError(
            f"{display}: not an unfinished recording (an unfinished recording is a "
            f"directory holding {HEADER_FILE} and {JOURNAL_FILE})",
            path=display,
        )
    finished = _finished_bundle(partial)
    if finished is not None:
        return finished
    return rebuild(partial, _read_header(partial))


def _read_header(partial: Path) -> dict[str, Any]:
    path = partial / HEADER_FILE
    display = str(path)
    data = read_optional_file(path, MAX_MANIFEST_BYTES)
    if data is None:
        raise BundleError(
            f"{display}: missing; without it the run cannot be identified (the journal is "
            f"kept, nothing was changed)",
            path=display,
        )
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{display}: invalid JSON: {exc}", path=display) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise BundleError(f"{display}: not an sftrace journal header", path=display)
    trace_id = header.get("trace_id")
    if not (isinstance(trace_id, str) and HEX32.fullmatch(trace_id)):
        raise BundleError(
            f"{display}: trace_id must be 32 lowercase hex digits, got {trace_id!r}",
            path=display,
        )
    return header


def _finished_bundle(partial: Path) -> Recovered | None:
    """A bundle that was complete inside ``partial`` (only its final rename was missed)."""
    checksums = read_optional_file(partial / CHECKSUMS_FILE, 1024 * 1024)
    manifest_bytes = read_optional_file(partial / MANIFEST_FILE, MAX_MANIFEST_BYTES)
    if checksums is None or manifest_bytes is None or not (partial / SPANS_FILE).is_file():
        return None
    expected, _ = parse_checksums(checksums, str(partial / CHECKSUMS_FILE))
    try:
        spans = read_optional_file(partial / SPANS_FILE, MAX_SPANS_BYTES) or b""
    except BundleError:
        return None
    if (
        expected is None
        or expected.get(MANIFEST_FILE) != hashlib.sha256(manifest_bytes).hexdigest()
        or expected.get(SPANS_FILE) != hashlib.sha256(spans).hexdigest()
    ):
        return None  # a bundle being written when the process died: use the journal
    try:
        manifest = Manifest.from_json(orjson.loads(manifest_bytes), str(partial / MANIFEST_FILE))
        bundle = spans_from_data(None, manifest, spans, str(partial), eager=True)
    except (BundleError, orjson.JSONDecodeError):
        return None
    manifest = manifest.with_notes(
        [
            *manifest.notes,
            "the run ended and its bundle was complete; only the final rename into place "
            "was interrupted",
        ]
    )
    return Recovered(
        source=partial,
        manifest=manifest,
        lines=[line for line in spans.split(b"\n") if line],
        final_name=_final_name_from_partial(partial, manifest),
        calls=len(bundle.calls),
        started_at=manifest.created_at,
    )


def _final_name_from_partial(partial: Path, manifest: Manifest) -> str:
    name = partial.name
    run_id = manifest.run_id
    suffix = f".{run_id}{PARTIAL_SUFFIX}"
    if name.startswith(".") and run_id and name.endswith(suffix):
        candidate = name[1 : -len(suffix)]
        if is_plain_name(candidate):
            return candidate
    return bundle_name(manifest.agent_name, run_id)
