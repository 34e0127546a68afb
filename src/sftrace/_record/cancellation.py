"""Cancelled calls: telling where a recorded cancellation came from, and replaying one that
came from outside the call.

A call cancelled from outside (``asyncio.wait_for`` or ``asyncio.timeout`` timing it
out, ``task.cancel()``) was running when the agent's own code cancelled it. Raising the
recorded ``CancelledError`` as soon as the replay reaches the call would be another story:
``wait_for`` would then pass the ``CancelledError`` on instead of raising
``TimeoutError``. So an async replay of such a call waits, without blocking the loop,
until the replaying code cancels it as it did the recorded one; the agent's own timer
fires and its handlers run as recorded. A replay of a timed-out call therefore takes
about as long as the recorded timeout.

The wait is bounded (:func:`wait_bound`): an agent that no longer cancels the call (a
longer timeout, no ``cancel()``) diverges there, and the call raises the recorded
``CancelledError`` as a replay did before.

A call whose own code raised ``CancelledError`` (its task was not being cancelled, see
:func:`cancelled_within`) and a sync call raise it at once, as recorded.
"""

from __future__ import annotations

import asyncio

from sftrace._errors import ReplayError
from sftrace._model.calls import Call
from sftrace._record.intercept import Decision, Interceptor

# The least time a replay waits for the agent to cancel a call (the recorded call may have
# been cancelled at once, and a loaded machine is slower than the recording's).
MIN_SLACK_S = 1.0


def cancelled_within() -> bool:
    """Whether a ``CancelledError`` going through a call now was raised by the call's own
    code: no task runs it, or its task is not being cancelled (``Task.cancelling()``,
    which ``task.cancel()``, ``wait_for`` and ``asyncio.timeout`` all raise)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: sync code raised it itself
        return True
    return task is None or task.cancelling() == 0


def waits_for_cancellation(decision: Decision) -> bool:
    """Whether ``decision`` raises a recorded cancellation that came from outside."""
    recorded = decision.recorded
    failure = None if recorded is None else recorded.error
    return (
        decision.recorded_failure
        and failure is not None
        and failure.cancelled
        and not failure.cancelled_within
        and isinstance(decision.error, asyncio.CancelledError)
    )


def wait_bound(recorded: Call) -> float:
    """How long (seconds) a replay waits for the agent to cancel ``recorded``: twice the
    recorded call's duration, and at least that duration plus :data:`MIN_SLACK_S`."""
    duration = max(0, recorded.end_time_ns - recorded.start_time_ns) / 1e9
    return max(2 * duration, duration + MIN_SLACK_S)


async def await_cancellation(decision: Decision, replay: Interceptor | None) -> None:
    """Wait until the replaying code cancels the call (its ``CancelledError`` propagates,
    as the recorded one did); past :func:`wait_bound`, diverge and return (the caller then
    raises the recorded ``CancelledError``)."""
    recorded = decision.recorded
    assert recorded is not None
    try:
        if asyncio.current_task() is None:  # a coroutine driven by hand: nothing to wait in
            return
    except RuntimeError:
        return
    bound = wait_bound(recorded)
    await asyncio.sleep(bound)
    if replay is not None:
        seconds = recorded.duration_ms / 1000
        replay.diverge(
            ReplayError(
                f"call {recorded.seq} ({recorded.label}) was cancelled from outside in the "
                f"recording (a timeout or task.cancel(), after {seconds:.3g} s), but the "
                f"replayed agent did not cancel it within {bound:.3g} s: its timeout or "
                f"cancellation changed"
            )
        )


__all__ = ["await_cancellation", "cancelled_within", "wait_bound", "waits_for_cancellation"]
