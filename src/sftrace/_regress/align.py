"""Aligning the calls of two runs: which pair up, and which are missing, unexpected or moved.

Calls are matched by content first (kind, name, provider and compared input), with the
longest-common-subsequence alignment of ``diff.align``; between two matched calls, the
calls left over on both sides are matched again by identity alone (same kind, name and
provider: a ``changed`` pair). A call missing at one place and unexpected at another with
the same content ``moved``.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from sftrace._regress.diff import align
from sftrace._regress.findings import AlignmentStatus

__all__ = ["CallAlignment", "Row", "align_calls"]

# One row of the alignment: its status, the left call's index, the right call's index.
Row = tuple[AlignmentStatus, int | None, int | None]


@dataclass(frozen=True, slots=True)
class CallAlignment:
    """The rows in display order; ``approximate`` when the runs differ too much for an
    exact alignment and calls were matched greedily."""

    rows: list[Row]
    approximate: bool


def align_calls(
    left_keys: Sequence[Hashable],
    right_keys: Sequence[Hashable],
    left_ids: Sequence[Hashable],
    right_ids: Sequence[Hashable],
) -> CallAlignment:
    """Align two runs' calls given each call's content key and identity."""
    rows, approximate = _rows(left_keys, right_keys, left_ids, right_ids)
    return CallAlignment(_with_moves(rows, left_keys, right_keys), approximate)


def _rows(
    left_keys: Sequence[Hashable],
    right_keys: Sequence[Hashable],
    left_ids: Sequence[Hashable],
    right_ids: Sequence[Hashable],
) -> tuple[list[Row], bool]:
    """Rows of the content alignment, the gaps between matches aligned by identity."""
    alignment = align(left_keys, right_keys)
    approximate = alignment.approximate
    rows: list[Row] = []
    previous_i = previous_j = -1
    for i, j in [*alignment.pairs, (len(left_keys), len(right_keys))]:
        gap_left = list(range(previous_i + 1, i))
        gap_right = list(range(previous_j + 1, j))
        if gap_left and gap_right:
            inner = align([left_ids[k] for k in gap_left], [right_ids[k] for k in gap_right])
            approximate = approximate or inner.approximate
            pi = pj = 0
            for gi, gj in [*inner.pairs, (len(gap_left), len(gap_right))]:
                rows.extend(("missing", gap_left[k], None) for k in range(pi, gi))
                rows.extend(("unexpected", None, gap_right[k]) for k in range(pj, gj))
                if gi < len(gap_left):
                    rows.append(("changed", gap_left[gi], gap_right[gj]))
                pi, pj = gi + 1, gj + 1
        else:
            rows.extend(("missing", k, None) for k in gap_left)
            rows.extend(("unexpected", None, k) for k in gap_right)
        if i < len(left_keys):
            rows.append(("same", i, j))
        previous_i, previous_j = i, j
    return rows, approximate


def _with_moves(
    rows: list[Row], left_keys: Sequence[Hashable], right_keys: Sequence[Hashable]
) -> list[Row]:
    """Merge each missing call with a later or earlier unexpected one of the same content
    into one ``moved`` row (at the missing call's place)."""
    unexpected_by_key: dict[Hashable, deque[int]] = defaultdict(deque)
    for row_index, (status, _, right_index) in enumerate(rows):
        if status == "unexpected" and right_index is not None:
            unexpected_by_key[right_keys[right_index]].append(row_index)
    moved_rows: dict[int, int] = {}  # row of the missing call -> row of the unexpected one
    for row_index, (status, left_index, _) in enumerate(rows):
        if status == "missing" and left_index is not None:
            queue = unexpected_by_key.get(left_keys[left_index])
            if queue:
                moved_rows[row_index] = queue.popleft()
    dropped = set(moved_rows.values())
    merged: list[Row] = []
    for row_index, row in enumerate(rows):
        if row_index in dropped:
            continue
        if row_index in moved_rows:
            row = ("moved", row[1], rows[moved_rows[row_index]][2])
        merged.append(row)
    return merged
