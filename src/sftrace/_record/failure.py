"""What a failed call records so that a replay can raise its exception again.

Every failure records the exception's ``args`` as JSON (redacted). An SDK integration
registers an :class:`ErrorCodec` that knows its SDK's errors: ``describe`` gives the
HTTP status code and response body a recording stores (the body redacted), ``rebuild``
turns a recorded failure back into the SDK's own error object during a replay. The
integrations register themselves when imported; this layer never imports them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sftrace._errors import TraceSerializationError
from sftrace._internal import log_once
from sftrace._model import attributes as A
from sftrace._model.calls import CallFailure
from sftrace._model.serialize import dumps
from sftrace._record.redaction import KnownSecrets, Redactor
from sftrace._record.run import exception_type_name, safe_str


@dataclass(frozen=True, slots=True)
class ErrorDetails:
    """What an SDK error carries besides its message: HTTP status and response body."""

    status_code: int | None = None
    body: Any = None
    # The response headers a handler may read (retry-after, request and rate-limit ids).
    headers: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ErrorCodec:
    """How one SDK's errors are recorded and rebuilt.

    ``describe(exc)``: the details of one of the SDK's errors, or None for any other
    exception. ``rebuild(failure)``: the SDK's error object for a recorded failure, or
    None when the failure is not one of the SDK's errors. Neither may raise (what they
    raise is logged and ignored).
    """

    name: str
    describe: Callable[[BaseException], ErrorDetails | None]
    rebuild: Callable[[CallFailure], BaseException | None]


_codecs: dict[str, ErrorCodec] = {}
_lock = threading.Lock()


def register_error_codec(codec: ErrorCodec) -> None:
    """Register (or replace, by name) how an SDK's errors are recorded and rebuilt."""
    with _lock:
        _codecs[codec.name] = codec


def error_codecs() -> tuple[ErrorCodec, ...]:
    with _lock:
        return tuple(_codecs.values())


