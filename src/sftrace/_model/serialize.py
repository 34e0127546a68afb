"""Turning Python values into JSON, canonically.

Values are converted to JSON before they are stored on a span:

- ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples and dicts as JSON;
- dataclasses and pydantic models as objects of their fields; enums as their value;
- ``datetime``/``date``/``time`` as ISO 8601 strings, ``UUID``, ``Decimal`` and paths as
  strings, ``timedelta`` as seconds;
- non-finite floats (NaN, infinities) as ``null``, as JSON has no such numbers; a call's
  result (``dumps(..., nonfinite=paths)``) holds them as the strings ``"NaN"``,
  ``"Infinity"`` and ``"-Infinity"`` instead, and ``paths`` says where, so a replay hands
  back floats (``restore_nonfinite``);
- ``bytes`` as base64 text (of the bytes as the registered bytes filter leaves them:
  recording redacts the text of bytes holding UTF-8 before encoding);
- sets and frozensets as arrays sorted by the canonical JSON of their items (a total
  order over mixed types, independent of the hash seed), also inside pydantic models,
  dataclasses and nested containers;
- anything else through the ``serializer=`` hook (``serializer(value)`` returns a
  JSON-compatible value or raises ``TypeError``), else ``TraceSerializationError``.

Canonical JSON has sorted keys and no insignificant whitespace, so equal values have
equal text: replay compares inputs by it, and digests hash it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import math
import pathlib
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from sftrace._errors import TraceSerializationError

Serializer = Callable[[Any], Any]
JSON = Any  # a JSON-compatible value: None, bool, int, float, str, list or dict of str keys

# Datetimes go through _known (isoformat(), the same text): orjson crashes the process
# on a tzinfo whose utcoffset() raises.
_UNSORTED_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME
)
_OPTIONS = orjson.OPT_SORT_KEYS | _UNSORTED_OPTIONS


_bytes_filter: Callable[[bytes], bytes] | None = None


def register_bytes_filter(bytes_filter: Callable[[bytes], bytes] | None) -> None:
    """Pass every ``bytes`` value through ``bytes_filter`` before it is base64-encoded
    (recording registers its redaction here: a higher layer, so a hook)."""
    global _bytes_filter
    _bytes_filter = bytes_filter


_UNKNOWN = object()


def _known(value: Any, default: Callable[[Any], Any]) -> Any:
    """Conversions orjson does not do natively, or ``_UNKNOWN``.

    ``default`` converts the elements of a set to find their order.
    """
    if _is_model(value):
        return _dump_model(value)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if _bytes_filter is not None:
            data = _bytes_filter(data)
        return base64.b64encode(data).decode("ascii")
    if isinstance(value, set | frozenset):
        return sorted(value, key=lambda item: orjson.dumps(item, default=default, option=_OPTIONS))
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | pathlib.PurePath):
        return str(value)
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return dict(value)
    return _UNKNOWN


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic (v2) model, without importing pydantic: one exists
    only once ``pydantic.main`` is. Not any object with a ``model_dump``: a ``Mock`` has
    one, whose result has one again, ~200 levels deep (seconds per value)."""
    main = sys.modules.get("pydantic.main")
    return main is not None and isinstance(value, main.BaseModel)


def _make_default(serializer: Serializer | None) -> Callable[[Any], Any]:
    def default(value: Any) -> Any:
        converted = _known(value, default)
        if converted is not _UNKNOWN:
            return converted
        if serializer is None:
            raise TypeError(f"{type(value).__qualname__} is not JSON serializable")
        return serializer(value)

    return default


_builtin_default = _make_default(None)


# -- sets inside pydantic models --------------------------------------------------------
# model_dump(mode="json") turns a set into a list in iteration (hash) order. The same
# model dumped in python mode still holds the sets, in the same order: walking both side
# by side finds the lists that were sets, and sorts them.

_MAY_HOLD_SETS = frozenset(
    {"set", "frozenset", "any", "is-instance", "function-plain", "function-wrap", "callable"}
)
_models_with_sets: dict[type, bool] = {}


def _dump_model(model: Any) -> Any:
    dumped = model.model_dump(mode="json")
    cls = type(model)
    may_hold = _models_with_sets.get(cls)
    if may_hold is None:
        may_hold = _models_with_sets[cls] = _schema_may_hold_sets(
            getattr(cls, "__pydantic_core_schema__", None)
        )
    if not may_hold:
        return dumped
    try:
        python = model.model_dump(mode="python")
    except Exception:  # a serializer that works for JSON only: keep pydantic's order
        return dumped
    return _sort_sets(python, dumped)


def _schema_may_hold_sets(schema: Any) -> bool:
    """Whether a pydantic core schema can serialize a set (unknown schemas: yes)."""
    if schema is None:
        return True
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")  # a schema's type, or a field named "type"
            if isinstance(kind, str) and kind in _MAY_HOLD_SETS:
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


