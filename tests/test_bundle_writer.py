"""BundleWriter: the journal's lines, rewritten in call order when the run ends."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sftrace._bundle import writer as writer_module
from sftrace._bundle.manifest import journal_header
from sftrace._bundle.writer import BundleWriter


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_spans_are_copied_in_call_order_with_their_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Lines journaled out of order (a parent ends after its children) come out sorted by
    start time then seq, whole, however the copy is split into reads."""
    monkeypatch.setattr(writer_module, "_COPY_CHUNK", chunk)
    writer = BundleWriter(tmp_path / ".run.partial", journal_header(1, run_id="r"))
    journaled = [  # (start time, seq, line): in the order the spans ended
        (20, 2, b'{"span":"child a"}'),
        (30, 3, b'{"span":"child b"}\n'),  # a line may come with its newline
        (10, 1, b'{"span":"parent"}'),
        (5, None, b'{"span":"root"}'),
        (30, 4, b'{"span":"same start, later seq"}'),
    ]
    for start, seq, line in journaled:
        writer.append(line, start, seq)
    writer.close()
    target = tmp_path / "spans.jsonl"
    digest = writer._write_ordered_spans(target)
    expected = (
        b'{"span":"root"}\n{"span":"parent"}\n{"span":"child a"}\n{"span":"child b"}\n'
        b'{"span":"same start, later seq"}\n'
    )
    assert target.read_bytes() == expected
    assert digest == hashlib.sha256(expected).hexdigest()
