"""Rebuilding a recorded call's exception, so the agent's own handlers catch it again.

In order:

1. A recorded ``asyncio.CancelledError`` stays a ``CancelledError`` (agents handle it).
2. A registered :class:`~sftrace._record.failure.ErrorCodec` (an SDK integration) gives
   the SDK's own error object (``openai.BadRequestError`` with its status and body).
3. The recorded class, when a module that is already imported holds it: an instance
   with the recorded args (or message), and the attributes recorded of it (those whose
   values were plain JSON) set again. Nothing a bundle names is ever imported, and
   nothing that is not an exception class is ever called.
4. Otherwise ``RecordedDependencyError`` with the recorded type name and message.

A recorded exception outside ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
``GeneratorExit``...) becomes ``RecordedInterruption``: raising it would stop the
process that replays it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from typing import Any

import orjson

from sftrace._errors import RecordedDependencyError, RecordedInterruption
from sftrace._internal import log_once
from sftrace._model.calls import CallFailure
from sftrace._record.failure import error_codecs
from sftrace._record.run import imported_object


def rebuild_exception(failure: CallFailure) -> BaseException:
    """The exception a recorded failed call raises again (see the module docstring)."""
    if failure.cancelled:
        return asyncio.CancelledError(failure.message)
    for codec in error_codecs():
        try:
            rebuilt = codec.rebuild(failure)
        except Exception as exc:  # a codec's bug must not turn a failure into a crash
            log_once(f"rebuilding a recorded {codec.name} error", exc)
            continue
        if rebuilt is not None:
            return rebuilt
    cls = _recorded_class(failure)
    if cls is None:
        return RecordedDependencyError(failure.type, failure.message)
    if not issubclass(cls, Exception):
        return RecordedInterruption(failure.type, failure.message)
    try:
        instance = _instance(cls, _args(failure))
    except Exception as exc:  # a class that cannot be built at all, even without __init__
        log_once(f"rebuilding a recorded {failure.type}", exc)
        return RecordedDependencyError(failure.type, failure.message)
    _set_fields(instance, failure)
    _set_cause(instance, failure.cause_json, 0)
    return instance


def _recorded_class(failure: CallFailure) -> type[BaseException] | None:
    """The recorded exception class, found only among builtins and imported modules."""
    if failure.builtin or "." not in failure.type:
        found: Any = getattr(builtins, failure.type, None)
    else:
        found = imported_object(failure.type)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


def _args(failure: CallFailure) -> tuple[Any, ...]:
    """The recorded args; the message alone for bundles without them (or unreadable)."""
    if failure.args_json is not None:
        try:
            args = orjson.loads(failure.args_json)
        except orjson.JSONDecodeError:
            args = None
        if isinstance(args, list):
            return tuple(args)
    return (failure.message,)


def _set_fields(instance: BaseException, failure: CallFailure) -> None:
    """Set the attributes recorded of the exception (``sftrace.error.fields``) on the
    rebuilt one: its ``__init__`` may not have run, or may have set other values."""
    if failure.fields_json is None:
        return
    try:
        fields = orjson.loads(failure.fields_json)
    except orjson.JSONDecodeError:
        return
    if not isinstance(fields, dict):
        return
    for name, value in fields.items():
        if name == "__notes__":  # add_note's
            if isinstance(value, list) and all(isinstance(note, str) for note in value):
                instance.__notes__ = value
            continue
        if not name.isidentifier() or name.startswith("__"):  # (sftrace records none)
            continue
        try:
            setattr(instance, name, value)
        except Exception:  # a read-only property, a __slots__ class: keep what it has
            continue


# How deep a recorded chain of causes is rebuilt (sftrace records 4).
_CAUSE_DEPTH = 8


def _set_cause(instance: BaseException, cause_json: str | None, depth: int) -> None:
    """Rebuild the exception ``instance`` was raised from (``sftrace.error.cause``) and
    chain it as it was: ``__cause__`` for ``raise ... from``, else ``__context__``."""
    if cause_json is None or depth >= _CAUSE_DEPTH:
        return
    try:
        cause = orjson.loads(cause_json)
    except orjson.JSONDecodeError:
        return
    while isinstance(cause, dict) and depth < _CAUSE_DEPTH:
        failure = CallFailure(
            type=str(cause.get("type", "")),
            message=str(cause.get("message", "")),
            builtin=cause.get("builtin") is True,
            args_json=_dumped(cause.get("args")),
            fields_json=_dumped(cause.get("fields")),
        )
        rebuilt = rebuild_exception(failure)
        if cause.get("suppress_context") is True:
            rebuilt.__suppress_context__ = True
        if cause.get("explicit") is True:
            instance.__cause__ = rebuilt
        else:
            instance.__context__ = rebuilt
        instance, cause, depth = rebuilt, cause.get("cause"), depth + 1


def _dumped(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _instance(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """``cls(*args)`` with ``args`` as recorded; when its constructor refuses them, an
    instance built without it.

    The recorded ``args`` are what the exception held, which a constructor that formats
    its message (``super().__init__(f"order {order_id} not found")``) does not take back
    unchanged: they are set again after it ran, so ``str(exc)`` is the recorded message.
    """
    try:
        instance = cls(*args)
    except Exception:
        pass
    else:
        if instance.args != args:
            with contextlib.suppress(Exception):  # a class whose args refuse to be set
                instance.args = args
        return instance
    # BaseException.__new__ sets args; the class's own __init__ (which needs other
    # arguments) is not called, so attributes it would set are missing.
    instance = cls.__new__(cls, *args)
    instance.args = args
    return instance


__all__ = ["rebuild_exception"]
