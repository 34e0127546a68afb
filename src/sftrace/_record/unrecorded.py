"""Values that cannot be recorded: results are marked in the bundle and refused by a
replay; inputs are recorded with a placeholder for what cannot become JSON.

A result that cannot become JSON (an integer past 64 bits, a string with a lone
surrogate, an object whose serializer raises...) must not break the host: outside strict
mode the caller gets it unchanged, and the call's span carries
``sftrace.output.unrecorded`` (why, redacted) instead of ``sftrace.output``. A replay
reaching that call cannot answer it and raises :class:`UnrecordedResultError`.

An input that cannot become JSON (a lock, a socket, a generator passed to a tool) must
not break the host either: outside strict mode each value that cannot be converted is
recorded as ``"<unrecordable module.Type>"``, the same text on every run, so a replay
passing the same kind of object matches the call. A replay never raises for it, also in
strict mode: the recording it matches was made that way.
"""

from __future__ import annotations

from typing import Any, Final

from sftrace._errors import TraceSerializationError, UnrecordedResultError
from sftrace._internal import log_once, strict_mode
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.serialize import Serializer, dumps, to_json
from sftrace._record.run import ActiveRun


def unrecorded_reason(
    run: ActiveRun, error: TraceSerializationError
) -> tuple[str, list[dict[str, Any]]]:
    """Why a result is not recorded (redacted), and where it was redacted.

    Raises ``error`` in strict mode; else logs it once per cause.
    """
    if strict_mode():
        raise error
    log_once("recording a call's result", error)
    reason, found = run.redactor.redact_text(str(error), known=run.known_secrets)
    return reason, [redaction.record("output") for redaction in found]


def unrecorded_error(recorded: Call) -> UnrecordedResultError | None:
    """The error a replay raises for ``recorded``, or None when its result was recorded."""
    if not recorded.may_have(A.OUTPUT_UNRECORDED):  # no need to decode its attributes
        return None
    reason = recorded.attributes.get(A.OUTPUT_UNRECORDED)
    if reason is None:
        return None
    return UnrecordedResultError(
        f"call {recorded.seq} ({recorded.label}) cannot be answered from the recording: its "
        f"result could not be recorded ({reason}). Make the result recordable "
        f"(serializer=... on the tool or LLM call) and record the run again, or let this "
        f"call run for real during replays (replay_policy='live')",
        call_number=recorded.seq,
        label=recorded.label,
        reason=str(reason),
    )


# Stored in place of an input value that cannot become JSON (with its type's name).
UNRECORDABLE_INPUT: Final = "<unrecordable {}>"


def recordable_input(
    run: ActiveRun, value: Any, serializer: Serializer | None, *, what: str
) -> str:
    """The JSON text of a call's input, with a placeholder for what cannot become JSON.

    Raises :class:`TraceSerializationError` in strict mode while recording; else logs the
    cause once and records the input with each value that cannot be converted (or that
    the serializer refuses) replaced by ``"<unrecordable module.Type>"``.
    """
    try:
        return dumps(value, serializer=serializer, what=what)
    except TraceSerializationError as error:
        if strict_mode() and run.replay is None:
            raise
        log_once(f"recording a call's input ({what})", error)
    placeholder = _with_placeholder(serializer)
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        # a tool's arguments: keep every one that converts
        return dumps({key: _item(item, placeholder, what) for key, item in value.items()})
    return dumps(_item(value, placeholder, what))


def _item(value: Any, placeholder: Serializer, what: str) -> Any:
    try:
        return to_json(value, serializer=placeholder, what=what)
    except TraceSerializationError:  # not for its type: a 65-bit integer, a lone surrogate...
        return UNRECORDABLE_INPUT.format(_type_name(value))


def _with_placeholder(serializer: Serializer | None) -> Serializer:
    def convert(value: Any) -> Any:
        if serializer is not None:
            try:
                return serializer(value)
            except Exception:
                pass
        return UNRECORDABLE_INPUT.format(_type_name(value))

    return convert


def _type_name(value: Any) -> str:
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
