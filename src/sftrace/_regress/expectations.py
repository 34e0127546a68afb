"""Expectations: the corrected behaviour a regression test states.

An :class:`Expectations` holds an expected output and trajectory expectations on the
calls a replayed run made. It is built in Python or loaded from a JSON or TOML document
with the same keys::

    status = "completed"                  # the default when any expectation is given
    output = { decision = "denied" }      # or a JSON file given separately
    called = ["lookup_order"]
    not_called = ["issue_refund"]
    counts = { lookup_order = 1 }
    order = ["lookup_order", "issue_refund"]   # first calls happen in this order
    sequence = ["lookup_order", "llm"]         # the calls made, in order
    sequence_mode = "strict"                   # or "subsequence": in order, others between
    max_calls = 4
    arguments = [{ name = "lookup_order", call = 1, args = { order_id = "A-1001" } }]

A name matches a tool call by its name, an LLM call by its model, ``provider/model`` or
``llm provider/model``, and ``"llm"`` matches every LLM call.
"""

from __future__ import annotations

import difflib
import itertools
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

import orjson

from sftrace._errors import ConfigError
from sftrace._model import attributes as A
from sftrace._model.calls import Call, CallRef
from sftrace._model.text import pluralize, preview, were
from sftrace._regress.diff import MISSING, value_differences

__all__ = [
    "ArgumentsExpectation",
    "Expectations",
    "expectations_from_files",
    "load_expectations",
    "load_json_value",
]

SequenceMode = Literal["strict", "subsequence"]
_STATUSES: Final = ("completed", "failed")
_SEQUENCE_MODES: Final = ("strict", "subsequence")


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final[Any] = _Unset()


@dataclass(frozen=True, kw_only=True)
class ArgumentsExpectation:
    """The ``call``-th (1-based) call of ``name`` had at least these arguments (each
    compared after normalisation; arguments not named are not checked)."""

    name: str
    args: Mapping[str, Any]
    call: int = 1

    def __post_init__(self) -> None:
        _check_name(self.name, "arguments.name")
        if not isinstance(self.args, Mapping) or not all(isinstance(k, str) for k in self.args):
            raise ConfigError(
                f"arguments.args of {self.name!r} must map argument names to values, got "
                f"{self.args!r}"
            )
        _check_count(self.call, f"arguments.call of {self.name!r}", minimum=1)
        object.__setattr__(self, "args", MappingProxyType(dict(self.args)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "call": self.call, "args": dict(self.args)}


@dataclass(frozen=True, kw_only=True)
class Expectations:
    """The corrected behaviour of a run. Every field is optional; see the module doc.

    ``status`` defaults to ``"completed"`` when the expectations are checked.
    ``output`` is left :data:`UNSET` when no output is expected (``None`` expects a
    JSON ``null``).
    """

    output: Any = UNSET
    status: Literal["completed", "failed"] | None = None
    called: tuple[str, ...] = ()
    not_called: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    arguments: tuple[ArgumentsExpectation, ...] = ()
    order: tuple[str, ...] = ()
    sequence: tuple[str, ...] | None = None
    sequence_mode: SequenceMode = "strict"
    max_calls: int | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in _STATUSES:
            raise ConfigError(f"status must be one of {_STATUSES!r}, got {self.status!r}")
        for name in ("called", "not_called", "order"):
            object.__setattr__(self, name, _names(getattr(self, name), name))
        if self.sequence is not None:
            object.__setattr__(self, "sequence", _names(self.sequence, "sequence"))
        if self.sequence_mode not in _SEQUENCE_MODES:
            raise ConfigError(
                f"sequence_mode must be one of {_SEQUENCE_MODES!r}, got {self.sequence_mode!r}"
            )
        if not isinstance(self.counts, Mapping):
            raise ConfigError(f"counts must map call names to counts, got {self.counts!r}")
        for name, count in self.counts.items():
            _check_name(name, "counts")
            _check_count(count, f"counts[{name!r}]", minimum=0)
        object.__setattr__(self, "counts", MappingProxyType(dict(self.counts)))
        arguments = self.arguments
        if isinstance(arguments, ArgumentsExpectation | Mapping) or not isinstance(
            arguments, Iterable
        ):
            raise ConfigError(f"arguments must be a list, got {arguments!r}")
        object.__setattr__(
            self,
            "arguments",
            tuple(
                item if isinstance(item, ArgumentsExpectation) else _arguments_from(item)
                for item in arguments
            ),
        )
        if len(set(self.order)) != len(self.order):
            raise ConfigError(f"order must name each call once, got {list(self.order)!r}")
        if self.max_calls is not None:
            _check_count(self.max_calls, "max_calls", minimum=0)

    @property
    def has_output(self) -> bool:
        return self.output is not UNSET

    def with_output(self, output: Any) -> Expectations:
        """A copy expecting ``output``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["output"] = output
        return Expectations(**values)

    def to_dict(self) -> dict[str, Any]:
        """The non-default fields, as the JSON/TOML document would hold them."""
        document: dict[str, Any] = {}
        if self.status is not None:
            document["status"] = self.status
        if self.has_output:
            document["output"] = self.output
        for name in ("called", "not_called"):
            if getattr(self, name):
                document[name] = list(getattr(self, name))
        if self.counts:
            document["counts"] = dict(self.counts)
        if self.arguments:
            document["arguments"] = [item.to_dict() for item in self.arguments]
        if self.order:
            document["order"] = list(self.order)
        if self.sequence is not None:
            document["sequence"] = list(self.sequence)
            if self.sequence_mode != "strict":
                document["sequence_mode"] = self.sequence_mode
        if self.max_calls is not None:
            document["max_calls"] = self.max_calls
        return document

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "expectations") -> Expectations:
        """Build from a JSON/TOML document; ``ConfigError`` names ``source`` and the key."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a table of expectations, got {data!r}")
        known = [f.name for f in fields(cls)]
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(
                    f"{source}: unknown expectation {key!r}{hint}; expected one of "
                    f"{', '.join(known)}"
                )
            if key in ("called", "not_called", "order", "sequence") and isinstance(value, list):
                value = tuple(value)
            values[key] = value
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{what}: call names must be non-empty strings, got {name!r}")


