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

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from sftrace._record.redaction_apply import (
    Redaction,
    Replace,
    note,
    redact_plain,
    substitute_at,
)
from sftrace._record.redaction_rules import RUN_CHARACTERS, Rule
from sftrace._record.redaction_view import HEAD, View, fold, run_classes, shape_runs

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
TOKEN_RUN: Final = "<token run>"  # a gate: the text has a long run of token characters
_TOKEN_TABLE = bytes(
    ord("a") if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_-") else ord(" ")
    for b in range(256)
)
_TOKEN_RUNS = {length: b"a" * length for length in range(1, 64)}


def _token_classes(text: str) -> bytes:
    return text.encode("latin-1", "replace").translate(_TOKEN_TABLE)


@dataclass(frozen=True, slots=True)
class Survey:
    """What a JSON text holds: the needles found, whether a literal of a rule that can
    match inside a long run is there, and whether a run has a rule's shape. Its strings
    are looked at for these only."""

    needles: frozenset[str] | _All
    inside: bool = True
    shapes: bool = True
    _narrowed: dict[frozenset[str], tuple[tuple[_Needle, ...], ...]] = field(
        default_factory=dict, compare=False, hash=False
    )

    def narrow(
        self, gates: frozenset[str], *needle_sets: tuple[_Needle, ...]
    ) -> tuple[tuple[_Needle, ...], ...]:
        """The needles (of a string with these ``gates``) that can find anything: those
        a needle found in the JSON text starts or is started by (the keywords of texts
        with other characters merge into other needles)."""
        narrowed = self._narrowed.get(gates)
        if narrowed is None:
            narrowed = tuple(
                tuple(needle for needle in needles if self._wants(needle.text))
                for needles in needle_sets
            )
            self._narrowed[gates] = narrowed
        return narrowed

    def _wants(self, needle: str) -> bool:
        if isinstance(self.needles, _All):
            return True
        return any(needle.startswith(n) or n.startswith(needle) for n in self.needles)


class _All:
    """Every needle (a JSON text the survey can't vouch for)."""

    def __contains__(self, item: object) -> bool:
        return True


EVERYTHING: Final = Survey(_All())


@dataclass(frozen=True, slots=True)
class _Needle:
    """A literal searched for, and the (keyword, rule indexes) that start with it."""

    text: str
    keywords: tuple[tuple[str, tuple[int, ...]], ...]


