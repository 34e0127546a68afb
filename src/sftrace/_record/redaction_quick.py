"""The quick check of a JSON text: nothing in it can be redacted (most recorded values).

The full survey (``redaction_scan``) looks for each rule's keywords one by one: one
substring search per keyword group, 15 to 35 of them. CPython has no multi-pattern
search in C (a regex alternation of the keywords is 100 to 1000 times slower than one
substring search), so this check folds most of them into a few scans of the text:

- Names followed by ``:`` or ``=`` (the ``name = value`` rules and sensitive member names
  ``"password":``): the anchor character is rare, the name before it is not, so the
  case-folded text is reversed, ``=`` turned into ``:``, and one regex whose literal
  prefix is ``:`` (a fast C scan) tries the reversed names only where an anchor is.
- Rules whose keyword holds a character the text lacks, or which need something the
  text lacks (``Rule.needs``, ``Rule.requires``, a long token run), are skipped before
  any search; the rest are found by one substring search per keyword that is left.
- Runs of exactly a rule's shape are found with one search of the classes of the text.

Every test here is a necessary condition of a rule matching (or of a member name being
sensitive), checked on the JSON text: when one holds, the check answers "maybe" and the
full survey decides. Only ASCII texts are checked (case folding of other characters can
change what a name looks like); others get the full survey.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sftrace._record.redaction_rules import RUN_CHARACTERS, Rule, key_words

# Between the characters of a reversed name: what a name's words may be separated by
# (anything but a letter, a digit or a quote). JSON escapes are spaces by then.
_SKIP = r'[^a-z0-9"]*+'
# Between a reversed anchor and the name: the same, digits and quotes too (``pin_2": ``).
_BEFORE = r"[^a-z]*+"
# A JSON escape (``\\u`` and ``\\/`` never get here): each becomes one space, as what it
# stands for is neither a letter nor a digit.
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_A = ord("a")
_SMALL = 4096  # a text up to this long has few runs
_BACKSLASH = ord("\\")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
# One byte per character: "a" for a run character (base64), "\\" for a backslash, a
# space for any other.
_RUN_TABLE = bytes(
    ord("a") if chr(b) in RUN_CHARACTERS else b if chr(b) == "\\" else ord(" ") for b in range(256)
)


def _reversed(words: Sequence[str], split: bool) -> tuple[str, ...]:
    """The atoms of a pattern for a name's words read backwards: separators between
    words, and between any two letters too when ``split`` (a member name's words may be
    cut anywhere: ``a_pi_key`` ends with the words of ``api key``)."""
    atoms: list[str] = []
    for word in reversed(words):
        if atoms:
            atoms.append(_SKIP)
        for index, char in enumerate(reversed(word)):
            if split and index:
                atoms.append(_SKIP)
            atoms.append(re.escape(char))
    return tuple(atoms)


def _trie(sequences: Iterable[tuple[str, ...]]) -> str:
    """One alternation of atom sequences, alternatives that start alike merged (so the
    regex engine tells them apart by their first character)."""
    by_first: dict[str, list[tuple[str, ...]]] = {}
    for sequence in sequences:
        if not sequence:
            return ""  # this one matches wherever the others do
        by_first.setdefault(sequence[0], []).append(sequence[1:])
    parts = [atom + _trie(rest) for atom, rest in sorted(by_first.items())]
    return parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"


def _special(keyword: str) -> int:
    """Where the first character of ``keyword`` that is neither a letter nor a digit is
    (-1: none)."""
    return next((i for i, char in enumerate(keyword) if not char.isalnum()), -1)


def _without_escapes(low: str) -> str:
    """The folded JSON text with each escape a space (``\\n`` is the common one; with
    no escaped backslash, every backslash starts an escape of two characters)."""
    if "\\\\" not in low:
        low = low.replace("\\n", " ")
        if "\\" not in low:
            return low
    return _ESCAPE.sub(" ", low)


def _by_first(keywords: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """One regex per first character of ``keywords`` (``b(?:asic|earer)``): its literal
    first character makes the engine scan for it in C."""
    by_first: dict[str, set[tuple[str, ...]]] = {}
    for keyword in keywords:
        by_first.setdefault(keyword[0], set()).add(tuple(re.escape(c) for c in keyword[1:]))
    return _by_char(by_first)


def _by_char(alternatives: dict[str, set[tuple[str, ...]]]) -> tuple[re.Pattern[str], ...]:
    """For each character, a regex: that character, then one of its alternatives."""
    return tuple(
        re.compile(re.escape(char) + _trie(rest)) for char, rest in sorted(alternatives.items())
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to look for in a text with a given set of gate characters: one regex per
    character that keywords hold (run on the reversed folded text: ``_phg`` finds
    ``ghp_``); keywords searched as they are, with what they need first; exact-case
    literals."""

    reversed: tuple[re.Pattern[str], ...]
    finds: tuple[tuple[re.Pattern[str] | None, tuple[re.Pattern[str], ...]], ...]
    literals: tuple[tuple[re.Pattern[str] | None, tuple[re.Pattern[str], ...]], ...]


