"""Applying value rules: what a match becomes, the plain rule-by-rule path, and a rule's
regex tried only at given positions (the scanner's way). Markers and where a value was
redacted (:class:`Redaction`) are defined here too."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sftrace._model.markers import marker
from sftrace._record.redaction_rules import Rule


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


Replace = Callable[[re.Match[str]], str]


def substitute_at(rule: Rule, text: str, starts: list[int], replace: Replace) -> str:
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
