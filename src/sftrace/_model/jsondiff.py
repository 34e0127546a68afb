"""Where two JSON values differ, as ``(path, left, right)`` triples.

Paths are canonical JSON paths (:mod:`sftrace._model.jsonpath`) such as
``$.items[2].id``; a key present on one side only shows the other side
as :data:`MISSING`.
"""

from __future__ import annotations

from typing import Any, Final

from sftrace._model.jsonpath import child
from sftrace._model.text import show_pair


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final[Any] = _Missing()


def differences(
    left: Any, right: Any, path: str = "$", limit: int = 50
) -> list[tuple[str, Any, Any]]:
    """The differing paths between ``left`` and ``right`` (at most ``limit`` of them)."""
    found: list[tuple[str, Any, Any]] = []
    _walk(left, right, path, found, limit)
    return found


def _same_scalar(left: Any, right: Any) -> bool:
    # JSON distinguishes true from 1; Python's == does not.
    return (type(left) is type(right) and left == right) or (
        isinstance(left, int | float)
        and isinstance(right, int | float)
        and not isinstance(left, bool)
        and not isinstance(right, bool)
        and left == right
    )


def _walk(left: Any, right: Any, path: str, found: list[tuple[str, Any, Any]], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            _walk(left.get(key, MISSING), right.get(key, MISSING), child(path, key), found, limit)
        return
    if isinstance(left, list) and isinstance(right, list):
        for index in range(max(len(left), len(right))):
            _walk(
                left[index] if index < len(left) else MISSING,
                right[index] if index < len(right) else MISSING,
                child(path, index),
                found,
                limit,
            )
        return
    if left is MISSING or right is MISSING or not _same_scalar(left, right):
        found.append((path, left, right))


def format_differences(diffs: list[tuple[str, Any, Any]], *, left: str, right: str) -> str:
    """One indented line per difference, ``$.a: recorded 1, reached 2``; two long
    strings show where they differ, two multi-line texts a line diff below the path."""
    lines: list[str] = []
    for path, a, b in diffs:
        first, *more = show_pair(a, b, labels=(left, right), width=120)
        lines.append(f"    {path}: {first}")
        lines.extend(f"        {line}" for line in more)
    return "\n".join(lines)
