"""Secrets split across pieces of one text: a streamed LLM response arrives as deltas,
and a key may start in one chunk and end in the next, where no rule sees it whole.

The pieces are joined, the secrets of the joined text found, and every piece holding
part of a secret that runs across pieces has that part replaced by the secret's marker.
(A secret inside one piece is left to the ordinary redaction of that piece.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from sftrace._model.markers import marker

Span = tuple[int, int, str]  # start, end, rule

# The members of streamed chunks that carry text deltas, in the SDKs sftrace records:
# OpenAI chat (choices[].delta.content, tool call arguments), OpenAI responses (delta),
# Anthropic (delta.text, delta.partial_json, delta.thinking), LangChain (content).
DELTA_KEYS = frozenset({"content", "text", "arguments", "partial_json", "thinking", "delta"})


def split_secrets(
    pieces: list[str], spans_of: Callable[[str], list[Span]]
) -> tuple[list[str], list[tuple[int, str]]]:
    """``pieces`` with the parts of cross-piece secrets replaced; (index, rule) of each
    piece changed."""
    starts = []
    at = 0
    for piece in pieces:
        starts.append(at)
        at += len(piece)
    cuts: dict[int, list[Span]] = {}
    for start, end, rule in spans_of("".join(pieces)):
        first = _piece_at(starts, start)
        last = _piece_at(starts, max(start, end - 1))
        if first == last:
            continue  # inside one piece: that piece's own redaction finds it
        for index in range(first, last + 1):
            offset = starts[index]
            cut = (max(start, offset) - offset, min(end, offset + len(pieces[index])) - offset)
            if cut[1] > cut[0]:
                cuts.setdefault(index, []).append((*cut, rule))
    result = list(pieces)
    changed = []
    for index, spans in sorted(cuts.items()):
        result[index] = _cut(pieces[index], spans)
        changed.append((index, spans[0][2]))
    return result, changed


def _piece_at(starts: list[int], position: int) -> int:
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= position:
            low = middle
        else:
            high = middle - 1
    return low


def _cut(piece: str, spans: list[Span]) -> str:
    out = []
    last = 0
    for start, end, rule in sorted(spans):
        if end <= last:
            continue
        start = max(start, last)
        out.append(piece[last:start])
        out.append(marker(rule))
        last = end
    out.append(piece[last:])
    return "".join(out)


def redact_chunks(
    chunks: list[Any], spans_of: Callable[[str], list[Span]]
) -> tuple[list[Any], list[tuple[tuple[Any, ...], str]]]:
    """Chunks with the cross-chunk secrets of each delta member replaced (a copy when
    anything changed), and the (chunk index, *path) and rule of each piece changed."""
    copied: list[Any] | None = None
    changed: list[tuple[tuple[Any, ...], str]] = []
    for path, places in delta_groups(chunks).items():
        if len(places) < 2:
            continue
        pieces = [_get_path(chunks[index], path) for index, _ in places]
        redacted, pieces_changed = split_secrets(pieces, spans_of)
        for piece, rule in pieces_changed:
            if copied is None:
                copied = orjson.loads(orjson.dumps(chunks))
            index = places[piece][0]
            _set_path(copied[index], path, redacted[piece])
            changed.append(((index, *path), rule))
    return (chunks if copied is None else copied), changed


def delta_groups(chunks: list[Any]) -> dict[tuple[Any, ...], list[tuple[int, tuple[Any, ...]]]]:
    """The text deltas of streamed chunks, grouped by where they sit in a chunk: for each
    relative path (``("choices", 0, "delta", "content")``), the (chunk index, path) of
    each string there, in stream order."""
    groups: dict[tuple[Any, ...], list[tuple[int, tuple[Any, ...]]]] = {}
    for index, chunk in enumerate(chunks):
        for path in _string_paths(chunk, ()):
            if (path and path[-1] in DELTA_KEYS) or (len(path) > 1 and path[-2] == "delta"):
                groups.setdefault(path, []).append((index, path))
    return groups


def _string_paths(value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _string_paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _string_paths(item, (*path, i))]
    return []


def _get_path(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _set_path(value: Any, path: tuple[Any, ...], item: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = item
