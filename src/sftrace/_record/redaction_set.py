"""Which rules can match anywhere in a JSON text: one pass of one RE2 set.

Most recorded values hold nothing to redact. Before a value is parsed and walked, its
JSON text goes once through an RE2 ``Set`` (a DFA of every pattern at once: linear time,
no backtracking) holding, for each value rule, a *relaxation* of its regex (a pattern
matching at least every text the rule matches), and one pattern for the sensitive
member names. No pattern matches: nothing in the value can be redacted.

The relaxation (:func:`relax`) is built from Python's own parse of the rule's regex, so
built-in rules and ``Redactor(patterns=...)`` alike enter the set:

- it runs on the JSON text, where a string's characters may be escaped: every character
  class also matches the escapes that can stand for one of its characters (``\\n``,
  ``\\"``, ``\\u00e9``...);
- case-insensitive letters are spelled out as classes (``[sS]`` and the long s: the few characters
  Python folds to an ASCII letter, where RE2 differs, are in ``FOLDS``);
- what RE2 lacks is dropped or widened: lookarounds match anywhere, except a one-character
  negative lookbehind starting the pattern (lookahead ending it), which becomes "the
  character before (after) is outside the class, or a quote" (the quote that starts or
  ends a JSON string); backreferences match any text, ``\\b``, ``^`` and ``$`` anywhere;
  ``\\d`` and ``\\w`` are Unicode properties at least as wide as Python's.

Every widening keeps the relaxation a superset, so a text the set clears is one no
rule matches in any of its strings. When the set cannot tell (RE2's DFA ran out of
memory on a pathological text: its end-of-text sentinel is missing from the result, or
the text is not valid UTF-8), the caller takes the slow path.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Sequence
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Final

from sftrace._record.redaction_keys import key_words
from sftrace._record.redaction_rules import Rule
from sftrace._record.redaction_view import may_hold_run

CLEAR: Final = 0  # nothing can match
BUILTIN: Final = 1  # a built-in rule or a sensitive member name may match
ANY: Final = 2  # a rule of your own may match, or the set cannot tell

# Characters other than the letter's two cases that Python's IGNORECASE matches to an
# ASCII letter (tests/test_redaction_set.py checks this against every code point).
FOLDS: Final[dict[str, str]] = {"i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}
# Python's \s on str (str.isspace()).
SPACES: Final[tuple[tuple[int, int], ...]] = (
    (0x09, 0x0D),
    (0x1C, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
_MAX = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
# JSON's short escapes: the character, and the letter after the backslash.
_SHORT = {'"': '"', "\\": "\\\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_UNICODE_ESCAPE = r"u[0-9A-Fa-f]{4}(?:\\u[0-9A-Fa-f]{4})?"
# Counted repeats above this become open-ended (keeps the DFA small; a superset).
_MAX_COUNT = 100
_SEPARATOR = ((0, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, _MAX))  # [^A-Za-z0-9]
_NOT_LETTER = ((0, 0x40), (0x5B, 0x60), (0x7B, _MAX))  # [^A-Za-z]
_ASCII_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_ASCII_SPACES = ((0x09, 0x0D), (0x20, 0x20))


class _Class:
    """A set of characters: code point ranges and RE2 Unicode properties."""

    __slots__ = ("props", "ranges")

    def __init__(self, ranges: Sequence[tuple[int, int]] = (), props: Sequence[str] = ()):
        self.ranges = _normalised(ranges)
        self.props = tuple(props)

    def complement(self) -> _Class:
        """The characters outside (only for a class without properties)."""
        assert not self.props
        gaps: list[tuple[int, int]] = []
        at = 0
        for low, high in self.ranges:
            if low > at:
                gaps.append((at, low - 1))
            at = high + 1
        if at <= _MAX:
            gaps.append((at, _MAX))
        return _Class(gaps)

    def holds(self, char: str) -> bool:
        """Whether ``char`` (ASCII) is in the class (properties hold no ASCII escapes)."""
        code = ord(char)
        return any(low <= code <= high for low, high in self.ranges)

    def pattern(self) -> str:
        """This class in RE2 syntax, matching each character as JSON text may write it."""
        parts = [
            _char(low) if low == high else f"{_char(low)}-{_char(high)}"
            for low, high in _without_surrogates(self.ranges)
        ]
        parts.extend(rf"\p{{{prop}}}" for prop in self.props)
        escapes = "".join(letter for char, letter in _SHORT.items() if self.holds(char))
        alternatives = [f"[{''.join(parts)}]"] if parts else []
        alternatives.append(
            rf"\\(?:[{escapes}]|{_UNICODE_ESCAPE})" if escapes else rf"\\{_UNICODE_ESCAPE}"
        )
        return f"(?:{'|'.join(alternatives)})"


def _char(code: int) -> str:
    return rf"\x{{{code:x}}}"


def _normalised(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return tuple(merged)


def _without_surrogates(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    result: list[tuple[int, int]] = []
    for low, high in ranges:
        if high < _SURROGATES[0] or low > _SURROGATES[1]:
            result.append((low, high))
            continue
        if low < _SURROGATES[0]:
            result.append((low, _SURROGATES[0] - 1))
        if high > _SURROGATES[1]:
            result.append((_SURROGATES[1] + 1, high))
    return result


def _folded(code: int) -> list[tuple[int, int]]:
    """The characters IGNORECASE matches to the character ``code`` (a superset)."""
    char = chr(code)
    if not char.isascii():
        # Every non-ASCII character, and the ASCII letters it folds to (K to k).
        ascii_folds = [
            (c, c) for c in range(0x80) if re.fullmatch(re.escape(char), chr(c), re.IGNORECASE)
        ]
        return [(0x80, _MAX), *ascii_folds]
    if not char.isalpha():
        return [(code, code)]
    low = char.lower()
    return [(ord(c), ord(c)) for c in low + low.upper() + FOLDS.get(low, "")]


def _category(category: Any, flags: int, negated: bool) -> _Class | None:
    """A ``\\d``, ``\\s`` or ``\\w`` (or a negation): a superset of what Python matches,
    or, inside a negated class (``negated``), a subset; None: no such subset."""
    ascii_only = bool(flags & re.ASCII)
    spaces = _Class(_ASCII_SPACES if ascii_only else SPACES)
    digits = _Class([(0x30, 0x39)])
    words = _Class(_ASCII_WORD)
    wide = not ascii_only and not negated
    if negated and not ascii_only and category in (sre.CATEGORY_NOT_DIGIT, sre.CATEGORY_NOT_WORD):
        return None
    table = {
        sre.CATEGORY_DIGIT: _Class(digits.ranges, ["Nd"]) if wide else digits,
        sre.CATEGORY_SPACE: spaces,
        sre.CATEGORY_WORD: _Class(words.ranges, ["L", "N"]) if wide else words,
        sre.CATEGORY_NOT_DIGIT: digits.complement(),
        sre.CATEGORY_NOT_SPACE: spaces.complement(),
        sre.CATEGORY_NOT_WORD: words.complement(),
    }
    return table.get(category)


def _class(items: Sequence[tuple[Any, Any]], flags: int) -> _Class:
    """The characters an ``IN`` item list matches (a superset)."""
    negated = bool(items) and items[0][0] is sre.NEGATE
    ignore = bool(flags & re.IGNORECASE) and not negated
    ranges: list[tuple[int, int]] = []
    props: list[str] = []
    for op, av in items[1:] if negated else items:
        if op is sre.LITERAL:
            ranges.extend(_folded(av) if ignore else [(av, av)])
        elif op is sre.RANGE:
            low, high = av
            ranges.append((low, high))
            if ignore:
                for code in range(low, min(high, 0x7F) + 1):
                    ranges.extend(_folded(code))
                if high >= 0x80:
                    ranges.append((0x80, _MAX))
        elif op is sre.CATEGORY:
            category = _category(av, flags, negated)
            if category is not None:  # (negated: excluding less is wider)
                ranges.extend(category.ranges)
                props.extend(category.props)
        else:
            return _Class([(0, _MAX)])  # anything else: any character
    # Python's negated class under IGNORECASE excludes the listed characters' folds too;
    # excluding only the characters themselves is wider.
    return _Class(ranges).complement() if negated else _Class(ranges, props)


def _exact(item: tuple[Any, Any], flags: int) -> bool:
    """Whether ``_single(item)`` is exactly what Python matches (ASCII, no folds left
    out)."""
    op, av = item
    ignore = bool(flags & re.IGNORECASE)
    if op in (sre.LITERAL, sre.NOT_LITERAL):
        return av < 0x80 and not (op is sre.NOT_LITERAL and ignore and chr(av).isalpha())
    if op is not sre.IN:
        return False
    negated = bool(av) and av[0][0] is sre.NEGATE
    for kind, value in av[1:] if negated else av:
        if kind is sre.CATEGORY:
            if value not in (sre.CATEGORY_SPACE, sre.CATEGORY_NOT_SPACE):
                return False
            continue
        low, high = (value, value) if kind is sre.LITERAL else value
        if kind not in (sre.LITERAL, sre.RANGE) or high >= 0x80:
            return False
        if negated and ignore and any(chr(c).isalpha() for c in range(low, high + 1)):
            return False
    return True


def _single(item: tuple[Any, Any], flags: int) -> _Class | None:
    """The characters a one-character item matches, or None (not one character)."""
    op, av = item
    ignore = bool(flags & re.IGNORECASE)
    if op is sre.LITERAL:
        return _Class(_folded(av) if ignore else [(av, av)])
    if op is sre.NOT_LITERAL:
        return _Class([(av, av)]).complement()
    if op is sre.IN:
        return _class(av, flags)
    if op is sre.ANY:
        return _Class([(0, _MAX)] if flags & re.DOTALL else [(0, 9), (11, _MAX)])
    return None


def _edge(item: tuple[Any, Any], flags: int, before: bool) -> str | None:
    """A one-character negative lookbehind (``before``) or lookahead as a pattern that
    consumes the character: outside the class, or the quote around a JSON string, or the
    text's edge; None when ``item`` is not one."""
    op, av = item
    if op is not sre.ASSERT_NOT or (av[0] == -1) != before or len(av[1]) != 1:
        return None
    if not _exact(av[1][0], flags):
        return None
    inside = _single(av[1][0], flags)
    assert inside is not None
    outside = inside.complement()
    quoted = _Class([*outside.ranges, (0x22, 0x22)])
    return f"(?:{'^' if before else '$'}|{quoted.pattern()})"


