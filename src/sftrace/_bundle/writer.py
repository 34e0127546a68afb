"""Writing a bundle: a journal while the run goes on, an atomic rename when it ends.

While a run is recorded its bundle lives in a hidden sibling directory
``.<name>.sftrace.<run_id>.partial/`` holding ``header.json`` (who the run is) and
``journal.jsonl`` (one span per line, appended as each span ends, so a killed process
leaves every finished span on disk). When the run ends the spans are rewritten in the
order their boundaries were reached, the manifest and digests are written, every file
and the directory are fsynced, and the directory is renamed into place. A reader never
sees a half-written bundle under the final name.

Without fsync (``configure(fsync=False)``), a killed process still loses nothing (each
span line is handed to the OS as it ends, and the kernel keeps what it was handed); only
an OS crash or power cut may lose the latest bundles, or leave one whose files did not
all reach the disk.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from sftrace._bundle.files import read_json_object
from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_MANIFEST_BYTES,
    PARTIAL_SUFFIX,
    SPANS_FILE,
)
from sftrace._bundle.integrity import checksums_text
from sftrace._bundle.manifest import Manifest
from sftrace._bundle.names import unique_bundle_name
from sftrace._errors import BundleError
from sftrace._internal import logger

# Spans are ordered by start time (the order boundaries were reached, parents before
# children), then by sequence number; spans that are not boundaries sort after
# boundaries that started at the same instant.
_UNSEQUENCED = 1 << 62


def _lock(fd: int) -> None:
    if fcntl is None:
        return
    # On a file system without locks, recovery just cannot tell a live run.
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def partial_dir_for(final_path: Path, run_id: str) -> Path:
    return final_path.parent / f".{final_path.name}.{run_id}{PARTIAL_SUFFIX}"


def write_file_durably(path: Path, data: bytes, *, fsync: bool = True) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dump_manifest(manifest: dict[str, Any]) -> bytes:
    """A manifest (``Manifest.to_json()``) or journal header as written: sorted keys."""
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


class BundleWriter:
    """Journals the spans of one run and turns them into a finished bundle."""

    def __init__(self, partial_dir: Path, header: dict[str, Any], *, fsync: bool = True) -> None:
        self.partial_dir = partial_dir
        # False: nothing is forced to disk (see the module's docstring).
        self.fsync = fsync
        partial_dir.parent.mkdir(parents=True, exist_ok=True)
        # The directory appears with its header already inside (made under another name,
        # then renamed), so a process killed at any moment never leaves a journal
        # directory that does not say which run it holds.
        creating = partial_dir.with_name(partial_dir.name + ".creating")
        creating.mkdir()
        try:
            write_file_durably(creating / HEADER_FILE, dump_manifest(header), fsync=fsync)
            if fsync:
                fsync_directory(creating)
            os.rename(creating, partial_dir)
        except BaseException:
            shutil.rmtree(creating, ignore_errors=True)
            raise
        if fsync:
            fsync_directory(partial_dir.parent)
        # Unbuffered: every span line is handed to the OS as soon as the span ends.
        self._journal = open(partial_dir / JOURNAL_FILE, "ab", buffering=0)  # noqa: SIM115
        # Held while the run records: `sftrace recover` refuses a journal a live process
        # holds. The kernel releases it when the process dies, however it dies.
        _lock(self._journal.fileno())
        self._index: list[tuple[int, int, int, int]] = []
        self._offset = 0
        # True after a write failed part-way: the journal may end with half a line.
        self.torn = False

    def append(self, line: bytes, start_time: int, seq: int | None) -> None:
        """Journal one span line (with or without its ending newline) in one ``write``.

        Raises ``OSError`` (a full disk...); the journal then stays readable: the next
        line starts on a line of its own."""
        data = line if line.endswith(b"\n") else line + b"\n"
        lead = 1 if self.torn else 0
        if lead:
            data = b"\n" + data  # end the line a failed write left half-written
        try:
            written = self._journal.write(data) or 0
            if written < len(data):  # a short write (rare): write the rest
                view = memoryview(data)[written:]
                while view:
                    view = view[self._journal.write(view) or 0 :]
        except OSError:
            self.torn = True
            with contextlib.suppress(OSError):
                self._offset = os.fstat(self._journal.fileno()).st_size
            raise
        self.torn = False
        order = seq if seq is not None else _UNSEQUENCED
        self._index.append((start_time, order, self._offset + lead, len(data) - lead))
        self._offset += len(data)

    def close(self) -> None:
        if not self._journal.closed:
            self._journal.close()

    def finalize(self, manifest: Manifest, final_path: Path, *, overwrite: bool) -> Path:
        """Write the finished bundle and move it to ``final_path``; return that path."""
        self.close()
        partial = self.partial_dir
        spans_digest = self._write_ordered_spans(partial / SPANS_FILE)
        manifest_bytes = dump_manifest(manifest.to_json())
        write_file_durably(partial / MANIFEST_FILE, manifest_bytes, fsync=self.fsync)
        digests = {
            MANIFEST_FILE: hashlib.sha256(manifest_bytes).hexdigest(),
            SPANS_FILE: spans_digest,
        }
        write_file_durably(partial / CHECKSUMS_FILE, checksums_text(digests), fsync=self.fsync)
        (partial / JOURNAL_FILE).unlink()
        (partial / HEADER_FILE).unlink()
        if self.fsync:
            fsync_directory(partial)
        try:
            place_directory(partial, final_path, overwrite=overwrite, fsync=self.fsync)
        except FileExistsError:
            # Another run took the path since this one started (two processes recording
            # to the same output): keep this run beside it, under its own name.
            kept = final_path.with_name(unique_bundle_name(final_path.name, manifest.run_id))
            place_directory(partial, kept, overwrite=False, fsync=self.fsync)
            logger.warning(
                "sftrace: %s was written by another run while this one recorded; this run's "
                "bundle was kept as %s",
                final_path,
                kept,
            )
            return kept
        return final_path

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.partial_dir, ignore_errors=True)

    def _write_ordered_spans(self, target: Path) -> str:
        """Copy the journal's lines to ``target`` in call order; return its sha256.

        Lines already in order in the journal (most of them: calls end in the order they
        start, but for their parents) are copied as one range, in large reads."""
        self._index.sort()
        digest = hashlib.sha256()
        journal_fd = os.open(self.partial_dir / JOURNAL_FILE, os.O_RDONLY)
        try:
            with open(target, "wb", buffering=0) as out:
                for offset, length in _ranges(self._index):
                    while length:
                        chunk = os.pread(journal_fd, min(length, _COPY_CHUNK), offset)
                        if not chunk:  # the journal is shorter than its index
                            break
                        digest.update(chunk)
                        _write_all(out, chunk)
                        offset += len(chunk)
                        length -= len(chunk)
                if self.fsync:
                    os.fsync(out.fileno())
        finally:
            os.close(journal_fd)
        return digest.hexdigest()


# What the ordered copy reads at a time.
_COPY_CHUNK = 4 * 1024 * 1024


def _ranges(index: list[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
    """The journal's (offset, length) ranges in index order, adjacent lines merged."""
    ranges: list[tuple[int, int]] = []
    start = end = -1
    for _, _, offset, length in index:
        if offset != end:
            if end > start:
                ranges.append((start, end - start))
            start = offset
        end = offset + length
    if end > start:
        ranges.append((start, end - start))
    return ranges


