"""The values table of a report page, and JSON made safe to place in it.

A page carries one JSON array holding every recorded input and output as its JSON text;
the payload refers to a value by its index and carries each value's character range in
the table, so the page parses only the values it shows (see ``data``). Everything goes
into the page inside ``<script type="application/json">`` with ``<``, ``>``, ``&`` and
U+2028/U+2029 escaped (:func:`script_json`).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

# Characters that must not appear raw inside a <script> element's JSON, and what they
# become. In valid JSON they can only occur inside strings, where \uXXXX means the same.
_SCRIPT_ESCAPES: Final = (
    ("&", "\\u0026"),
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
    # Outside strings a CR is only whitespace, but HTML turns CR LF into LF, which would
    # shift the values' offsets: make it a space (inside strings JSON forbids raw CRs).
    ("\r", " "),
)


def script_json(text: str) -> str:
    """JSON text made safe to place inside a ``<script>`` element (same JSON value)."""
    for raw, escaped in _SCRIPT_ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _utf16_length(text: str) -> int:
    """Length in the UTF-16 code units JavaScript strings index by."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


class Values:
    """The page's table of JSON values, each kept as its (escaped) JSON text."""

    def __init__(self) -> None:
        self._texts: list[str] = []

    def add_json(self, text: str | None) -> int | None:
        """Add a value given as JSON text (as bundles store them); None stays None."""
        if text is None:
            return None
        self._texts.append(script_json(text))
        return len(self._texts) - 1

    def add(self, value: Any) -> int:
        index = self.add_json(dumps(value))
        assert index is not None
        return index

    def script(self) -> tuple[str, list[int]]:
        """The table as one JSON array, and each value's [start, end) in it (flat)."""
        offsets: list[int] = []
        position = 1  # after "["
        for text in self._texts:
            end = position + _utf16_length(text)
            offsets.extend((position, end))
            position = end + 1  # the comma
        return "[" + ",".join(self._texts) + "]", offsets