def _sequence(items: Sequence[tuple[Any, Any]], flags: int, *, edges: bool = False) -> str:
    parts = []
    last = len(items) - 1
    skip = -1
    for index, item in enumerate(items):
        if index <= skip:
            continue
        edge = None
        if edges and index in (0, last):
            edge = _edge(item, flags, before=index == 0)
        run = _run_holding(items, index, flags)
        if run is not None:
            edge, skip = run
        parts.append(edge if edge is not None else _item(item, flags))
    return "".join(parts)


def _run_holding(
    items: Sequence[tuple[Any, Any]], index: int, flags: int
) -> tuple[str, int] | None:
    """``(?=C*X)`` (more lookaheads may follow) before an exact run ``C{n}`` that the
    next item ends (``(?![C...])``), X within C: the run holding an X, as n branches
    (``[C-X]{k}XC{n-1-k}``: AWS secrets hold an upper case letter, hex ids none); and
    the index of the run. None when the items are not that."""
    op, av = items[index]
    if op is not sre.ASSERT or av[0] != 1 or len(av[1]) != 2:
        return None
    (repeat, (low, high, inner)), needed = list(av[1])
    if repeat is not sre.MAX_REPEAT or low != 0 or high is not sre.MAXREPEAT:
        return None
    at = index + 1
    while at < len(items) and items[at][0] is sre.ASSERT:
        at += 1
    if at + 1 >= len(items) or len(inner) != 1:
        return None
    (kind, count), end = items[at], items[at + 1]
    if kind is not sre.MAX_REPEAT or count[0] != count[1] or list(count[2]) != list(inner):
        return None
    if not 0 < count[0] <= 64 or end[0] is not sre.ASSERT_NOT or end[1][0] != 1:
        return None
    run, need = _single(inner[0], flags), _single(needed, flags)
    after = end[1][1]
    bound = _single(after[0], flags) if len(after) == 1 and _exact(after[0], flags) else None
    if run is None or need is None or bound is None or run.props or need.props:
        return None
    if _minus(run.ranges, bound.ranges) or _minus(need.ranges, run.ranges):
        return None  # (the run might go on, or X be outside it)
    other = _Class(_minus(run.ranges, need.ranges)).pattern()
    length = count[0]
    branches = [
        f"{other}{{{k}}}{need.pattern()}{run.pattern()}{{{length - 1 - k}}}" for k in range(length)
    ]
    return f"(?:{'|'.join(branches)})", at


