"""A bundle's integrity: ``checksums.sha256`` against its files, and each call's stored
digests against its input and output.

Digests show that a bundle changed after it was written; they are not a signature:
whoever can change the files can also rewrite the digests.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from sftrace._bundle.files import open_bundle_file, read_bundle_file
from sftrace._bundle.format import CHECKSUMS_FILE, MANIFEST_FILE, MAX_SPANS_BYTES, SPANS_FILE
from sftrace._errors import BundleError
from sftrace._model.calls import Call
from sftrace._model.stored import digest_mismatches
from sftrace._model.text import repr_preview

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def checksums_text(digests: dict[str, str]) -> bytes:
    """``checksums.sha256`` as sftrace writes it: sorted ``<sha256>  <name>`` lines."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items())).encode()


def parse_checksums(raw: bytes, display: str) -> tuple[dict[str, str] | None, list[str]]:
    """The digests ``checksums.sha256`` lists (name -> sha256; None when it is not even
    text) and its problems."""
    problems: list[str] = []
    expected: dict[str, str] = {}
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None, [f"{display}: not ASCII text"]
    if not text.endswith("\n"):
        problems.append(f"{display}: truncated (no newline at the end)")
    for number, line in enumerate(
        text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), start=1
    ):
        digest, sep, name = line.partition("  ")
        if (
            not sep
            or len(digest) != 64
            or not re.fullmatch(r"[0-9a-f]+", digest)
            or not _PLAIN_NAME.fullmatch(name)
            or name in expected
        ):
            problems.append(f"{display}:{number}: malformed line {repr_preview(line)}")
            continue
        expected[name] = digest
    if not problems and raw != checksums_text(expected):
        # Every line parsed, yet the file is not exactly what a writer produces (order,
        # line endings): it was edited.
        problems.append(
            f"{display}: not in the form sftrace writes (sorted '<sha256>  <name>' lines)"
        )
    return expected, problems


def integrity_problems(root: Path) -> list[str]:
    """Compare every file of the bundle with ``checksums.sha256``; return the problems.

    Digests show that a bundle changed after it was written; they are not a signature:
    whoever can change the files can also rewrite the digests.
    """
    display = str(root / CHECKSUMS_FILE)
    expected, problems = parse_checksums(
        read_bundle_file(root, CHECKSUMS_FILE, 1024 * 1024), display
    )
    if expected is None:
        return problems
    for name in (MANIFEST_FILE, SPANS_FILE):
        if name not in expected:
            problems.append(f"{display}: no digest for {name}")
    try:
        present = {entry.name for entry in root.iterdir()} - {CHECKSUMS_FILE}
    except OSError as exc:
        raise BundleError(
            f"{root}: cannot list it ({exc.strerror or exc})", path=str(root)
        ) from None
    for extra in sorted(present - set(expected)):
        problems.append(f"{root / extra}: file not listed in {CHECKSUMS_FILE}")
    for name, digest in sorted(expected.items()):
        try:
            actual = _sha256(root, name)
        except BundleError as exc:
            problems.append(str(exc))
            continue
        if actual != digest:
            problems.append(
                f"{root / name}: digest mismatch (expected {digest[:16]}..., got "
                f"{actual[:16]}...): the file changed after the bundle was written"
            )
    return problems


def _sha256(root: Path, name: str) -> str:
    fd, _ = open_bundle_file(root, name, MAX_SPANS_BYTES)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "rb") as handle:
            for chunk in iter(lambda: handle.read(1024 * 1024), b""):
                digest.update(chunk)
    except OSError as exc:
        raise BundleError(
            f"{root / name}: cannot be read ({exc.strerror or exc})", path=str(root / name)
        ) from None
    return digest.hexdigest()


def call_digest_problems(calls: Sequence[Call], display: str) -> list[str]:
    """Calls whose stored input or output no longer matches its digest
    (``sftrace.input.sha256`` / ``sftrace.output.sha256``; calls without one are not
    checked): the value was changed after it was recorded."""
    problems = []
    for call in calls:
        for field_name, key in digest_mismatches(
            call.attributes, call.input_json, call.output_json
        ):
            problems.append(
                f"{display}: call {call.seq} ({call.label}): its {field_name} was changed "
                f"after it was recorded ({key} does not match)"
            )
    return problems