def _sort_sets(python: Any, dumped: Any) -> Any:
    """``dumped`` (JSON) with the lists that are sets in ``python`` sorted.

    The python-mode dump holds copies of the sets, which may iterate in another order
    than the JSON lists: a set's items are paired with nothing, just sorted. Items that
    hold sets themselves (a frozenset of frozensets) are converted from python mode.
    """
    if isinstance(python, set | frozenset):
        if not isinstance(dumped, list) or len(dumped) != len(python):
            return dumped
        if any(_holds_set(item) for item in python):
            dumped = [_python_to_json(item) for item in python]
        return sorted(dumped, key=_json_key)
    if isinstance(python, dict):
        if not isinstance(dumped, dict) or len(dumped) != len(python):
            return dumped
        return {
            key: _sort_sets(p, d)
            for p, (key, d) in zip(python.values(), dumped.items(), strict=True)
        }
    if isinstance(python, list | tuple):
        if not isinstance(dumped, list) or len(dumped) != len(python):
            return dumped
        return [_sort_sets(p, d) for p, d in zip(python, dumped, strict=True)]
    return dumped


def _holds_set(value: Any) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if isinstance(value, tuple | list):
        return any(_holds_set(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_set(item) for item in value.values())
    return False


def _python_to_json(value: Any) -> Any:
    """A python-mode dumped value as JSON (pydantic's conversions), every set sorted."""
    from pydantic_core import to_jsonable_python

    def ordered(item: Any) -> Any:
        if isinstance(item, set | frozenset):
            return sorted((_python_to_json(i) for i in item), key=_json_key)
        if isinstance(item, tuple | list):
            return [ordered(i) for i in item]
        if isinstance(item, dict):
            return {key: ordered(i) for key, i in item.items()}
        return item

    return to_jsonable_python(ordered(value))


def _json_key(value: Any) -> bytes:
    return orjson.dumps(value, option=_OPTIONS)


def dumps(
    value: Any,
    *,
    serializer: Serializer | None = None,
    what: str = "value",
    sort_keys: bool = True,
    nonfinite: list[list[str | int]] | None = None,
) -> str:
    """Return the JSON text of ``value``: canonical (sorted keys) unless ``sort_keys=False``.

    Inputs are stored canonically, since replay matches them by text. Outputs keep their
    key order (``sort_keys=False``): a replayed dict must iterate like the original, or an
    agent that re-serializes a tool result would send different text on replay.
    ``what`` names the value in errors (a parameter name, ``"return value"``...).
    Raises ``TraceSerializationError`` naming the JSON path and type that failed.

    Non-finite floats become ``null``; with ``nonfinite`` (a call's result, which a
    replay hands back) they become ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` and their
    paths (lists of keys and indexes) are appended to ``nonfinite``.
    """
    options = _OPTIONS if sort_keys else _UNSORTED_OPTIONS
    default = _builtin_default if serializer is None else _make_default(serializer)
    try:
        data: bytes | None = orjson.dumps(value, default=default, option=options)
    except Exception:
        data = None
    if data is not None:
        text = data.decode()
        # orjson writes a non-finite float as null: only text with a null can hold one.
        if nonfinite is None or "null" not in text or not _holds_nonfinite(value, default):
            return text
        try:
            converted = _convert(value, serializer, what, 0, True)
        except TraceSerializationError:  # a value only orjson takes (a numpy array)
            return text
        nonfinite.extend(_nonfinite_paths(converted))
        return orjson.dumps(converted, option=options).decode()
    # Slow path, only on failure: walk the value to name the offending path.
    converted = _convert(value, serializer, what, 0, nonfinite is not None)
    if nonfinite is not None:
        nonfinite.extend(_nonfinite_paths(converted))
    try:
        return orjson.dumps(converted, option=options).decode()
    except Exception as exc:  # not expected: to_json checks what orjson refuses
        raise _error(what, value, f"{type(exc).__name__}: {exc}") from exc


class _NonFinite(str):
    """The text of a non-finite float in a converted result (found by its class)."""

    __slots__ = ()


_SKIPPED = (
    bytes,
    bytearray,
    memoryview,
    _dt.date,
    _dt.time,
    _dt.timedelta,
    uuid.UUID,
    decimal.Decimal,
    pathlib.PurePath,
)


def _holds_nonfinite(value: Any, default: Callable[[Any], Any]) -> bool:
    """Whether ``value``, which orjson has just written, holds a non-finite float
    (looking into what ``default`` converts, as orjson did)."""
    stack = [value]
    pop, extend, isfinite = stack.pop, stack.extend, math.isfinite
    while stack:
        item = pop()
        cls = type(item)
        if cls is str or cls is int or cls is bool or item is None:
            continue
        if cls is float:
            if not isfinite(item):
                return True
        elif cls is dict:
            extend(item.values())
        elif cls is list:
            extend(item)
        elif isinstance(item, str | int):
            continue
        elif isinstance(item, float):
            if not isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, enum.Enum):
            stack.append(item.value)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, field.name) for field in dataclasses.fields(item))
        elif not isinstance(item, _SKIPPED):
            try:
                stack.append(default(item))
            except Exception:  # what orjson wrote natively (numpy): left as it wrote it
                continue
    return False