class Scanner:
    """Where the rules ``rules`` can match in a text, found in one scan.

    ``key_needles``: words whose presence in a member name of a JSON text means the name
    may be sensitive (see ``redaction_rules.key_needle``); ``keep``: how far from the end
    of a long run a keyword may start and still begin a match (see ``Rule.inside``), and
    how far before its anchor (see ``Rule.anchor``).
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        key_needles: Sequence[str] = (),
        keep: int = 64,
    ) -> None:
        self.rules = tuple(rules)
        self._keep = keep
        for rule in self.rules:
            for keyword in (*rule.keywords, *(key.lower() for key in rule.inside)):
                _check_keyword(rule, keyword)
        self._shapes = tuple(
            sorted({(rule.shape, i) for i, rule in enumerate(self.rules) if rule.shape})
        )
        self._key_needles = _merge({needle: [] for needle in key_needles})
        self._needle_sets: dict[frozenset[str], tuple[tuple[_Needle, ...], ...]] = {}
        self._inside: dict[str, tuple[int, ...]] = {}
        for index, rule in enumerate(self.rules):
            for literal in rule.inside:
                self._inside[literal] = (*self._inside.get(literal, ()), index)
        # The characters whose presence is tested (one fast search each): required ones,
        # and every non-letter of a keyword and character of an exact literal.
        self._gates = "".join(
            sorted(
                {char for rule in self.rules for char in rule.requires}
                | {char for rule in self.rules for k in rule.keywords for char in k} - _LETTERS
                | {char for rule in self.rules for literal in rule.inside for char in literal}
            )
        )
        self._token_run = min((rule.token_run for rule in self.rules if rule.token_run), default=0)
        anchors = {char for rule in self.rules for char in rule.anchor}
        if key_needles:
            anchors.add(":")  # a member name ends with '":'
        self._anchors = "".join(sorted(anchors))
        self._extra_key_sets: dict[frozenset[str], tuple[str, ...]] = {}

    # -- which keywords to look for ------------------------------------------------------
    def _needles(self, gates: frozenset[str]) -> tuple[tuple[_Needle, ...], ...]:
        """The needles of the rules whose required characters are among ``gates``: those
        of rules without an anchor, and those of rules with one."""
        needles = self._needle_sets.get(gates)
        if needles is None:
            free: dict[str, list[int]] = {}
            anchored: dict[str, list[int]] = {}
            for index, rule in enumerate(self.rules):
                if rule.inside or (rule.requires and not gates.intersection(rule.requires)):
                    continue  # (rules with exact literals are searched by them)
                if rule.token_run and TOKEN_RUN not in gates:
                    continue
                for keyword in rule.keywords:
                    if set(keyword) - _LETTERS <= gates:  # its other characters are there
                        (anchored if rule.anchor else free).setdefault(keyword, []).append(index)
            needles = (_merge(free), _merge(anchored))
            self._needle_sets[gates] = needles
        return needles

    def _anchor_windows(self, low: str, key_quotes: bool = False) -> View | None:
        """The stretches before each anchor character where an anchored keyword may start,
        joined (NUL between them; positions map back to ``low``), or None when anchors are
        so many that searching the whole text is cheaper.

        ``key_quotes``: a JSON text, whose member names end with ``":``: a name longer
        than the stretch is looked at whole (a key needle may be anywhere in it).
        """
        # Worth it while the stretches add up to at most a quarter of the text.
        if sum(low.count(char) for char in self._anchors) * self._keep * 4 > len(low):
            return None
        anchors: list[int] = []
        for char in self._anchors:
            at = low.find(char)
            while at != -1:
                anchors.append(at)
                at = low.find(char, at + 1)
        anchors.sort()
        pieces: list[str] = []
        starts: list[int] = []
        origins: list[int] = []
        length = 0
        last = 0
        for at in anchors:
            start = max(at - self._keep, last)
            if key_quotes and at > 1 and low[at - 1] == '"':
                start = min(start, _string_start(low, at - 1))
            starts.append(length)
            origins.append(start)
            pieces.append(low[start:at])
            length += at - start + 1
            last = at
        return View("\0".join(pieces), True, tuple(starts), tuple(origins))

    def _gates_of(self, text: str) -> frozenset[str]:
        """The tested characters in ``text``, and TOKEN_RUN when it has a run of token
        characters as long as the shortest a token rule needs."""
        gates = {gate for gate in self._gates if gate in text}
        if self._token_run and _TOKEN_RUNS[self._token_run] in _token_classes(text):
            gates.add(TOKEN_RUN)
        return frozenset(gates)

    def _extra_keys(self, gates: frozenset[str]) -> tuple[str, ...]:
        extra = self._extra_key_sets.get(gates)
        if extra is None:
            anchored = self._needles(gates)[1]
            roots = [needle.text for needle in anchored]
            extra = tuple(
                needle.text
                for needle in self._key_needles
                if not any(needle.text.startswith(root) for root in roots)
            )
            self._extra_key_sets[gates] = extra
        return extra

    # -- the scan --------------------------------------------------------------------
    def positions(self, text: str, survey: Survey | None = None) -> dict[int, list[int]] | None:
        """Rule index -> where a match of it may start (sorted); None when the text can't
        be folded position for position (then every rule must run everywhere).

        ``survey``: what the JSON text this string comes from holds (see :meth:`survey`);
        needles it lacks are not looked for.
        """
        classes = run_classes(text)
        view = View.of(text, classes, self._keep)
        low = fold(view.text)
        if low is None:
            return None
        gates = self._gates_of(text)
        free, anchored = self._needles(gates)
        if survey is not None:
            free, anchored = survey.narrow(gates, free, anchored)
        found: dict[int, list[int]] = {}
        windows = self._anchor_windows(low) if anchored else None
        if windows is None:
            free, anchored = free + anchored, ()
        for needle in free:
            _find(low, needle, found, view)
        if windows is not None:
            for needle in anchored:
                _find(windows.text, needle, found, windows, view)
        if survey is None or survey.inside:
            for literal, indexes in self._inside.items():
                if not gates.issuperset(literal) or TOKEN_RUN not in gates:
                    continue
                at = text.find(literal)
                while at != -1:
                    for index in indexes:
                        found.setdefault(index, []).append(at)
                    at = text.find(literal, at + 1)
        if survey is None or survey.shapes:
            for length, index in self._shapes:
                starts = shape_runs(classes, length)
                if starts:
                    found.setdefault(index, []).extend(starts)
        return {index: sorted(set(starts)) for index, starts in found.items()}

    def survey(self, json_text: str) -> Survey | None:
        """What in a JSON text might be redacted; None when no rule can match any of its
        strings and no member name holds a key needle (the value needs no walk)."""
        if "\\u" in json_text or "\\/" in json_text:
            return EVERYTHING
        classes = run_classes(json_text)
        view = View.of(json_text, classes, self._keep)
        low = fold(view.text)
        if low is None:
            return EVERYTHING
        gates = self._gates_of(json_text)
        free, anchored = self._needles(gates)
        found = {needle.text for needle in free if _holds(low, needle)}
        windows = self._anchor_windows(low, key_quotes=True)
        # Key needles that no anchored needle finds (``key``; ``password`` is found by
        # ``pass``) are only looked for when nothing else was found: either way the
        # value is walked.
        extra = self._extra_keys(gates)
        where = low if windows is None else windows.text
        found.update(needle.text for needle in anchored if _holds(where, needle))
        keys = not found and any(needle in where for needle in extra)
        inside = TOKEN_RUN in gates and any(
            gates.issuperset(literal) and literal in json_text for literal in self._inside
        )
        shapes = any(shape_runs(classes, length, json_text) for length, _ in self._shapes)
        if found or keys or inside or shapes:
            return Survey(frozenset(found), inside, shapes)
        return None

    def redact(
        self,
        text: str,
        path: str,
        found: list[Redaction],
        replacers: Sequence[Replace],
        survey: Survey | None = None,
    ) -> str:
        """``text`` with every rule applied in order (``replacers[i]`` for rule i)."""
        if (
            survey is not None
            and isinstance(survey.needles, frozenset)
            and not (survey.inside or survey.shapes)
        ):
            # The keywords of a string of the JSON text start with a needle found there.
            low = fold(text)
            if low is not None and not any(needle in low for needle in survey.needles):
                return text
        hits = self.positions(text, survey)
        if hits is None:
            return redact_plain(self.rules, text, path, found, replacers)
        for index, rule in enumerate(self.rules):
            starts = hits.get(index)
            if not starts:
                continue
            redacted = substitute_at(rule, text, starts, replacers[index])
            if redacted is not text:
                text = redacted
                note(found, Redaction(path, rule.name))
                hits = self.positions(text)  # positions after this rule moved
                if hits is None:
                    rest = slice(index + 1, None)
                    return redact_plain(self.rules[rest], text, path, found, replacers[rest])
        return text


def _string_start(low: str, quote: int) -> int:
    """Where the JSON string closed by the quote at ``quote`` starts."""
    at = low.rfind('"', 0, quote)
    while at > 0:
        before = at - 1
        while before >= 0 and low[before] == "\\":
            before -= 1
        if (at - 1 - before) % 2 == 0:  # not escaped
            break
        at = low.rfind('"', 0, at)
    return at + 1


def _holds(hay: str, needle: _Needle) -> bool:
    """Whether one of the keywords of ``needle`` is in ``hay``."""
    if needle.text not in hay:
        return False
    return any(keyword in hay for keyword, _ in needle.keywords)


def _find(hay: str, needle: _Needle, found: dict[int, list[int]], *views: View) -> None:
    """Note where the keywords of ``needle`` start in ``hay`` (mapped back through
    ``views``, innermost first)."""
    at = hay.find(needle.text)
    while at != -1:
        for keyword, indexes in needle.keywords:
            if hay.startswith(keyword, at):
                origin = at
                for view in views:
                    origin = view.original(origin)
                for index in indexes:
                    found.setdefault(index, []).append(origin)
        at = hay.find(needle.text, at + 1)


def _root(keyword: str, keywords: dict[str, list[int]]) -> str:
    return min((k for k in keywords if keyword.startswith(k)), key=len)


def _merge(by_keyword: dict[str, list[int]]) -> tuple[_Needle, ...]:
    """One needle per keyword that no other keyword starts (``pass`` finds password),
    and one for three or more of these that start alike: their common start (``gh``
    finds ghp_, gho_...; ``passw``... are found by ``pass``)."""
    groups: dict[str, list[str]] = {}
    for root in {_root(keyword, by_keyword) for keyword in by_keyword}:
        groups.setdefault(root[:2], []).append(root)
    shared = {
        root: os.path.commonprefix(group)  # noqa: RUF071 (text, not paths)
        for group in groups.values()
        if len(group) >= 3
        for root in group
    }
    needles: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for keyword, indexes in sorted(by_keyword.items()):
        root = _root(keyword, by_keyword)
        needles.setdefault(shared.get(root, root), []).append((keyword, tuple(indexes)))
    return tuple(_Needle(text, tuple(entries)) for text, entries in sorted(needles.items()))


def _check_keyword(rule: Rule, keyword: str) -> None:
    if not keyword or keyword != keyword.lower() or not keyword.isascii():
        raise ValueError(f"rule {rule.name!r}: keyword {keyword!r} must be lowercase ASCII")
    if any(char in keyword for char in '"\\\0') or not keyword.isprintable():
        raise ValueError(f"rule {rule.name!r}: keyword {keyword!r} has a character JSON escapes")
    if len(keyword) >= HEAD and not set(keyword) <= set(RUN_CHARACTERS.lower()):
        raise ValueError(f"rule {rule.name!r}: keyword {keyword!r} must be shorter than {HEAD}")
