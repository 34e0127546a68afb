"""The machinery of behavioural diffs: JSON normalisation, path differences with ignore
paths (:mod:`sftrace._model.jsonpath`), and the alignment of two call sequences by content.

Alignment is a longest-common-subsequence match (Myers' O(ND) greedy algorithm) after
trimming the common prefix and suffix and setting aside items found on one side only, so
one inserted call shows as one added call and not as every later call changed. Its cost
is bounded: time O((N+M)·D) and memory O(N+M+D²) for D differences, with D capped at
:data:`MAX_EDIT_DISTANCE` (lower for very long runs); beyond the cap the region is
aligned greedily in O((N+M) log M) and the alignment is flagged approximate.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from sftrace._model.jsondiff import MISSING, walk_differences
from sftrace._model.jsonpath import JsonPath, Segment, first_match, format_path
from sftrace._model.normalize import content_key, normalize

DiffKind = Literal["structure", "value", "text"]

# Above this many differences, the alignment falls back to a greedy match; the cap is
# lowered for long runs so that (N+M)·D stays under the work budget.
MAX_EDIT_DISTANCE: Final = 1000
_WORK_BUDGET: Final = 5_000_000
# At most this many path differences are listed for one compared value.
MAX_PATHS: Final = 50

__all__ = [
    "MISSING",
    "Difference",
    "align",
    "content_key",
    "normalize",
    "value_differences",
]


# --- value differences ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    """One path where two JSON values differ (after normalisation).

    ``baseline`` or ``candidate`` is :data:`MISSING` when the path exists on one side
    only; ``ignored_by`` names the ignore pattern that matched it, if any.
    """

    segments: tuple[Segment, ...]
    baseline: Any
    candidate: Any
    ignored_by: str | None = None

    @property
    def path(self) -> str:
        return format_path(self.segments)

    @property
    def kind(self) -> DiffKind:
        """``structure`` (a key or item added or removed, a type changed), ``text`` (two
        free-text strings: several words on at least one side) or ``value``."""
        left, right = self.baseline, self.candidate
        if left is MISSING or right is MISSING or _type_class(left) != _type_class(right):
            return "structure"
        if (
            isinstance(left, str)
            and isinstance(right, str)
            and (_is_prose(left) or _is_prose(right))
        ):
            return "text"
        return "value"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "baseline": None if self.baseline is MISSING else self.baseline,
            "candidate": None if self.candidate is MISSING else self.candidate,
            "missing": "baseline"
            if self.baseline is MISSING
            else "candidate"
            if self.candidate is MISSING
            else None,
            "ignored_by": self.ignored_by,
        }


def _type_class(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def _is_prose(text: str) -> bool:
    return any(character.isspace() for character in text.strip())


def value_differences(
    baseline: Any,
    candidate: Any,
    *,
    ignore: Sequence[JsonPath] = (),
    limit: int = MAX_PATHS,
) -> tuple[list[Difference], bool]:
    """The paths where the normalised values differ, and whether the list was cut at
    ``limit``. Differences under an ignore pattern are included, marked ``ignored_by``."""
    found, truncated = walk_differences(normalize(baseline), normalize(candidate), limit)
    differences = []
    for path, left, right in found:
        pattern = first_match(path, ignore)
        differences.append(Difference(path, left, right, None if pattern is None else str(pattern)))
    return differences, truncated


# --- sequence alignment ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alignment:
    """Matched index pairs ``(i, j)`` (increasing in both), and whether a region had too
    many differences for an exact alignment and was matched greedily."""

    pairs: list[tuple[int, int]]
    approximate: bool


def align(
    left: Sequence[Hashable],
    right: Sequence[Hashable],
    *,
    max_edit_distance: int = MAX_EDIT_DISTANCE,
) -> Alignment:
    """A longest common subsequence of ``left`` and ``right`` as matched index pairs."""
    ids: dict[Hashable, int] = {}
    a = [ids.setdefault(item, len(ids)) for item in left]
    b = [ids.setdefault(item, len(ids)) for item in right]
    n, m = len(a), len(b)
    start = 0
    while start < n and start < m and a[start] == b[start]:
        start += 1
    end_a, end_b = n, m
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    pairs = [(i, i) for i in range(start)]
    # Items found on one side only can never match: align the rest (same LCS, fewer
    # differences to walk), then map the indexes back.
    left_mid, right_mid = a[start:end_a], b[start:end_b]
    in_left, in_right = set(left_mid), set(right_mid)
    keep_left = [i for i, item in enumerate(left_mid) if item in in_right]
    keep_right = [j for j, item in enumerate(right_mid) if item in in_left]
    kept_a = [left_mid[i] for i in keep_left]
    kept_b = [right_mid[j] for j in keep_right]
    # Bound the work, O((N+M)·D), as well as D itself.
    cap = min(max_edit_distance, max(64, _WORK_BUDGET // max(1, len(kept_a) + len(kept_b))))
    middle = _myers(kept_a, kept_b, cap)
    approximate = middle is None
    if middle is None:
        middle = _greedy(kept_a, kept_b)
    pairs.extend((keep_left[i] + start, keep_right[j] + start) for i, j in middle)
    pairs.extend((end_a + k, end_b + k) for k in range(n - end_a))
    return Alignment(pairs, approximate)


def _myers(a: list[int], b: list[int], max_d: int) -> list[tuple[int, int]] | None:
    """Myers' greedy LCS with a trace for backtracking; None if D exceeds ``max_d``."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return []
    limit = min(n + m, max_d)
    offset = limit + 1
    v = [0] * (2 * limit + 3)
    trace: list[list[int]] = []  # trace[d]: v[-d-1 .. d+1] before step d
    for d in range(limit + 1):
        trace.append(v[offset - d - 1 : offset + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]  # a step down (an insertion)
            else:
                x = v[offset + k - 1] + 1  # a step right (a deletion)
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m, d)
    return None


def _backtrack(trace: list[list[int]], n: int, m: int, depth: int) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(depth, -1, -1):
        saved = trace[d]

        def at(k: int, saved: list[int] = saved, d: int = d) -> int:
            return saved[k + d + 1]

        k = x - y
        went_down = k == -d or (k != d and at(k - 1) < at(k + 1))
        previous_k = k + 1 if went_down else k - 1
        previous_x = at(previous_k) if d > 0 else 0
        previous_y = previous_x - previous_k if d > 0 else 0
        while x > previous_x and y > previous_y:
            x -= 1
            y -= 1
            pairs.append((x, y))
        x, y = previous_x, previous_y
    pairs.reverse()
    return pairs


def _greedy(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """A common subsequence in O((N+M) log M): each item of ``a`` takes the next equal
    item of ``b``. Not the longest; used only past the edit-distance cap."""
    positions: dict[int, list[int]] = {}
    for j, item in enumerate(b):
        positions.setdefault(item, []).append(j)
    pairs: list[tuple[int, int]] = []
    after = 0
    for i, item in enumerate(a):
        candidates = positions.get(item)
        if not candidates:
            continue
        index = bisect.bisect_left(candidates, after)
        if index < len(candidates):
            pairs.append((i, candidates[index]))
            after = candidates[index] + 1
    return pairs