def _minus(
    ranges: Sequence[tuple[int, int]], taken: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The characters of ``ranges`` outside ``taken``, as ranges."""
    outside = _Class(taken).complement().ranges
    result = []
    for low, high in ranges:
        for out_low, out_high in outside:
            if max(low, out_low) <= min(high, out_high):
                result.append((max(low, out_low), min(high, out_high)))
    return result


def _item(item: tuple[Any, Any], flags: int) -> str:
    op, av = item
    single = _single(item, flags)
    if single is not None:
        return single.pattern()
    if op is sre.SUBPATTERN:
        _, add, remove, inner = av
        return f"(?:{_sequence(list(inner), (flags | add) & ~remove)})"
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(list(b), flags) for b in av[1]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, high, inner = av
        body = f"(?:{_sequence(list(inner), flags)})"
        low = min(low, _MAX_COUNT)
        if high is sre.MAXREPEAT or high > _MAX_COUNT:
            return f"{body}{{{low},}}" if low else f"{body}*"
        return f"{body}{{{low},{high}}}"
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return f"(?:{_sequence(list(av), flags)})"
    if op is sre.GROUPREF_EXISTS:
        _, yes, no = av
        options = [_sequence(list(yes), flags), _sequence(list(no), flags) if no else ""]
        return "(?:" + "|".join(options) + ")"
    if op is sre.GROUPREF:
        return r"(?s:.)*"  # the group's text: some text
    # AT (^ $ \b \A \Z), lookarounds: hold anywhere.
    return ""


def relax(pattern: re.Pattern[str]) -> str:
    """An RE2 pattern matching, in the JSON text of any value, wherever ``pattern`` can
    match one of the value's strings (and possibly elsewhere)."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    return _sequence(list(parsed), parsed.state.flags, edges=True) or "(?s:.)*"


def gate(pattern: re.Pattern[str]) -> str | None:
    """A coarser relaxation of ``pattern`` for the set, when :func:`relax` spells out a
    run holding a character (``(?=C*X)C{n}``: n branches, which multiply the states of
    the set's DFA with those of every other pattern on long runs): the same pattern with
    the lookaheads left out, the run plain. None: ``relax(pattern)`` is the gate."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    flags = parsed.state.flags
    items = list(parsed)
    if not any(_run_holding(items, index, flags) for index in range(len(items))):
        return None
    plain = [item for item in items if item[0] is not sre.ASSERT]
    return _sequence(plain, flags, edges=True) or "(?s:.)*"


def keywords_gate(rule: Rule) -> str:
    """The gate of a built-in rule: an RE2 pattern matching, in a JSON text, wherever one
    of its strings holds one of the literals every match of the rule starts with: its
    exact-case ``inside`` literals (``eyJ``, ``AKIA``: rare in base64) or else its
    ``keywords`` in any case (Python's folds too), escapes and all. Literals only, so a
    set of such gates is a small DFA (Aho-Corasick's) that stays cached whatever the
    text: no counted run (``[A-Za-z0-9]{20,}``) multiplying its states, not even the
    rules' one-character lookbehinds (their JSON escapes are counted)."""
    literals = "|".join(map(re.escape, rule.inside or rule.keywords))
    return relax(re.compile(literals, 0 if rule.inside else re.IGNORECASE))


def counts_runs(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` repeats something at least twice by count (``C{20,}``,
    ``C{16}``): what multiplies the states of a DFA shared with other patterns."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    return _counts(list(parsed))


def _counts(items: Sequence[tuple[Any, Any]]) -> bool:
    for op, av in items:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
            if av[0] >= 2 or _counts(list(av[2])):
                return True
        elif op is sre.SUBPATTERN:
            if _counts(list(av[3])):
                return True
        elif op is sre.BRANCH:
            if any(_counts(list(branch)) for branch in av[1]):
                return True
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            if _counts(list(av[1])):
                return True
        elif op is sre.GROUPREF_EXISTS:
            if any(_counts(list(branch)) for branch in av[1:] if branch):
                return True
        elif op is getattr(sre, "ATOMIC_GROUP", None) and _counts(list(av)):
            return True
    return False


def names_pattern(names: Sequence[str]) -> str:
    """Member names whose trailing words are one of ``names``, before the ``:`` after
    them: each name's letters in either case with anything but a letter or a digit
    between them (``a_pi_key``), then anything but a letter up to ``:``."""
    separator = f"{_Class(_SEPARATOR).pattern()}*"
    spelled = []
    for name in sorted({"".join(key_words(name)) for name in names}):
        letters = [_Class([(ord(c), ord(c)), (ord(c.upper()), ord(c.upper()))]) for c in name]
        spelled.append(separator.join(letter.pattern() for letter in letters))
    return f"(?:{'|'.join(spelled)}){_Class(_NOT_LETTER).pattern()}*:"


class RuleSet:
    """The RE2 set of the value rules ``rules`` (built-in) and ``own`` (yours), and of
    the sensitive member ``names`` (built-in) and ``own_names``; built on first use
    (importing RE2 then).

    Counted runs (``[A-Za-z0-9]{20,}``) kept in one DFA with patterns that can start at
    any letter multiply its states: on values new at every call (ids, hashes) the DFA
    keeps building states it never sees again. So only patterns without them enter the
    set whole; the others enter it by a gate, and their relaxation runs (one RE2 search
    of its own, a small DFA) only when the gate matched:

    - a built-in rule with keywords and a counted run: the gate is its literals
      (:func:`keywords_gate`), so the set's DFA stays small and cached on any text,
      like Aho-Corasick's; built-in rules without counted runs enter whole;
    - a built-in rule with a ``shape`` and no keywords (the AWS secret): no gate in the
      set; :func:`may_hold_run` checks the text for its run at C speed (only in a text
      with both cases of letters, or a ``\\u`` escape: every match holds both);
    - a rule of your own with a :func:`gate`: the gate (the plain run), so a value
      holding a plain run (a git commit id) is still cleared;
    - other rules of your own: their relaxation, whole.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        own: Sequence[Rule],
        *,
        names: Sequence[str] = (),
        own_names: Sequence[str] = (),
        max_mem: int = 64 << 20,
    ) -> None:
        self._patterns: list[str] = []
        self._exact: dict[int, str] = {}  # set index -> the relaxation behind its gate
        self._shaped: list[tuple[int, str]] = []  # (run length, relaxation), outside the set
        for rule in rules:
            if rule.shape and not rule.keywords:
                self._shaped.append((rule.shape, relax(rule.find)))
            else:
                self._add(rule, builtin=True)
        if names:
            self._patterns.append(names_pattern(names))
        self._builtin = len(self._patterns)  # set indexes up to this: built-in
        for rule in own:
            self._add(rule, builtin=False)
        if own_names:
            self._patterns.append(names_pattern(own_names))
        self._match: Callable[[bytes], list[int] | None] | None = None
        self._confirm: dict[int, Callable[[bytes], object]] = {}
        self._shapes: list[tuple[int, Callable[[bytes], object]]] = []
        self._lock = threading.Lock()
        self._max_mem = max_mem

    def _add(self, rule: Rule, *, builtin: bool) -> None:
        relaxed = relax(rule.find)
        if builtin and rule.keywords and counts_runs(rule.find):
            coarse: str | None = keywords_gate(rule)
        else:
            coarse = gate(rule.find)
        if coarse is not None:
            self._exact[len(self._patterns) + 1] = relaxed  # (the sentinel is 0)
        self._patterns.append(coarse or relaxed)

    def _compiled(self) -> Callable[[bytes], list[int] | None]:
        import re2  # type: ignore[import-untyped]

        with self._lock:
            if self._match is None:
                options = re2.Options()
                options.max_mem = self._max_mem
                options.log_errors = False
                compiled = re2.Set.SearchSet(options)
                compiled.Add(r"\z")  # the sentinel: found unless the DFA gave up
                for pattern in self._patterns:
                    try:
                        compiled.Add(pattern)
                    except re2.error:  # beyond RE2's limits: may match anywhere
                        compiled.Add(r"(?s:.)*")
                for index, pattern in self._exact.items():
                    with contextlib.suppress(re2.error):  # (else the gate alone decides)
                        self._confirm[index] = re2.compile(pattern, options).search
                for length, pattern in self._shaped:
                    self._shapes.append((length, _searcher(re2, pattern, options)))
                try:
                    compiled.Compile()
                    # (RE2's own Match, without the wrapper's Python frame)
                    self._match = compiled._set.Match
                except re2.error:  # too big for max_mem: can never tell
                    self._match = _never
        return self._match

    def check(self, json_text: str) -> int:
        """CLEAR, BUILTIN or ANY (see above) for the JSON text ``json_text``."""
        match = self._match or self._compiled()
        try:
            data = json_text.encode()
        except UnicodeEncodeError:  # (lone surrogates)
            return ANY
        found = match(data)
        if not found or 0 not in found:
            return ANY  # (the sentinel, pattern 0, is missing)
        if len(found) > 1 and self._confirm:
            found = [i for i in found if i not in self._confirm or self._confirm[i](data)]
        if len(found) > 1:
            return ANY if max(found) > self._builtin else BUILTIN
        # (find: see may_hold_run)
        if self._shapes and (not (data.islower() or data.isupper()) or data.find(b"\\u") != -1):
            for length, search in self._shapes:
                if may_hold_run(data, length) and search(data):
                    return BUILTIN
        return CLEAR


def _searcher(re2: Any, pattern: str, options: Any) -> Callable[[bytes], object]:
    """The RE2 search of ``pattern``, or one that always finds (beyond RE2's limits)."""
    try:
        search: Callable[[bytes], object] = re2.compile(pattern, options).search
    except re2.error:
        return _always
    return search


def _always(data: bytes) -> bool:
    return True


def _never(data: bytes) -> None:
    """The match of a set that could not be compiled: nothing, not even its sentinel."""
    return None
