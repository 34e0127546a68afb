"""The files of a bundle on disk: where a bundle is, and reading its files within bounds.

Reading never follows a symbolic link out of the bundle directory, never opens a FIFO
or a device, and refuses files and lines over the size limits. Every problem raises
``BundleError`` naming the file (and line) and what is wrong.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from sftrace._bundle.format import (
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_LINE_BYTES,
    SPANS_FILE,
)
from sftrace._errors import BundleError


def bundle_root(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path``; raise ``BundleError`` for what cannot name a bundle."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise BundleError(f"a bundle path must be a str or os.PathLike, got {path!r}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\0" in text:
        raise BundleError(f"invalid bundle path {text!r}: it contains a NUL character")
    return Path(text)


def check_directory(root: Path) -> None:
    """Raise ``BundleError`` unless ``root`` is a directory holding a finished bundle's
    files (not missing, not a file, not an unfinished recording)."""
    if not root.exists():
        raise BundleError(f"bundle not found: {str(root)!r} does not exist", path=str(root))
    if not root.is_dir():
        raise BundleError(
            f"{str(root)!r} is not a bundle: a .sftrace bundle is a directory", path=str(root)
        )
    if (root / JOURNAL_FILE).exists() or (root / HEADER_FILE).exists():
        raise BundleError(
            f"{str(root)!r} is an unfinished recording (a journal left by a run that did not "
            f"end); run `sftrace recover {root}` to turn it into a bundle",
            path=str(root),
        )


def check_is_bundle(root: Path) -> None:
    """Raise ``BundleError`` unless ``root`` is a directory holding a ``manifest.json``."""
    if not (root / MANIFEST_FILE).exists() and not (root / MANIFEST_FILE).is_symlink():
        check_directory(root)  # names a missing path, a file, or an unfinished recording
        raise BundleError(
            f"{str(root)!r} is not an sftrace bundle: it has no {MANIFEST_FILE}",
            path=str(root),
        )


def open_bundle_file(root: Path, name: str, limit: int) -> tuple[int, int]:
    """Open a file of the bundle for reading; return (descriptor, size).

    Only a regular file directly inside the bundle opens: no symbolic link (O_NOFOLLOW,
    checked on the opened file, so it cannot be swapped in between), no FIFO or device
    (O_NONBLOCK, then fstat), nothing over ``limit`` bytes.
    """
    candidate = root / name
    display = str(candidate)
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise BundleError(f"{display}: {name!r} is not a file name inside the bundle", path=display)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(candidate, flags)
    except FileNotFoundError:
        if name == MANIFEST_FILE and not (root / SPANS_FILE).exists():
            check_is_bundle(root)  # no bundle at all: say so (or that it is unfinished)
        raise BundleError(f"{display}: missing file {name!r}", path=display) from None
    except OSError as exc:
        if os.path.islink(candidate):
            raise BundleError(
                f"{display}: is a symbolic link; bundles must hold regular files only",
                path=display,
            ) from None
        if os.path.isdir(candidate):
            raise BundleError(f"{display}: is not a regular file", path=display) from None
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BundleError(f"{display}: is not a regular file", path=display)
        if info.st_size > limit:
            raise BundleError(
                f"{display}: {info.st_size} bytes is over the limit of {limit} bytes; refusing "
                f"to load it",
                path=display,
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def check_bundle_file(root: Path, name: str, limit: int) -> Path:
    """The path of a file inside the bundle, refusing symlinks and oversized files."""
    os.close(open_bundle_file(root, name, limit)[0])
    return root / name


def read_bundle_file(root: Path, name: str, limit: int) -> bytes:
    """The bytes of a file of the bundle (see :func:`open_bundle_file`)."""
    fd, _ = open_bundle_file(root, name, limit)
    display = str(root / name)
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    if len(data) > limit:  # it grew while being read
        raise BundleError(
            f"{display}: over the limit of {limit} bytes; refusing to load it", path=display
        )
    return data


def read_lines_file(root: Path, name: str, limit: int, line_limit: int) -> bytes:
    """The bytes of a JSON-lines file of the bundle (see :func:`open_bundle_file`), read
    in chunks of at most ``line_limit`` bytes: a line longer than ``line_limit`` bytes is
    refused as soon as that many bytes of it are read, so an over-long line is never read
    whole into memory. A file no larger than ``line_limit`` is read in one piece (one
    buffer, no copy)."""
    fd, size = open_bundle_file(root, name, limit)
    display = str(root / name)
    chunks: list[bytes] = []
    got, line_start = 0, 0
    try:
        with os.fdopen(fd, "rb", buffering=0) as handle:
            while chunk := handle.read(min(line_limit, size - got) if got < size else _CHUNK):
                chunk_start = got
                got += len(chunk)
                if got > limit:  # it grew while being read
                    raise BundleError(
                        f"{display}: over the limit of {limit} bytes; refusing to load it",
                        path=display,
                    )
                first = chunk.find(b"\n")
                if (chunk_start + first + 1 if first >= 0 else got) - line_start > line_limit:
                    number = sum(part.count(b"\n") for part in chunks) + 1
                    raise BundleError(
                        f"{display}:{number}: line longer than {line_limit} bytes; refusing "
                        f"to load it",
                        path=display,
                        line=number,
                    )
                if first >= 0:
                    line_start = chunk_start + chunk.rfind(b"\n") + 1
                chunks.append(chunk)
    except OSError as exc:
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_CHUNK = 1024 * 1024


def read_optional_file(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file inside a bundle (no symlinks), or None if missing."""
    if not os.path.lexists(path):
        return None
    return read_bundle_file(path.parent, path.name, limit)


def read_json_object(root: Path, name: str, limit: int) -> dict[str, Any]:
    """A file of the bundle holding one JSON object (the manifest, the journal header)."""
    display = str(root / name)
    try:
        raw = orjson.loads(read_bundle_file(root, name, limit))
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{display}: invalid JSON: {exc}", path=display) from None
    if not isinstance(raw, dict):
        raise BundleError(
            f"{display}: expected a JSON object, got {type(raw).__name__}", path=display
        )
    return raw


def bounded_lines(
    handle: BinaryIO, display: str, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) of an open JSON-lines file, each line as read (with its
    newline, if it has one); a line longer than ``limit`` bytes is refused with a
    ``BundleError`` before it is read whole."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:
            raise BundleError(
                f"{display}:{number}: line longer than {limit} bytes; refusing to read it",
                path=display,
                line=number,
            )
        yield number, line
