"""Names and versions of the ``.sftrace`` bundle format (see ``docs/bundle-format.md``)."""

from __future__ import annotations

from typing import Final

FORMAT_NAME: Final = "sftrace-bundle"
FORMAT_VERSION: Final = 2
# Versions this reader understands. A future version adds itself here together with a
# conversion of older manifests into the newest shape (``_bundle/upgrade.py``).
SUPPORTED_VERSIONS: Final = frozenset({1, 2})

BUNDLE_SUFFIX: Final = ".sftrace"
# Other tools' bundles that also end in .sftrace: their manifest's "format" -> the
# `sftrace import --from` source that converts them.
FOREIGN_FORMATS: Final = {"stepfork": "stepfork"}


def not_a_bundle_message(display: str, found: object) -> str:
    """What to say of a manifest whose ``format`` is ``found``, not sftrace's."""
    if isinstance(found, str) and found in FOREIGN_FORMATS:
        source = FOREIGN_FORMATS[found]
        return (
            f"{display}: this is a {found} bundle, not an sftrace one; convert it with "
            f"`sftrace import --from {source} BUNDLE... -o DIR` (see docs/migrating.md)"
        )
    return f"{display}: not an sftrace bundle manifest (format={found!r}, expected {FORMAT_NAME!r})"


MANIFEST_FILE: Final = "manifest.json"
SPANS_FILE: Final = "spans.jsonl"
CHECKSUMS_FILE: Final = "checksums.sha256"
# Files of a bundle still being written (or left behind by a crash).
JOURNAL_FILE: Final = "journal.jsonl"
HEADER_FILE: Final = "header.json"
PARTIAL_SUFFIX: Final = ".partial"

# Bounds on what a reader accepts, so a hostile bundle cannot exhaust memory.
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
MAX_LINE_BYTES: Final = 64 * 1024 * 1024  # one span
MAX_SPANS_BYTES: Final = 1024 * 1024 * 1024  # spans.jsonl (read whole into memory)

STATUS_COMPLETED: Final = "completed"
STATUS_FAILED: Final = "failed"
STATUS_INTERRUPTED: Final = "interrupted"
