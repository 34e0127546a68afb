"""Values shown to people: shortened previews, the part of two strings that differs,
line diffs of multi-line text, and plurals.

Every message, report and CLI line that shows a value goes through this module, so a
long value is cut the same way everywhere and two long values that differ show *where*
they differ instead of the same prefix twice. (The OTLP exporter's byte cap with its
``[truncated by sftrace ...]`` marker is a different thing: it changes exported data.)
"""

from __future__ import annotations

import difflib
import unicodedata
from typing import Any, Final

import orjson

__all__ = [
    "ELLIPSIS",
    "byte_size",
    "difference_window",
    "first_line",
    "line_diff",
    "one_line",
    "pluralize",
    "preview",
    "printable",
    "repr_preview",
    "shorten",
    "show_pair",
    "were",
]

ELLIPSIS: Final = "..."
# How many lines of a line diff a message shows.
MAX_DIFF_LINES: Final = 12


def shorten(text: str, width: int = 100) -> str:
    """``text`` cut to at most ``width`` characters, ending with ``...`` when cut."""
    if len(text) <= width:
        return text
    return text[: max(width - len(ELLIPSIS), 0)] + ELLIPSIS


def one_line(message: str, width: int | None = None) -> str:
    """Collapse a (possibly multi-line) message into one line, parts joined by `` | ``,
    shortened to ``width`` when given."""
    text = " | ".join(part.strip() for part in message.strip().splitlines() if part.strip())
    return text if width is None else shorten(text, width)


def first_line(text: str, width: int | None = None) -> str:
    """The first line of a message (`` ...`` when more follow), shortened to ``width``."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if width is not None and len(first) > width:
        return shorten(first, width)
    return first + (" ..." if len(lines) > 1 else "")


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # not JSON (a Python object, a sentinel): its repr
        return repr(value)


def repr_preview(value: Any, width: int = 80) -> str:
    """``repr(value)`` at most ``width`` characters: a value from a file, in an error."""
    return shorten(repr(value), width)


def preview(value: Any, width: int = 100) -> str:
    """A value on one line, as JSON (keys sorted) or else its ``repr``, at most ``width``
    characters. (For text that already is JSON, use :func:`shorten`.)"""
    return shorten(_json(value), width)


def difference_window(a: str, b: str, width: int = 60) -> tuple[int, str, str]:
    """Where two strings first differ: ``(offset, a_window, b_window)``.

    The windows are the same stretch of both strings around ``offset`` (about a third of
    ``width`` before it), each at most ``width`` characters plus ``...`` marking a cut at
    either end. Equal strings give ``(len(a), "", "")``."""
    offset = 0
    limit = min(len(a), len(b))
    while offset < limit and a[offset] == b[offset]:
        offset += 1
    if a == b:
        return len(a), "", ""
    start = max(0, offset - width // 3)
    return offset, "".join(_window(a, start, width)), "".join(_window(b, start, width))


def _window(text: str, start: int, width: int) -> tuple[str, str, str]:
    """``(before, part, after)``: the part from ``start``, and ``...`` where it was cut."""
    before = ELLIPSIS if start > 0 else ""
    after = ELLIPSIS if start + width < len(text) else ""
    return before, text[start : start + width], after


def _quoted_window(text: str, start: int, width: int) -> str:
    before, part, after = _window(text, start, width)
    return f"{before}{_json(part)}{after}"


def line_diff(a: str, b: str, *, context: int = 1, width: int = 100) -> list[str]:
    """A unified diff of two multi-line texts, without file headers: ``@@`` hunk lines,
    ``-`` lines of ``a``, ``+`` lines of ``b`` and a few lines of context, each line at
    most about ``width`` characters (a long changed line shows where it differs)."""
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=context))[2:]
    shown: list[str] = []
    for index, line in enumerate(diff):
        if len(line) > width and line[:1] in "-+":
            partner = _partner(diff, index)
            if partner is not None:
                offset, mine, _ = difference_window(line[1:], partner[1:], width)
                line = f"{line[0]}{mine}  (character {offset + 1})"
        shown.append(line if len(line) <= width + 40 else shorten(line, width))
    if len(shown) > MAX_DIFF_LINES:
        hidden = len(shown) - MAX_DIFF_LINES
        shown = [*shown[:MAX_DIFF_LINES], f"... ({pluralize(hidden, 'more diff line')})"]
    return shown


def _partner(diff: list[str], index: int) -> str | None:
    """The line a changed line was changed into (or from): a ``-`` line's first ``+``
    after its run of ``-`` lines, a ``+`` line's last ``-`` before its run."""
    sign = diff[index][0]
    other = "+" if sign == "-" else "-"
    step = 1 if sign == "-" else -1
    position = index
    while 0 <= position < len(diff) and diff[position][:1] == sign:
        position += step
    if 0 <= position < len(diff) and diff[position][:1] == other:
        return diff[position]
    return None


def show_pair(left: Any, right: Any, *, labels: tuple[str, str], width: int = 100) -> list[str]:
    """Two differing values as message lines: ``recorded "a", reached "b"``.

    Short values are shown whole. Two long strings on one line show the window around
    their first difference and its offset; two multi-line texts show a line diff (the
    extra lines, to be indented by the caller, follow the first)."""
    first, second = labels
    if isinstance(left, str) and isinstance(right, str) and left != right:
        lines = max(left.strip().count("\n"), right.strip().count("\n")) + 1
        if lines > 1 and (lines > 2 or len(left) > width or len(right) > width):
            diff = line_diff(left, right, width=width)
            return [f"{first} and {second} texts differ (- {first}, + {second}):", *diff]
        if len(_json(left)) > width or len(_json(right)) > width:
            offset, _, _ = difference_window(left, right)
            window = max(width // 2, 20)
            start = max(0, offset - window // 3)
            return [
                f"{first} {_quoted_window(left, start, window)}, "
                f"{second} {_quoted_window(right, start, window)} "
                f"(first difference at character {offset + 1}; lengths {len(left)} and "
                f"{len(right)})"
            ]
    return [f"{first} {preview(left, width)}, {second} {preview(right, width)}"]


def pluralize(count: int, word: str, plural: str | None = None) -> str:
    """``1 recorded call``, ``2 recorded calls``, ``0 problems`` (``plural`` for the
    irregular ones: ``pluralize(n, "entry", "entries")``)."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def were(count: int) -> str:
    """The verb after a count: ``1 call was``, ``2 calls were``."""
    return "was" if count == 1 else "were"


def byte_size(count: int) -> str:
    """A size for people: ``34 B``, ``33.4 kB``, ``1.2 MB`` (powers of 1000)."""
    size = float(count)
    for unit in ("B", "kB", "MB"):
        if round(size, 1) < 1000:
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


# Control and format characters, line and paragraph separators, surrogates, private use.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_KEPT = frozenset("\n\t")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as an escape."""
    if text.isprintable():
        return text
    return "".join(
        _escape(char)
        if char not in _KEPT and unicodedata.category(char) in _UNSAFE_CATEGORIES
        else char
        for char in text
    )


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