def _write_all(out: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[out.write(view) or 0 :]


def place_directory(source: Path, target: Path, *, overwrite: bool, fsync: bool = True) -> None:
    """Rename ``source`` to ``target`` atomically, replacing an existing bundle if asked.

    Replacing uses ``renameat2(RENAME_EXCHANGE)`` where available, so there is no
    moment without a valid bundle at ``target``; elsewhere it falls back to two renames.
    """
    parent = target.parent
    if overwrite and os.path.lexists(target):
        refusal = replace_refusal(target)  # checked again: it may have changed since
        if refusal is not None:
            raise BundleError(
                f"cannot replace {str(target)!r}: {refusal}; only an sftrace bundle is ever "
                f"replaced",
                path=str(target),
            )
        if target.is_dir() and not target.is_symlink() and _exchange(source, target):
            shutil.rmtree(source)  # now holds the old bundle
        else:
            backup = parent / f".{target.name}.replaced{PARTIAL_SUFFIX}"
            shutil.rmtree(backup, ignore_errors=True)
            os.rename(target, backup)
            os.rename(source, target)
            if backup.is_dir() and not backup.is_symlink():
                shutil.rmtree(backup)
            else:
                backup.unlink()
    else:
        try:
            os.rename(source, target)  # replaces an empty directory only
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise FileExistsError(errno.EEXIST, "bundle already exists", str(target)) from exc
            raise
    if fsync:
        fsync_directory(parent)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc: Any = None


def _exchange(a: Path, b: Path) -> bool:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _libc.renameat2  # noqa: B018  (missing on non-glibc systems)
        except (OSError, AttributeError):
            _libc = False
    if _libc is False:
        return False
    result = _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def replace_refusal(path: Path) -> str | None:
    """Why the existing ``path`` must not be replaced by a bundle, or None when it may.

    Only a directory holding a finished sftrace bundle whose manifest reads (or an empty
    directory) may be replaced: never a file, a symbolic link, a source tree, another
    tool's bundle or an unfinished recording.
    """
    if path.is_symlink() or not path.is_dir():
        return "it is not a directory"
    try:
        if not any(path.iterdir()):
            return None
    except OSError as exc:
        return f"it cannot be listed ({exc.strerror or exc})"
    if path.name.endswith(PARTIAL_SUFFIX) or any(
        os.path.lexists(path / name) for name in (HEADER_FILE, JOURNAL_FILE)
    ):
        return "it is an unfinished recording (recover it with `sftrace recover`)"
    try:
        display = str(path / MANIFEST_FILE)
        Manifest.from_json(read_json_object(path, MANIFEST_FILE, MAX_MANIFEST_BYTES), display)
    except BundleError as exc:
        return f"it does not hold a readable sftrace bundle ({exc})"
    return None


def check_bundle_target(
    path: Path, *, overwrite: bool, purpose: str, overwrite_hint: str = "pass overwrite=True"
) -> None:
    """Refuse to write a bundle over something that is not one, or over one unasked.

    ``purpose`` says what is being written, for the message ("write the bundle",
    "save the replay"); ``overwrite_hint`` how to allow replacing (the CLI's flag).
    Raises ``BundleError`` naming ``path``; nothing is touched.
    """
    if not os.path.lexists(path):
        return
    refusal = replace_refusal(path)
    if refusal is not None:
        raise BundleError(
            f"cannot {purpose} to {str(path)!r}: {refusal}; only an sftrace bundle is ever "
            f"replaced: choose another path",
            path=str(path),
        )
    if any(path.iterdir()) and not overwrite:
        raise BundleError(
            f"cannot {purpose} to {str(path)!r}: a bundle already exists there; "
            f"{overwrite_hint} to replace it, or choose another path",
            path=str(path),
        )