class QuickCheck:
    """``clear(json_text)``: True when no rule in ``rules`` can match any string of the
    JSON text and no member name is a sensitive key named in ``key_names``."""

    def __init__(self, rules: Sequence[Rule], key_names: Sequence[str] = ()) -> None:
        names = {_reversed(key_words(name), split=True) for name in key_names}
        free: list[Rule] = []
        for rule in rules:
            if rule.anchor:
                for name in rule.names or rule.keywords:
                    names.add(_reversed(key_words(name), split=False))
            elif (
                rule.keywords
                and all(_special(k) == len(k) - 1 for k in rule.keywords)
                and all(k[-1] in ":=" for k in rule.keywords)
            ):
                # sig=, accountkey=: found where the names are.
                names.update(tuple(re.escape(c) for c in k[-2::-1]) for k in rule.keywords)
            elif not rule.shape:
                free.append(rule)
        self._names = re.compile(f":{_BEFORE}{_trie(names)}") if names else None
        self._free = tuple(free)
        self._shapes = tuple(sorted({rule.shape for rule in rules if rule.shape}))
        gates: set[str] = set()
        for rule in free:
            gates.update(rule.requires)
            gates.update(char for k in rule.keywords for char in k if char not in _LETTERS)
            gates.update(char for literal in rule.inside for char in literal)
        # Letters and digits are too common to be worth a search.
        self._gates = "".join(sorted(char for char in gates if not char.isalnum()))
        if any(literal == literal.lower() for rule in free for literal in rule.inside):
            raise ValueError("exact-case literals must hold an upper case letter")
        self._gate_set = frozenset(self._gates)
        self._plans: dict[frozenset[str], _Plan] = {}

    def _plan(self, present: frozenset[str]) -> _Plan:
        """What to look for in a text holding the gate characters ``present`` (letters
        and digits are not gates: taken as there)."""
        plan = self._plans.get(present)
        if plan is None:
            by_char: dict[str, set[tuple[str, ...]]] = {}
            finds: dict[str, dict[str, None]] = {}
            literals: dict[str, dict[str, set[tuple[str, ...]]]] = {}
            for rule in self._free:
                required = set(rule.requires)
                if required and required <= self._gate_set and not present & required:
                    continue
                for literal in rule.inside:
                    by_first = literals.setdefault(rule.needs, {})
                    by_first.setdefault(literal[0], set()).add(tuple(map(re.escape, literal[1:])))
                for keyword in () if rule.inside else rule.keywords:
                    if not present.issuperset(set(keyword) & self._gate_set):
                        continue
                    at = _special(keyword)
                    if at > 0:
                        by_char.setdefault(keyword[at], set()).add(
                            tuple(re.escape(c) for c in keyword[at - 1 :: -1])
                        )
                    else:
                        finds.setdefault(rule.needs, {})[keyword] = None
            plan = _Plan(
                _by_char(by_char),
                tuple(
                    (re.compile(needs) if needs else None, _by_first(keywords))
                    for needs, keywords in finds.items()
                ),
                tuple(
                    (re.compile(needs) if needs else None, _by_char(by_first))
                    for needs, by_first in literals.items()
                ),
            )
            self._plans[present] = plan
        return plan

    def clear(self, text: str) -> bool:
        """True when nothing in the JSON text ``text`` can be redacted; False: maybe."""
        if not text.isascii():
            return False
        folded = text.lower()
        low = folded
        if "\\" in text:
            if "\\u" in text or "\\/" in text:
                return False
            low = _without_escapes(folded)
        plan = self._plan(frozenset([char for char in self._gates if char in text]))
        backwards = None
        if self._names is not None and (":" in text or "=" in text):
            backwards = (low.replace("=", ":") if "=" in text else low)[::-1]
            if self._names.search(backwards) is not None:
                return False
        if plan.reversed:
            if backwards is None:
                backwards = low[::-1]
            for pattern in plan.reversed:
                if pattern.search(backwards) is not None:
                    return False
        for needs, patterns in plan.finds:
            if needs is None or needs.search(low) is not None:
                for pattern in patterns:
                    if pattern.search(low) is not None:
                        return False
        for needs, patterns in () if folded == text else plan.literals:
            # (exact-case literals have upper case: AKIA, eyJ)
            if needs is None or needs.search(low) is not None:
                for pattern in patterns:
                    if pattern.search(text) is not None:
                        return False
        # (The shapes mix upper case, lower case and digits: a text without upper case
        # has none.)
        return not self._shapes or folded == text or not self._has_shape(text)

    def _has_shape(self, text: str) -> bool:
        """A run of exactly a shape's length of run characters, in a text with a digit
        (the shapes mix digits and letters). In JSON text the letter of an escape before
        a run joins it (``\\n`` then 40 characters: a run of 41 after a backslash);
        texts with ``\\u`` escapes never get here."""
        if not any(digit in text for digit in "0123456789"):
            return False
        classes = text.encode("ascii").translate(_RUN_TABLE) + b" "
        escapes = "\\" in text
        for length in self._shapes:
            run = b"a" * length
            at = classes.find(run)
            if at == -1:
                continue
            if len(classes) <= _SMALL:
                # Few runs: their lengths at once (a backslash ends a run: one of the
                # shape's length plus one may be an escape's letter and a shaped run).
                lengths = set(map(len, classes.replace(b"\\", b" ").split()))
                if length in lengths or (escapes and length + 1 in lengths):
                    return True
                continue
            while at != -1:
                end = at + length
                if classes[end] != _A:
                    return True
                if at and classes[at - 1] == _BACKSLASH and classes[end + 1] != _A:
                    return True
                end = classes.find(b" ", end)
                slash = classes.find(b"\\", at + length, end) if escapes else -1
                at = classes.find(run, slash if slash != -1 else end)
        return False
