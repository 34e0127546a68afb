"""Recovering runs whose process died: ``sftrace recover``.

:func:`recover_bundle` finds the unfinished recording a path designates (``partial``),
rebuilds its run from the journal (``rebuild``), writes it as a bundle beside it, checks
that bundle loads, and only then moves it into place and removes the recording.

A run whose span did reach the journal (the process died while finishing the bundle, or
the disk filled) keeps its real status. A journal still locked by a live process is
refused: it is a recording in progress, not a crashed one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import shutil
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    PARTIAL_SUFFIX,
    SPANS_FILE,
)
from sftrace._bundle.integrity import checksums_text
from sftrace._bundle.names import unique_bundle_name
from sftrace._bundle.partial import find_partial, read_partial, started_after
from sftrace._bundle.reader import load_finished_bundle
from sftrace._bundle.rebuild import Recovered
from sftrace._bundle.writer import (
    check_bundle_target,
    dump_manifest,
    fsync_directory,
    place_directory,
    write_file_durably,
)
from sftrace._errors import BundleError

# --- writing ---------------------------------------------------------------------------------


def _check_not_live(partial: Path) -> None:
    """Refuse a journal that a running process still holds (its lock is held)."""
    journal = partial / JOURNAL_FILE
    if fcntl is None:
        return
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BundleError(
            f"{partial}: this recording is still being written by a running process; "
            f"recover it only after that process has ended",
            path=str(partial),
        ) from None
    except OSError:
        pass  # a file system without locks: nothing to learn
    finally:
        os.close(fd)


def recover_bundle(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Turn an unfinished recording (left by a process that died) into a valid bundle.

    ``path``: the hidden ``.<name>.<run_id>.partial`` directory, or the bundle path the
    run was recording to. The bundle is written to ``output`` (default: the path the run
    was recording to) with status ``interrupted`` (or the run's own status, if the run
    had ended), every finished call intact, and ``notes`` in its manifest saying what
    was lost. The unfinished recording is removed once the bundle is in place. Returns
    the bundle's path. Raises ``BundleError`` when there is nothing to recover, the
    output exists (pass ``overwrite=True``), or the recording is still in progress.
    """
    given = Path(path)
    partial = find_partial(given)
    if partial is None:
        if (given / MANIFEST_FILE).exists():
            raise BundleError(
                f"{str(given)!r} is a finished bundle: there is nothing to recover",
                path=str(given),
            )
        raise BundleError(
            f"no unfinished recording found for {str(given)!r}: pass the hidden "
            f"'.<name>.<run_id>{PARTIAL_SUFFIX}' directory a crashed run left, or the bundle "
            f"path it was recording to",
            path=str(given),
        )
    _check_not_live(partial)
    recovered = read_partial(partial)
    if partial != given and (given / MANIFEST_FILE).exists():
        recovered = _noted(
            recovered,
            f"found by the path of the bundle it was replacing ({given}): the interrupted run "
            f"{recovered.manifest.run_id!r}, started {recovered.started_at}",
        )
    if output is not None:
        target = Path(output)
    else:
        target, overwrite, recovered = _own_target(partial, recovered, overwrite)
    check_bundle_target(
        target,
        overwrite=overwrite,
        purpose="write the recovered bundle",
        overwrite_hint="pass overwrite=True (--overwrite)",
    )
    _write(recovered, target, overwrite=overwrite)
    shutil.rmtree(partial, ignore_errors=True)
    return target


def _own_target(
    partial: Path, recovered: Recovered, overwrite: bool
) -> tuple[Path, bool, Recovered]:
    """Where a run goes by default: the path it was recording to, and whether it may
    replace what is there.

    An existing bundle there is replaced as the run itself allowed (it was started with
    ``overwrite=True``), and only when that bundle was written before the run started.
    A bundle written after the run started is never replaced: the run is recovered
    beside it under its own name (and the notes say so).
    """
    target = partial.parent / recovered.final_name
    if not (target / MANIFEST_FILE).exists():
        return target, overwrite, recovered
    if started_after(partial, target):
        if recovered.overwrite:
            note = f"it replaces the bundle at {target}, as the run's own overwrite=True asked"
            return target, True, _noted(recovered, note)
        return target, overwrite, recovered
    kept = target.with_name(unique_bundle_name(target.name, recovered.manifest.run_id))
    note = (
        f"the bundle at {target} was written after this run started and is kept; this run "
        f"was recovered as {kept.name}"
    )
    return kept, False, _noted(recovered, note)


def _noted(recovered: Recovered, note: str) -> Recovered:
    manifest = recovered.manifest.with_notes([*recovered.manifest.notes, note])
    return dataclasses.replace(recovered, manifest=manifest)


def _write(recovered: Recovered, target: Path, *, overwrite: bool) -> None:
    """Write the bundle next to ``target``, check it loads, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.recovering-{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
    staging.mkdir()
    try:
        spans = recovered.spans_bytes
        write_file_durably(staging / SPANS_FILE, spans)
        manifest_bytes = dump_manifest(recovered.manifest.to_json())
        write_file_durably(staging / MANIFEST_FILE, manifest_bytes)
        digests = {
            MANIFEST_FILE: hashlib.sha256(manifest_bytes).hexdigest(),
            SPANS_FILE: hashlib.sha256(spans).hexdigest(),
        }
        write_file_durably(staging / CHECKSUMS_FILE, checksums_text(digests))
        fsync_directory(staging)
        load_finished_bundle(
            staging, verify_integrity=True, eager=True
        )  # never place what cannot be read back
        place_directory(staging, target, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
