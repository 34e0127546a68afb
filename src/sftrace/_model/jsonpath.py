"""JSON paths: the one grammar for every path sftrace reads or shows.

Mismatch messages, diff and compare findings, redaction records, comparison-policy
``ignore_paths`` and the integrations' ``ignore_fields`` all go through this module.

Grammar (documented for users in docs/regression-tests.md, "JSON paths")::

    path    := [ "$" ] [ first ] { step }
    first   := name | bracket            (only when the path has no leading "$")
    step    := "." name | bracket
    name    := "*" | index | key         (a run of characters other than . [ ] ' ")
    bracket := "[" ( "*" | index | quoted ) "]"
    index   := 0 | [1-9][0-9]*           (at most MAX_INDEX)
    quoted  := a JSON string ("...") or a Python string literal ('...')

``*`` (bare, dotted or in brackets) matches any one key or list index; a quoted ``"*"``
is the key named ``*``. A number names a list index (``messages.0`` is the same as
``messages[0]``); an object key made of digits is written quoted (``["0"]``).

The canonical form, which is what sftrace writes: ``$`` then ``.key`` for keys that are
ASCII identifiers, ``["key"]`` (a JSON string) for every other key, ``[N]`` for indices
and ``[*]`` for the wildcard: ``$.messages[0].content``, ``$.headers["x-api-key"]``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sftrace._errors import ConfigError

__all__ = [
    "MAX_INDEX",
    "WILDCARD",
    "JsonPath",
    "Segment",
    "child",
    "first_match",
    "format_path",
    "parse_paths",
    "strip",
]


class _Wildcard:
    __slots__ = ()

    def __repr__(self) -> str:
        return "WILDCARD"


# ``*``: any one key or list index.
WILDCARD: Final = _Wildcard()
# The largest list index a path may name.
MAX_INDEX: Final = 2**31 - 1

Segment = str | int  # one step of a concrete path: an object key or a list index
PatternSegment = str | int | _Wildcard

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[^.\[\]'\"]+")
_NUMBER = re.compile(r"-?[0-9]+\Z")
_BRACKET = re.compile(
    r"""\[(?:(?P<star>\*)|(?P<number>-?[0-9]+)|(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))\]""",
    re.DOTALL,
)
_GRAMMAR: Final = (
    "expected dotted paths such as 'reply.generated_at' or '$.messages[0].content', with "
    "'*' for any key or index ('items.*.id'), [N] for a list index (0 to "
    f'{MAX_INDEX}) and ["key"] for keys with dots, spaces or quotes '
    "(see 'JSON paths' in docs/regression-tests.md)"
)


def child(path: str, segment: Segment) -> str:
    """``path`` (canonical text) extended by one key or index, in canonical form."""
    if isinstance(segment, int):
        return f"{path}[{segment}]"
    if _IDENTIFIER.match(segment):
        return f"{path}.{segment}"
    return f"{path}[{json.dumps(segment, ensure_ascii=False)}]"


def format_path(segments: Iterable[PatternSegment]) -> str:
    """The canonical text of a path: ``("items", 2, "a b")`` -> ``$.items[2]["a b"]``."""
    text = "$"
    for segment in segments:
        text = f"{text}[*]" if isinstance(segment, _Wildcard) else child(text, segment)
    return text


def _same(want: PatternSegment, have: Segment) -> bool:
    return isinstance(want, _Wildcard) or (type(want) is type(have) and want == have)


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A parsed JSON path; with ``*`` it names every path it matches.

    ``str()`` gives the canonical form. A path also covers everything below what it
    names: ``reply`` matches ``$.reply.generated_at``.
    """

    segments: tuple[PatternSegment, ...]

    @classmethod
    def parse(cls, text: object, *, what: str = "JSON path", allow_root: bool = True) -> JsonPath:
        """Parse ``text``; raise ``ConfigError`` (a ``ValueError``) naming it if malformed.

        ``what`` names the setting in the message; with ``allow_root=False`` a path
        naming the whole value (``$`` or the empty string) is refused.
        """
        if not isinstance(text, str):
            raise ConfigError(f"invalid {what} {text!r}: not a string; {_GRAMMAR}")
        segments = _parse(text.strip(), text, what)
        if not segments and not allow_root:
            raise ConfigError(f"invalid {what} {text!r}: it names nothing; {_GRAMMAR}")
        return cls(tuple(segments))

    def __str__(self) -> str:
        return format_path(self.segments)

    def matches(self, path: Sequence[Segment]) -> bool:
        """Whether ``path`` is named by this path or lies below a path it names."""
        if len(path) < len(self.segments):
            return False
        return all(_same(want, have) for want, have in zip(self.segments, path, strict=False))

    def walk(self, value: Any) -> Iterator[tuple[tuple[Segment, ...], Any]]:
        """Every ``(path, item)`` in ``value`` this path names, in document order."""
        yield from _walk(value, self.segments, ())


