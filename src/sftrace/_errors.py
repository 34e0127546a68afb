"""Every error sftrace raises, under one root.

::

    SftraceError
    ├── ConfigError (also ValueError)          bad configuration or argument
    │   ├── SuiteError                          a regression suite file is invalid
    │   └── ForkPointError                      a fork's ``at`` names no call it can fork at
    ├── TraceSerializationError (also TypeError)  a value could not become JSON
    ├── BundleError                             a bundle is missing, malformed or unsupported
    └── ReplayError                             anything that goes wrong while replaying
        ├── ReplayMismatchError                 the call reached differs from the recorded one
        ├── ReplayExhaustedError                a call after every recorded call was used,
        │                                       or a stream read past what was recorded
        │   └── RecordingEndedError             a call past the end of a recording whose
        │                                       process died
        ├── ReplayPolicyError                   a call its policy or mode refuses
        ├── IncompleteReplayError               recorded calls were never reached
        ├── UnrecordedResultError               a call whose result could not be recorded
        └── RecordedDependencyError             a recorded failure whose class can't be rebuilt
            └── RecordedInterruption            a recorded KeyboardInterrupt, SystemExit...

Catch ``SftraceError`` to catch anything of this library.
"""

from __future__ import annotations

from typing import Any


class SftraceError(Exception):
    """Root of every error raised by sftrace."""


class ConfigError(SftraceError, ValueError):
    """A configuration value or argument is invalid."""


class SuiteError(ConfigError):
    """A regression suite file is invalid. ``path`` names the file, ``case`` the case
    (None for a problem of the suite as a whole)."""

    def __init__(self, message: str, *, path: str, case: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.case = case


class ForkPointError(ConfigError):
    """``sftrace.fork(..., at=)`` names no call a fork can start from: a step out of
    range, a ``NAME#K`` the recording does not have, or a call made inside a tool that the
    fork answers from the recording (its body does not run, so the call is never made).
    ``step`` is the 1-based call number when known, else None."""

    def __init__(self, message: str, *, step: int | None = None) -> None:
        super().__init__(message)
        self.step = step


class TraceSerializationError(SftraceError, TypeError):
    """A recorded value could not be converted to JSON.

    ``path`` is the parameter name or JSON path of the value, ``type_name`` its type.
    """

    def __init__(self, message: str, *, path: str, type_name: str) -> None:
        super().__init__(message)
        self.path = path
        self.type_name = type_name


class BundleError(SftraceError):
    """A bundle is missing, truncated, malformed or of an unsupported version.

    ``path`` names the file, ``line`` the 1-based line when known.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class BackendError(SftraceError):
    """A tracing backend (Phoenix, ...) could not be reached, refused a request or
    answered with something sftrace can't read."""


class ReplayError(SftraceError):
    """Base of every error raised while replaying a recorded run."""


class ReplayMismatchError(ReplayError):
    """The call reached does not match the recorded call at the same position.

    Attributes: ``call_number`` (1-based), ``recorded`` and ``reached`` (dicts with
    kind, name and input), ``differences`` (a list of ``(path, recorded, reached)``).
    """

    def __init__(
        self,
        message: str,
        *,
        call_number: int,
        recorded: dict[str, Any] | None,
        reached: dict[str, Any],
        differences: list[tuple[str, Any, Any]],
    ) -> None:
        super().__init__(message)
        self.call_number = call_number
        self.recorded = recorded
        self.reached = reached
        self.differences = differences


class ReplayExhaustedError(ReplayError):
    """A call was reached after every recorded call had been used, or a replayed stream
    was read past the chunks its recording read (the recorded agent stopped reading it
    there). ``call_number``: the call reached (the stream's call); ``reached``: its kind,
    name and input."""

    def __init__(self, message: str, *, call_number: int, reached: dict[str, Any]) -> None:
        super().__init__(message)
        self.call_number = call_number
        self.reached = reached


class RecordingEndedError(ReplayExhaustedError):
    """A call was reached after every call of an ``interrupted`` recording was used.

    The recorded run's process died there (``sftrace recover`` rebuilt what it had
    written): the agent got as far as the recording goes, and what it did next was never
    recorded. Raised into the agent to stop its replay; the replay's status is then
    ``"interrupted"``, the recording's own, and is no divergence.
    """


class ReplayPolicyError(ReplayError):
    """The replay mode or the call's recorded policy refuses this call."""


class IncompleteReplayError(ReplayError):
    """``verify_complete()`` found recorded calls that the replay never reached."""

    def __init__(self, message: str, *, unused: list[Any]) -> None:
        super().__init__(message)
        self.unused = unused


class UnrecordedResultError(ReplayError):
    """A replay reached a call whose result could not be recorded, so it cannot answer it.

    ``call_number`` is the recorded call's sequence number, ``label`` names it (``tool
    'fetch'``), ``reason`` is why its result could not be recorded (as recorded).
    """

    def __init__(self, message: str, *, call_number: int, label: str, reason: str) -> None:
        super().__init__(message)
        self.call_number = call_number
        self.label = label
        self.reason = reason


class RecordedDependencyError(ReplayError):
    """A recorded call failed with an exception the replay cannot rebuild.

    A replayed failure is raised as the recorded class when that class is reachable in an
    already imported module (an SDK's own error through its integration); otherwise as
    this error, carrying the recorded ``type_name`` and ``recorded_message``. Either way
    it is the recorded failure coming back, not a divergence.
    """

    def __init__(self, type_name: str, recorded_message: str) -> None:
        super().__init__(f"{type_name}: {recorded_message}")
        self.type_name = type_name
        self.recorded_message = recorded_message


class RecordedInterruption(RecordedDependencyError):
    """A recorded ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit`` (or another
    exception outside ``Exception``), replayed as an ``Exception``.

    Raising the recorded interruption itself would stop the process replaying it (a
    test session, say); this error fails the replayed run instead. A recorded
    ``asyncio.CancelledError`` still replays as ``CancelledError``.
    """


# Every error is public as ``sftrace.<Name>``: tracebacks, messages, reports and recorded
# failures name it there, not by this private module (``sftrace.ReplayMismatchError``).
for _error in (
    SftraceError,
    ConfigError,
    SuiteError,
    ForkPointError,
    TraceSerializationError,
    BundleError,
    ReplayError,
    ReplayMismatchError,
    ReplayExhaustedError,
    RecordingEndedError,
    ReplayPolicyError,
    IncompleteReplayError,
    RecordedDependencyError,
    RecordedInterruption,
):
    _error.__module__ = "sftrace"
del _error


def public_error_name(type_name: str) -> str:
    """The recorded type name of an sftrace error as it is named today: bundles written
    before the errors named themselves ``sftrace.X`` recorded ``sftrace._errors.X``."""
    old = "sftrace._errors."
    return f"sftrace.{type_name[len(old) :]}" if type_name.startswith(old) else type_name