def failure_details(
    exc: BaseException, redactor: Redactor, known: KnownSecrets | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The span attributes that let a replay rebuild ``exc``, and where they were redacted.

    The args are left out when they are not JSON (an object without a serializer): the
    replay then rebuilds the exception from its message. The exception's own attributes
    (``self.order = order`` in its ``__init__``) are kept where their values are plain
    JSON, which comes back as the same value: a handler reading ``exc.order`` finds it
    on the rebuilt exception too, also when the constructor takes other arguments than
    ``args`` holds.
    """
    attributes: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    args_json = _json(list(exc.args), "exception args")
    if args_json is not None:
        args_json, found = redactor.redact_json(args_json, known=known, sort_keys=False)
        attributes[A.ERROR_ARGS] = args_json
        records.extend(redaction.record("error.args") for redaction in found)
    fields = _plain_fields(exc)
    fields_json = _json(fields, "exception attributes") if fields else None
    if fields_json is not None:
        fields_json, found = redactor.redact_json(fields_json, known=known, sort_keys=False)
        attributes[A.ERROR_FIELDS] = fields_json
        records.extend(redaction.record("error.fields") for redaction in found)
    cause = _cause(exc)
    cause_json = _json(cause, "exception cause") if cause is not None else None
    if cause_json is not None:
        cause_json, found = redactor.redact_json(cause_json, known=known, sort_keys=False)
        attributes[A.ERROR_CAUSE] = cause_json
        records.extend(redaction.record("error.cause") for redaction in found)
    details = _describe(exc)
    if details is not None:
        if isinstance(details.status_code, int) and not isinstance(details.status_code, bool):
            attributes[A.ERROR_STATUS_CODE] = details.status_code
        body_json = _json(details.body, "error body") if details.body is not None else None
        if body_json is not None:
            body_json, found = redactor.redact_json(body_json, known=known, sort_keys=False)
            attributes[A.ERROR_BODY] = body_json
            records.extend(redaction.record("error.body") for redaction in found)
        headers_json = _json(details.headers, "error headers") if details.headers else None
        if headers_json is not None:
            headers_json, found = redactor.redact_json(headers_json, known=known, sort_keys=False)
            attributes[A.ERROR_HEADERS] = headers_json
            records.extend(redaction.record("error.headers") for redaction in found)
    return attributes, records


def _describe(exc: BaseException) -> ErrorDetails | None:
    for codec in error_codecs():
        try:
            details = codec.describe(exc)
        except Exception as error:  # never break the host over what an error records
            log_once(f"describing a {codec.name} error", error)
            continue
        if details is not None:
            return details
    return None


# How many exceptions back a chain (``raise ... from``, or raised while handling) is kept.
_CAUSE_DEPTH = 4


def _cause(exc: BaseException) -> dict[str, Any] | None:
    """The exception ``exc`` was raised from, as a replay rebuilds it, and so on back
    (at most ``_CAUSE_DEPTH``): ``{"type", "message", "builtin", "explicit", "args",
    "fields", "suppress_context", "cause"}``. ``explicit``: it is ``__cause__`` (``raise
    ... from``), else ``__context__`` (raised while handling it). A handler reading
    ``exc.__cause__`` finds it on the rebuilt exception too."""
    chain: list[dict[str, Any]] = []
    seen = {id(exc)}
    current = exc
    while len(chain) < _CAUSE_DEPTH:
        explicit = current.__cause__ is not None
        link = current.__cause__ if explicit else None
        if link is None and not current.__suppress_context__:
            link = current.__context__
        if link is None or id(link) in seen:
            break
        seen.add(id(link))
        type_name, builtin = exception_type_name(link)
        entry: dict[str, Any] = {
            "type": type_name,
            "message": safe_str(link),
            "builtin": builtin,
            "explicit": explicit,
        }
        args = list(link.args)
        size = _plain_size(args, _PLAIN_BUDGET)
        if size is not None and size <= _PLAIN_BUDGET:
            entry["args"] = args
        fields = _plain_fields(link)
        if fields:
            entry["fields"] = fields
        if link.__suppress_context__:  # raised "from None", or from a cause
            entry["suppress_context"] = True
        chain.append(entry)
        current = link
    if not chain:
        return None
    for outer, inner in itertools.pairwise(chain):
        outer["cause"] = inner
    return chain[0]


# How many values (items of lists and dicts included) the attributes of one exception
# may hold and still be recorded: a list that holds itself, or one shared many times
# over, must not keep a failing call busy.
_PLAIN_BUDGET = 100_000


def _plain_fields(exc: BaseException) -> dict[str, Any]:
    """The exception's own attributes (its ``__dict__``; of dunder names only
    ``__notes__``, from ``add_note``) whose values are plain JSON: str, int, float,
    bool, None, and lists and str-keyed dicts of them. Others (a response object, a
    model, a tuple) would not come back as what they were, so they are left out."""
    own = getattr(exc, "__dict__", None)
    if not isinstance(own, dict):
        return {}
    fields: dict[str, Any] = {}
    budget = _PLAIN_BUDGET
    for name, value in own.items():
        if not isinstance(name, str) or (name.startswith("__") and name != "__notes__"):
            continue
        size = _plain_size(value, budget)
        if size is None:
            continue
        if size > budget:
            continue
        budget -= size
        fields[name] = value
    return fields


def _plain_size(value: Any, budget: int) -> int | None:
    """How many values ``value`` holds (itself, list items and dict values, nested)
    when it is plain JSON, counting no further than past ``budget``; None when it is
    not plain JSON."""
    size = 0
    stack = [value]
    while stack and size <= budget:
        size += 1
        item = stack.pop()
        kind = type(item)
        if item is None or kind in (str, int, float, bool):
            continue
        if kind is not list and kind is not dict:
            return None
        if size + len(stack) + len(item) > budget:
            return budget + 1
        if kind is list:
            stack.extend(item)
        else:
            if not all(type(key) is str for key in item):
                return None
            stack.extend(item.values())
    return size


def _json(value: Any, what: str) -> str | None:
    try:
        return dumps(value, what=what, sort_keys=False)
    except (TraceSerializationError, TypeError, ValueError, RecursionError):
        return None


__all__ = [
    "ErrorCodec",
    "ErrorDetails",
    "error_codecs",
    "failure_details",
    "register_error_codec",
]
