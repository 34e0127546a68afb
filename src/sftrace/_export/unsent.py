"""Which spans of a bundle live OTLP export did not send: the ``.otlp-unsent.json`` note.

When a process shuts down before its OTLP export could send every span of a recorded
run (the collector was down or too slow), the spans are not lost: they are in the
bundle. Export writes a note beside the bundle, ``<bundle>.otlp-unsent.json``, naming
the spans still unsent; ``sftrace push`` then sends only those and removes the note.
The note is not part of the bundle (its checksums do not cover it; the format is
unchanged): without a note, push sends every span.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

import orjson

from sftrace._internal import log_once

__all__ = ["clear_unsent", "read_unsent", "unsent_path", "write_unsent"]

NOTE_SUFFIX = ".otlp-unsent.json"
NOTE_FORMAT = "sftrace-otlp-unsent"


def unsent_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + NOTE_SUFFIX)


def read_unsent(bundle: Path) -> set[str] | None:
    """The span ids (hex) the note beside ``bundle`` names; None without a readable note."""
    try:
        data = orjson.loads(unsent_path(bundle).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        log_once("reading the note of spans OTLP export did not send", exc)
        return None
    if not isinstance(data, dict) or data.get("format") != NOTE_FORMAT:
        return None
    ids = data.get("span_ids")
    if not isinstance(ids, list):
        return None
    return {item for item in ids if isinstance(item, str)}


def write_unsent(bundle: Path, trace_id: str, span_ids: Iterable[str]) -> None:
    """Add ``span_ids`` to the note beside ``bundle`` (written atomically)."""
    ids = set(span_ids) | (read_unsent(bundle) or set())
    note = unsent_path(bundle)
    temporary = note.with_name(f".{note.name}.{os.getpid()}.tmp")
    data = {"format": NOTE_FORMAT, "trace_id": trace_id, "span_ids": sorted(ids)}
    temporary.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    os.replace(temporary, note)


def clear_unsent(bundle: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        unsent_path(bundle).unlink()
