"""Results that cannot be recorded: marked in the bundle, refused by a replay.

A result that cannot become JSON (an integer past 64 bits, a string with a lone
surrogate, an object whose serializer raises...) must not break the host: outside strict
mode the caller gets it unchanged, and the call's span carries
``sftrace.output.unrecorded`` (why, redacted) instead of ``sftrace.output``. A replay
reaching that call cannot answer it and raises :class:`UnrecordedResultError`.
"""

from __future__ import annotations

from typing import Any

from sftrace._errors import TraceSerializationError, UnrecordedResultError
from sftrace._internal import log_once, strict_mode
from sftrace._model import attributes as A
from sftrace._model.calls import Call
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
