"""Where two JSON values differ, as ``(path, left, right)`` triples.

Paths are canonical JSON paths (:mod:`sftrace._model.jsonpath`) such as
``$.items[2].id``; a key present on one side only shows the other side
as :data:`MISSING`.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any, Final

from sftrace._model.jsonpath import Segment, format_path
from sftrace._model.text import show_pair


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final[Any] = _Missing()


Path = tuple[Segment, ...]


def differences(left: Any, right: Any, limit: int = 50) -> list[tuple[str, Any, Any]]:
    """The differing paths between ``left`` and ``right`` (at most ``limit`` of them)."""
    found, _ = walk_differences(left, right, limit)
    return [(format_path(path), a, b) for path, a, b in found]


def walk_differences(left: Any, right: Any, limit: int) -> tuple[list[tuple[Path, Any, Any]], bool]:
    """The differing paths as segment tuples, in key order, and whether ``limit`` cut the
    list short. JSON distinguishes ``true`` from ``1``; ``2 == 2.0``."""
    found: list[tuple[Path, Any, Any]] = []
    truncated = _walk(left, right, (), found, limit)
    return found, truncated


def _same_scalar(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    return type(left) is type(right) and left == right


def _walk(
    left: Any, right: Any, path: Path, found: list[tuple[Path, Any, Any]], limit: int
) -> bool:
    """Append the differences below ``path``; True when ``limit`` cut the walk short."""
    if isinstance(left, dict) and isinstance(right, dict):
        return any(
            _walk(left.get(key, MISSING), right.get(key, MISSING), (*path, key), found, limit)
            for key in sorted(set(left) | set(right))
        )
    if isinstance(left, list) and isinstance(right, list):
        return any(
            _walk(
                left[index] if index < len(left) else MISSING,
                right[index] if index < len(right) else MISSING,
                (*path, index),
                found,
                limit,
            )
            for index in range(max(len(left), len(right)))
        )
    if left is not MISSING and right is not MISSING and _same_scalar(left, right):
        return False
    if len(found) >= limit:
        return True
    found.append((path, left, right))
    return False


# How much of two differing texts ``unlikeness`` compares: enough to tell near misses from
# unrelated values, bounded so that long prompts cost little on an error path.
_LIKENESS_CHARS: Final = 2000


def unlikeness(diffs: list[tuple[str, Any, Any]]) -> float:
    """How unlike the two sides of ``diffs`` are: per difference, 0 for near-identical
    values up to 1 for values with nothing in common (a side missing counts 1).

    Breaks ties between candidates with as many differing paths: ``"ccc334"`` is nearer
    ``"ccc333"`` than ``"bb22"``.
    """
    total = 0.0
    for _, left, right in diffs:
        if left is MISSING or right is MISSING:
            total += 1.0
            continue
        a = left if isinstance(left, str) else repr(left)
        b = right if isinstance(right, str) else repr(right)
        matcher = SequenceMatcher(None, a[:_LIKENESS_CHARS], b[:_LIKENESS_CHARS], autojunk=False)
        total += 1.0 - matcher.ratio()
    return total


def format_differences(diffs: list[tuple[str, Any, Any]], *, left: str, right: str) -> str:
    """One indented line per difference, ``$.a: recorded 1, reached 2``; two long
    strings show where they differ, two multi-line texts a line diff below the path."""
    lines: list[str] = []
    for path, a, b in diffs:
        first, *more = show_pair(a, b, labels=(left, right), width=120)
        lines.append(f"    {path}: {first}")
        lines.extend(f"        {line}" for line in more)
    return "\n".join(lines)