def _parse(body: str, text: str, what: str) -> list[PatternSegment]:
    if body.startswith("$"):
        body = body[1:]
    elif body.startswith("."):
        raise _bad(text, what, "a leading '.' without '$'")
    elif body and not body.startswith("["):
        body = "." + body  # a first key without "$"
    position = 0
    segments: list[PatternSegment] = []
    while position < len(body):
        if body.startswith(".", position):
            name = _NAME.match(body, position + 1)
            if name is None or not name.group().strip():
                raise _bad(text, what, "an empty key")
            segments.append(_name_segment(name.group(), text, what))
            position = name.end()
            continue
        bracket = _BRACKET.match(body, position)
        if bracket is None:
            raise _bad(text, what, f"unexpected {body[position:]!r}")
        segments.append(_bracket_segment(bracket, text, what))
        position = bracket.end()
    return segments


def _name_segment(name: str, text: str, what: str) -> PatternSegment:
    if name == "*":
        return WILDCARD
    if _NUMBER.match(name):
        return _index(name, text, what)
    return name


def _bracket_segment(bracket: re.Match[str], text: str, what: str) -> PatternSegment:
    if bracket.group("star"):
        return WILDCARD
    number = bracket.group("number")
    if number is not None:
        return _index(number, text, what)
    quoted = bracket.group("quoted")
    try:
        key = json.loads(quoted) if quoted.startswith('"') else None
    except ValueError:
        key = None
    if key is None:
        try:
            key = ast.literal_eval(quoted)  # Python's repr of a key: 'a b', "it's"
        except (ValueError, SyntaxError) as exc:
            raise _bad(text, what, f"the quoted key {quoted} is not a valid string") from exc
    if not isinstance(key, str):
        raise _bad(text, what, f"the quoted key {quoted} is not a string")
    return key


def _index(number: str, text: str, what: str) -> int:
    if number.startswith("-"):
        raise _bad(text, what, f"negative list index {number}")
    if len(number) > 1 and number.startswith("0"):
        raise _bad(text, what, f"list index {number} has a leading zero")
    index = int(number)
    if index > MAX_INDEX:
        raise _bad(text, what, f"list index {number} is larger than {MAX_INDEX}")
    return index


def _bad(text: str, what: str, reason: str) -> ConfigError:
    return ConfigError(f"invalid {what} {text!r}: {reason}; {_GRAMMAR}")


def parse_paths(texts: object, *, what: str, allow_root: bool = False) -> tuple[JsonPath, ...]:
    """Parse a list of paths naming parts of a value (one string is taken as a list of
    one); raise ``ConfigError`` on a malformed one, or on one naming the whole value
    unless ``allow_root``."""
    if isinstance(texts, str):
        texts = (texts,)
    if not isinstance(texts, Iterable):
        raise ConfigError(f"{what} must be a list of JSON path strings, got {texts!r}")
    return tuple(JsonPath.parse(text, what=what, allow_root=allow_root) for text in texts)


def first_match(path: Sequence[Segment], patterns: Sequence[JsonPath]) -> JsonPath | None:
    """The first of ``patterns`` that matches ``path``, if any."""
    for pattern in patterns:
        if pattern.matches(path):
            return pattern
    return None


def _walk(
    value: Any, rest: tuple[PatternSegment, ...], at: tuple[Segment, ...]
) -> Iterator[tuple[tuple[Segment, ...], Any]]:
    if not rest:
        yield at, value
        return
    want, below = rest[0], rest[1:]
    if isinstance(value, dict):
        for key, item in value.items():
            if _same(want, key):
                yield from _walk(item, below, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if _same(want, index):
                yield from _walk(item, below, (*at, index))


def strip(value: Any, patterns: Sequence[JsonPath]) -> Any:
    """A copy of ``value`` without what ``patterns`` name: a named object member is
    removed, a named list item becomes ``None`` (so later indices keep their meaning).
    Parts nothing names are shared with ``value``, not copied."""
    remaining = [pattern.segments for pattern in patterns]
    if not remaining:
        return value
    if any(not segments for segments in remaining):
        return None
    return _strip(value, remaining)


def _strip(value: Any, remaining: list[tuple[PatternSegment, ...]]) -> Any:
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            named, below = _step(remaining, key)
            if not named:
                kept[key] = _strip(item, below) if below else item
        return kept
    if isinstance(value, list):
        items: list[Any] = []
        for index, item in enumerate(value):
            named, below = _step(remaining, index)
            items.append(None if named else _strip(item, below) if below else item)
        return items
    return value


def _step(
    remaining: list[tuple[PatternSegment, ...]], segment: Segment
) -> tuple[bool, list[tuple[PatternSegment, ...]]]:
    """Whether a pattern ends at ``segment``, and the rest of those that go below it."""
    below: list[tuple[PatternSegment, ...]] = []
    for segments in remaining:
        if _same(segments[0], segment):
            if len(segments) == 1:
                return True, []
            below.append(segments[1:])
    return False, below
