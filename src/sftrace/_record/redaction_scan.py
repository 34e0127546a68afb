"""Finding where value rules can match, in one scan of a text.

Running every rule's regular expression over every string recorded would cost far more
than recording it. Each rule says what every match of it starts with (its keywords) or,
for a rule without keywords, the length of the run of characters it is (its shape), so
one scan of a text finds where rules can match at all:

- the text is case folded once (``str.lower``, plus the few characters that regular
  expressions compare case-insensitively to an ASCII letter), and each keyword's
  occurrences are found by substring search;
- runs of base64 characters are found by translating the text to two classes once and
  searching the result.

A rule's regex then runs only where one of its keywords starts (``Pattern.match`` at
that position), so its cost is per keyword found, not per character of the text. The
result is exactly what ``Pattern.sub`` rule after rule gives (:func:`redact_plain`, which
the tests compare against): matches are taken left to right without overlap, a later
rule sees the text as the earlier ones left it (positions are found again after a rule
replaced something), and a rule is never run where it cannot match.

The same scan, on a value's JSON text, decides whether the value needs walking at all
(:meth:`Scanner.suspicious`): JSON never escapes a keyword's characters, so a keyword of
a string is in its JSON text too (a ``\\u`` or ``\\/`` escape makes the text suspicious).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sftrace._record.redaction_rules import Rule

MARKER_PREFIX = "[REDACTED:"


def marker(rule: str) -> str:
    """The text that replaces a redacted value."""
    return f"{MARKER_PREFIX}{rule}]"


@dataclass(frozen=True, slots=True)
class Redaction:
    """Where a value was redacted (its JSON path, ``$`` for a whole text) and by which rule."""

    path: str
    rule: str

    def record(self, field: str, **extra: object) -> dict[str, object]:
        """The JSON object stored on spans: field, path and rule (never the value)."""
        return {"field": field, "path": self.path, "rule": self.rule, **extra}


def note(found: list[Redaction], redaction: Redaction) -> None:
    if redaction not in found:
        found.append(redaction)


# Characters that regular expressions match case-insensitively to an ASCII letter but
# that str.lower() leaves alone (U+0130, which lowers to two characters, is handled by
# the length check in fold()).
_FOLD_EXTRA = str.maketrans({"\u017f": "s", "\u0131": "i"})
_SHAPE_CLASS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+")
_SHAPE_TABLE = bytes(ord("a") if b in _SHAPE_CLASS else ord(" ") for b in range(256))


def fold(text: str) -> str | None:
    """``text`` case folded as IGNORECASE regexes compare it, position for position;
    None when folding changes its length (then positions can't be shared)."""
    low = text.lower()
    if text.isascii():
        return low
    if len(low) != len(text):
        return None
    if "\u017f" in low or "\u0131" in low:
        low = low.translate(_FOLD_EXTRA)
    return low


def shape_runs(text: str, length: int, *, at_least: bool = False) -> list[int]:
    """Where the runs of ``[A-Za-z0-9/+]`` of exactly ``length`` characters start (of at
    least ``length`` with ``at_least``)."""
    # latin-1 with replacement keeps one byte per character, so positions carry over.
    classes = text.encode("latin-1", "replace").translate(_SHAPE_TABLE)
    needle = b"a" * length
    starts: list[int] = []
    at = classes.find(needle)
    while at != -1:
        end = classes.find(b" ", at + length)
        if end == -1:
            end = len(classes)
        if at_least or end - at == length:
            starts.append(at)
            if at_least:
                return starts
        at = classes.find(needle, end)
    return starts


Replace = Callable[[re.Match[str]], str]


class Scanner:
    """Where the rules ``rules`` can match in a text, found in one scan."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        by_keyword: dict[str, list[int]] = {}
        shapes: dict[int, list[int]] = {}
        for index, rule in enumerate(self.rules):
            if rule.shape:
                shapes.setdefault(rule.shape, []).append(index)
            for keyword in rule.keywords:
                _check_keyword(rule, keyword)
                by_keyword.setdefault(keyword, []).append(index)
        self._keywords = tuple((keyword, tuple(rules)) for keyword, rules in by_keyword.items())
        self._shapes = tuple((length, tuple(rules)) for length, rules in shapes.items())
        self._min_shape = min(shapes, default=0)

    def positions(self, text: str) -> dict[int, list[int]] | None:
        """Rule index -> where a match of it may start (sorted); None when the text can't
        be folded position for position (then every rule must run everywhere)."""
        low = fold(text)
        if low is None:
            return None
        found: dict[int, list[int]] = {}
        for keyword, indexes in self._keywords:
            at = low.find(keyword)
            while at != -1:
                for index in indexes:
                    found.setdefault(index, []).append(at)
                at = low.find(keyword, at + 1)
        for length, indexes in self._shapes:
            starts = shape_runs(text, length)
            if starts:
                for index in indexes:
                    found.setdefault(index, []).extend(starts)
        for starts in found.values():
            starts.sort()
        return found

    def suspicious(self, json_text: str) -> bool:
        """False only when no rule can match any string of this JSON text."""
        if "\\u" in json_text or "\\/" in json_text:
            return True
        low = fold(json_text)
        if low is None:
            return True
        if any(keyword in low for keyword, _ in self._keywords):
            return True
        # In JSON text a run may grow by the letter of an escape next to it (\n...).
        return bool(self._min_shape and shape_runs(json_text, self._min_shape, at_least=True))

    def redact(
        self, text: str, path: str, found: list[Redaction], replacers: Sequence[Replace]
    ) -> str:
        """``text`` with every rule applied in order (``replacers[i]`` for rule i)."""
        hits = self.positions(text)
        if hits is None:
            return redact_plain(self.rules, text, path, found, replacers)
        for index, rule in enumerate(self.rules):
            starts = hits.get(index)
            if not starts:
                continue
            redacted = _substitute_at(rule, text, starts, replacers[index])
            if redacted is not text:
                text = redacted
                note(found, Redaction(path, rule.name))
                hits = self.positions(text)  # positions after this rule moved
                if hits is None:
                    rest = slice(index + 1, None)
                    return redact_plain(self.rules[rest], text, path, found, replacers[rest])
        return text


def _check_keyword(rule: Rule, keyword: str) -> None:
    if not keyword or keyword != keyword.lower() or not keyword.isascii():
        raise ValueError(f"rule {rule.name!r}: keyword {keyword!r} must be lowercase ASCII")
    if any(char in keyword for char in '"\\') or not keyword.isprintable():
        raise ValueError(f"rule {rule.name!r}: keyword {keyword!r} has a character JSON escapes")


def _substitute_at(rule: Rule, text: str, starts: list[int], replace: Replace) -> str:
    """``rule.find.sub(replace, text)``, trying only the positions ``starts``."""
    match = rule.find.match
    pieces: list[str] = []
    last = 0
    changed = False
    for start in starts:
        if start < last:
            continue
        found = match(text, start)
        if found is None:
            continue
        replacement = replace(found)
        if replacement != found.group(0):
            changed = True
        pieces.append(text[last:start])
        pieces.append(replacement)
        last = found.end()
    if not changed:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def redact_plain(
    rules: Sequence[Rule],
    text: str,
    path: str,
    found: list[Redaction],
    replacers: Sequence[Replace],
) -> str:
    """The reference path: each rule's ``sub`` over the whole text, one after another."""
    for rule, replace in zip(rules, replacers, strict=True):
        redacted = rule.find.sub(replace, text)
        if redacted != text:
            text = redacted
            note(found, Redaction(path, rule.name))
    return text


def replacer(rule: Rule) -> Replace:
    """What a match of ``rule`` becomes: its ``secret`` group (or all of it) replaced."""
    replacement = marker(rule.name)
    has_secret = "secret" in rule.find.groupindex
    check = rule.check

    def replace(match: re.Match[str]) -> str:
        if has_secret and match.group("secret") is not None:
            # Keep what surrounds the secret ("Bearer ", "user:...@"): replace the group.
            if check is not None and not check(match.group("secret")):
                return match.group(0)
            offset = match.start()
            start, end = match.span("secret")
            whole = match.group(0)
            return whole[: start - offset] + replacement + whole[end - offset :]
        if check is not None and not check(match.group(0)):
            return match.group(0)
        return replacement

    return replace