def _nonfinite_paths(converted: JSON) -> list[list[str | int]]:
    """The paths of the non-finite floats in a converted value."""
    found: list[list[str | int]] = []
    stack: list[tuple[JSON, list[str | int]]] = [(converted, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _NonFinite):
            found.append(path)
        elif isinstance(item, dict):
            stack.extend((child, [*path, key]) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, [*path, index]) for index, child in enumerate(item))
    found.reverse()
    return found


_NONFINITE_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def restore_nonfinite(value: JSON, paths: Any) -> Any:
    """``value`` (a parsed result) with the strings at ``paths`` (as ``dumps`` appended
    them to ``nonfinite``) turned back into the floats they were. Paths that do not lead
    to such a string are skipped."""
    if not isinstance(paths, list):
        return value
    for path in paths:
        if not isinstance(path, list):
            continue
        if not path:
            if isinstance(value, str) and value in _NONFINITE_FLOATS:
                value = _NONFINITE_FLOATS[value]
            continue
        parent: Any = value
        try:
            for key in path[:-1]:
                parent = parent[key]
            text = parent[path[-1]]
            if isinstance(text, str) and text in _NONFINITE_FLOATS:
                parent[path[-1]] = _NONFINITE_FLOATS[text]
        except (KeyError, IndexError, TypeError):
            continue
    return value


def to_json(value: Any, *, serializer: Serializer | None = None, what: str = "value") -> JSON:
    """Return ``value`` converted to plain JSON-compatible Python values."""
    return _convert(value, serializer, what, 0, False)


# JSON numbers are stored as 64-bit integers (signed, or unsigned when positive).
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _convert(value: Any, serializer: Serializer | None, path: str, depth: int, texts: bool) -> JSON:
    """``texts``: non-finite floats as ``_NonFinite`` texts, not ``None``."""
    try:
        return _convert_value(value, serializer, path, depth, texts)
    except TraceSerializationError:
        raise
    except Exception as exc:  # a model_dump, serializer, property or __iter__ that raises
        raise _error(path, value, f"converting it raised {_describe(exc)}") from exc


def _convert_value(
    value: Any, serializer: Serializer | None, path: str, depth: int, texts: bool
) -> JSON:
    if depth > 200:
        raise _error(path, value, "it is nested more than 200 levels deep (a cycle?)")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _checked_str(value, path)
    if isinstance(value, int):
        if isinstance(value, enum.Enum):
            return _convert(value.value, serializer, path, depth + 1, texts)
        if not _INT_MIN <= value <= _INT_MAX:
            raise _error(path, value, "the integer is outside the 64-bit range of JSON numbers")
        return int(value)
    if isinstance(value, float):
        if isinstance(value, enum.Enum):
            return _convert(value.value, serializer, path, depth + 1, texts)
        if math.isfinite(value):
            return float(value)
        if not texts:
            return None
        return _NonFinite("NaN" if value != value else "Infinity" if value > 0 else "-Infinity")
    if isinstance(value, enum.Enum):
        return _convert(value.value, serializer, path, depth + 1, texts)
    if isinstance(value, dict | Mapping):
        result: dict[str, JSON] = {}
        for key, item in value.items():
            if isinstance(key, enum.Enum):
                key = key.value
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise _error(f"{path}[{key!r}]", key, "dict keys must be strings or numbers")
            name = _checked_str(key, path) if isinstance(key, str) else orjson.dumps(key).decode()
            result[name] = _convert(item, serializer, f"{path}.{name}", depth + 1, texts)
        return result
    if isinstance(value, list | tuple):
        return [
            _convert(item, serializer, f"{path}[{i}]", depth + 1, texts)
            for i, item in enumerate(value)
        ]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _convert(
                getattr(value, f.name), serializer, f"{path}.{f.name}", depth + 1, texts
            )
            for f in dataclasses.fields(value)
        }
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset):  # sorted by the JSON of the converted items
        items = [_convert(item, serializer, f"{path}[]", depth + 1, texts) for item in value]
        return sorted(items, key=_json_key)
    converted = _known(value, _make_default(serializer))
    if converted is _UNKNOWN:
        if serializer is None:
            raise _error(path, value, "it is not JSON-serializable")
        try:
            converted = serializer(value)
        except Exception as exc:
            raise _error(path, value, f"the serializer refused it ({_describe(exc)})") from exc
    return _convert(converted, serializer, path, depth + 1, texts)


def _checked_str(value: str, path: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _error(
            path, value, f"it holds a lone surrogate at index {exc.start} (not valid UTF-8)"
        ) from None
    return value


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__


def _error(path: str, value: Any, why: str) -> TraceSerializationError:
    type_name = type(value).__qualname__
    return TraceSerializationError(
        f"cannot record {path} of type {type_name}: {why}; pass serializer=... "
        f"(a function returning a JSON-compatible value) to trace_tool, llm_request or "
        f"record, or convert the value yourself",
        path=path,
        type_name=type_name,
    )


def loads(text: str | bytes) -> JSON:
    """Parse JSON text."""
    return orjson.loads(text)


def canonical(value: JSON) -> str:
    """Canonical JSON text of an already JSON-compatible value."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