def _check_count(value: Any, what: str, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{what} must be an integer >= {minimum}, got {value!r}")


def _names(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"{what} must be a list of call names, got {value!r}")
    names = tuple(value)
    for name in names:
        _check_name(name, what)
    return names


def _arguments_from(item: Any) -> ArgumentsExpectation:
    if not isinstance(item, Mapping):
        raise ConfigError(
            f"each arguments entry must be a table like {{name = 'tool', call = 1, args = "
            f"{{...}}}}, got {item!r}"
        )
    unknown = set(item) - {"name", "call", "args"}
    if unknown:
        raise ConfigError(
            f"arguments entry {dict(item)!r}: unknown keys {sorted(unknown)!r}; expected "
            f"name, call and args"
        )
    if "name" not in item or "args" not in item:
        raise ConfigError(f"arguments entry {dict(item)!r} needs 'name' and 'args'")
    return ArgumentsExpectation(name=item["name"], args=item["args"], call=item.get("call", 1))


# --- loading -----------------------------------------------------------------------


def _read_document(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{str(path)!r} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{str(path)!r} is a directory, not a JSON or TOML file") from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None


def load_expectations(path: str | os.PathLike[str]) -> Expectations:
    """Load an expectations document (``.toml``, else JSON) from ``path``."""
    target = Path(path)
    return Expectations.from_mapping(_read_document(target), source=str(target))


def load_json_value(path: str | os.PathLike[str]) -> Any:
    """The JSON value held by the file at ``path`` (an expected output)."""
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"expected output file {str(target)!r} not found") from None
    except IsADirectoryError:
        raise ConfigError(
            f"expected output {str(target)!r} is a directory, not a JSON file"
        ) from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{target}: invalid JSON: {exc}") from None


def expectations_from_files(
    expect_output: str | os.PathLike[str] | None,
    expect_trajectory: str | os.PathLike[str] | None,
) -> Expectations | None:
    """The expectations of ``--expect-output FILE`` (a JSON file holding the corrected
    output) and ``--expect-trajectory FILE`` (an expectations document), or None."""
    expectations = load_expectations(expect_trajectory) if expect_trajectory is not None else None
    if expect_output is not None:
        if expectations is not None and expectations.has_output:
            raise ConfigError(
                f"{expect_trajectory} already sets 'output'; drop it there or omit --expect-output"
            )
        expectations = (expectations or Expectations()).with_output(load_json_value(expect_output))
    return expectations


# --- checks ------------------------------------------------------------------------


def matches(call: Call, name: str) -> bool:
    """Whether ``name`` names ``call`` (see the module doc)."""
    if call.kind == A.KIND_LLM:
        if name == "llm" or name == call.name or name == call.label:
            return True
        return call.provider is not None and name == f"{call.provider}/{call.name}"
    return name == call.name


def display_name(call: Call) -> str:
    if call.kind == A.KIND_LLM and call.provider:
        return f"{call.provider}/{call.name}"
    return call.name


def _ref(calls: Sequence[Call], index: int) -> CallRef:
    return CallRef.of(calls[index], index + 1)


def _made(calls: Sequence[Call], limit: int = 20) -> str:
    if not calls:
        return "no calls were made"
    names = [display_name(call) for call in calls[:limit]]
    more = f", ... ({len(calls) - limit} more)" if len(calls) > limit else ""
    return f"calls made: {', '.join(names)}{more}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _ordinal(number: int) -> str:
    suffix = (
        "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


def _indexes(calls: Sequence[Call], name: str) -> list[int]:
    # Every check looks its names up here: a list passed for one name (which no call
    # matches, so "not called" would pass whatever the agent did) is refused.
    _check_name(name, "expected calls")
    return [index for index, call in enumerate(calls) if matches(call, name)]


def check_called(calls: Sequence[Call], name: str) -> str | None:
    if _indexes(calls, name):
        return None
    return f"expected {name!r} to be called, but it was not ({_made(calls)})"


def check_not_called(calls: Sequence[Call], name: str) -> tuple[str, CallRef] | None:
    found = _indexes(calls, name)
    if not found:
        return None
    first = _ref(calls, found[0])
    return (
        f"expected {name!r} not to be called, but it was called {_times(len(found))} "
        f"(first: {first}, input {preview(calls[found[0]].input, 80)})",
        first,
    )


def check_count(calls: Sequence[Call], name: str, count: int) -> str | None:
    _check_count(count, "the expected number of calls", minimum=0)
    found = len(_indexes(calls, name))
    if found == count:
        return None
    return f"expected {name!r} to be called {_times(count)}, but it was called {_times(found)}"


def check_max_calls(calls: Sequence[Call], maximum: int, name: str | None = None) -> str | None:
    found = len(calls) if name is None else len(_indexes(calls, name))
    if found <= maximum:
        return None
    what = "calls in all" if name is None else f"calls of {name!r}"
    return f"expected at most {maximum} {what}, but {found} were made ({_made(calls)})"


def check_arguments(
    calls: Sequence[Call], name: str, args: Mapping[str, Any], call: int = 1
) -> tuple[str, CallRef | None] | None:
    found = _indexes(calls, name)
    if len(found) < call:
        return (
            f"expected a {_ordinal(call)} call of {name!r} with arguments "
            f"{preview(dict(args), 80)}, "
            f"but it was called {_times(len(found))}",
            None,
        )
    index = found[call - 1]
    ref = _ref(calls, index)
    actual = calls[index].input
    if not isinstance(actual, Mapping):
        actual = {}
    problems = []
    for key, want in args.items():
        differences, _ = value_differences(want, actual.get(key, MISSING))
        if differences:
            have = actual.get(key, MISSING)
            problems.append(
                f"{key}={preview(have, 80) if have is not MISSING else '<missing>'} "
                f"(expected {preview(want, 80)})"
            )
    if not problems:
        return None
    return (
        f"the {_ordinal(call)} call of {name!r} ({ref}) had {', '.join(problems)}",
        ref,
    )


def check_order(calls: Sequence[Call], names: Sequence[str]) -> str | None:
    firsts: list[tuple[str, int]] = []
    for name in names:
        found = _indexes(calls, name)
        if not found:
            return f"expected {name!r} to be called (order {list(names)!r}), but it was not"
        firsts.append((name, found[0]))
    for (before, at), (after, later) in itertools.pairwise(firsts):
        if later < at:
            return (
                f"expected {before!r} before {after!r}, but the first {after!r} is call "
                f"{later + 1} and the first {before!r} call {at + 1} ({_made(calls)})"
            )
    return None


def check_sequence(
    calls: Sequence[Call], names: Sequence[str], mode: SequenceMode = "strict"
) -> str | None:
    if mode == "strict":
        for position, (call, name) in enumerate(zip(calls, names, strict=False), start=1):
            if not matches(call, name):
                return (
                    f"expected the call sequence {list(names)!r}, but call {position} is "
                    f"{display_name(call)!r} instead of {name!r} ({_made(calls)})"
                )
        if len(calls) != len(names):
            return (
                f"expected the call sequence {list(names)!r} ({pluralize(len(names), 'call')}), "
                f"but {pluralize(len(calls), 'call')} {were(len(calls))} made ({_made(calls)})"
            )
        return None
    position = 0
    for index, name in enumerate(names):
        while position < len(calls) and not matches(calls[position], name):
            position += 1
        if position == len(calls):
            return (
                f"expected the calls {list(names)!r} in this order, but found only "
                f"{list(names[:index])!r} before running out ({_made(calls)})"
            )
        position += 1
    return None


def unmet_expectations(
    calls: Sequence[Call], expect: Expectations
) -> list[tuple[str, CallRef | None]]:
    """Every trajectory expectation of ``expect`` that ``calls`` do not meet."""
    return [(message, ref) for _, message, ref in _unmet(calls, expect)]


def unknown_names(expect: Expectations, *runs: Sequence[Call]) -> list[str]:
    """The call names ``expect`` uses that name no call of any of ``runs`` (a typo, a tool
    renamed since): a ``not_called`` or a count of 0 of them holds whatever the agent does."""
    names = [
        *expect.called,
        *expect.not_called,
        *expect.counts,
        *(item.name for item in expect.arguments),
        *expect.order,
        *(expect.sequence or ()),
    ]
    unknown: list[str] = []
    for name in dict.fromkeys(names):
        if not any(matches(call, name) for calls in runs for call in calls):
            unknown.append(name)
    return unknown


def unmet_expectation_keys(calls: Sequence[Call], expect: Expectations) -> list[str]:
    """Which trajectory expectations ``calls`` do not meet, each named by a key that does
    not depend on the calls (``not_called:issue_refund``, ``arguments:1``, ``order``)."""
    return [key for key, _, _ in _unmet(calls, expect)]


def _unmet(calls: Sequence[Call], expect: Expectations) -> list[tuple[str, str, CallRef | None]]:
    unmet: list[tuple[str, str, CallRef | None]] = []
    for name in expect.called:
        message = check_called(calls, name)
        if message:
            unmet.append((f"called:{name}", message, None))
    for name in expect.not_called:
        found = check_not_called(calls, name)
        if found:
            unmet.append((f"not_called:{name}", *found))
    for name, count in expect.counts.items():
        message = check_count(calls, name, count)
        if message:
            unmet.append((f"counts:{name}", message, None))
    for number, item in enumerate(expect.arguments, start=1):
        found_args = check_arguments(calls, item.name, item.args, item.call)
        if found_args:
            unmet.append((f"arguments:{number}", *found_args))
    if expect.order:
        message = check_order(calls, expect.order)
        if message:
            unmet.append(("order", message, None))
    if expect.sequence is not None:
        message = check_sequence(calls, expect.sequence, expect.sequence_mode)
        if message:
            unmet.append(("sequence", message, None))
    if expect.max_calls is not None:
        message = check_max_calls(calls, expect.max_calls)
        if message:
            unmet.append(("max_calls", message, None))
    return unmet
