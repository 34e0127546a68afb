"""The contract between the instrumented boundaries and a replay.

A boundary (a traced tool, an LLM call) describes what it reached as a :class:`Reached`
and asks the run's :class:`Interceptor` for a :class:`Decision`: answer from the
recording, run the body, ask a manual handler, or raise. The replay layer implements the
interceptor; the recording layer only knows this contract, so imports point down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from sftrace._errors import ReplayError
from sftrace._model import attributes as A
from sftrace._model.calls import Call, call_label
from sftrace._model.serialize import loads


class Action(Enum):
    RETURN = "substituted"  # answer from the recording, body not run
    EXECUTE = "executed"  # run the body
    DERIVED = "derived"  # run the body, check it equals the recording
    MANUAL = "manual"  # ask the manual handler
    RAISE = "refused"  # raise ``error``


# The actions that run the call's body, and those that answer it without running it;
# and the members the tests of every reached call name alone. Made once: looking a
# member up on its Enum class goes through ``EnumType.__getattr__``'s slot (Python
# 3.11), which costs more than the test itself (a replay tests every call it reaches).
RUNS_BODY = (Action.EXECUTE, Action.DERIVED)
ANSWERED = (Action.RETURN, Action.MANUAL)
RETURN, MANUAL, RAISE = Action.RETURN, Action.MANUAL, Action.RAISE


@dataclass(slots=True)
class Decision:
    """What a boundary does. ``recorded_failure``: ``error`` is the recorded call's own
    exception raised again (the recording answered), not the replay refusing the call.
    ``fresh``: ``recorded``'s output was never recorded (a fork's override), so it is
    redacted like a result produced now before the span holds it. ``learned``: secrets
    the reached input holds where the recorded one has a known-secret marker (see
    ``secrets_at_markers``), to be redacted from now on."""

    action: Action
    recorded: Call | None = None
    error: BaseException | None = None
    recorded_failure: bool = False
    fresh: bool = False
    learned: tuple[str, ...] = ()


@dataclass(slots=True)
class Reached:
    """What the replay reached: identifies a call like ``Call`` does. (Not frozen: one is
    built per call reached, and a frozen dataclass's ``__init__`` costs twice as much.)"""

    kind: str
    name: str
    provider: str | None
    input_json: str

    @property
    def label(self) -> str:
        return call_label(self.kind, self.name, self.provider)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.provider is not None:
            described["provider"] = self.provider
        described["input"] = loads(self.input_json)
        return described

    @classmethod
    def from_attributes(cls, attributes: Any) -> Reached:
        kind = attributes[A.KIND]
        if kind == A.KIND_LLM:
            name, provider = (
                attributes.get(A.GEN_AI_REQUEST_MODEL),
                attributes.get(A.GEN_AI_PROVIDER_NAME),
            )
        else:
            name, provider = attributes.get(A.GEN_AI_TOOL_NAME), None
        return cls(
            kind=kind,
            name=str(name),
            provider=None if provider is None else str(provider),
            input_json=attributes.get(A.INPUT, "null"),
        )


class Handoff(threading.local):
    """What a boundary tells the replay processor while the boundary's span starts (on
    that thread: the processor's ``on_start`` runs inside ``start_span``).

    ``decided``: the span is a boundary's, whose call the boundary had the replay decide
    before starting the span (so that the span's attributes can use what the recording
    answers); the processor leaves it alone. A span with a call's ``sftrace.kind``
    started without a boundary is decided by the processor, from its attributes, so it
    counts as reached.
    """

    decided: bool = False


HANDOFF = Handoff()


class Interceptor(Protocol):
    """What a boundary asks of the replay its run belongs to."""

    manual: Callable[[Call], Any] | None

    @property
    def reached_count(self) -> int: ...

    def decide(self, reached: Reached, *, seq: int | None = None) -> Decision:
        """Match ``reached`` against the recording and say what the boundary does;
        ``seq``: the replayed call's own sequence number."""
        ...

    def diverge(self, error: ReplayError) -> None:
        """Record that the replay diverged with ``error``."""
        ...

    def hold_answer(self, recorded: Call) -> None:
        """Before answering ``recorded`` from the recording: wait for the calls that ran
        at the same time and ended before it (see ``_replay/completion.py``)."""
        ...

    async def ahold_answer(self, recorded: Call) -> None:
        """:meth:`hold_answer` without blocking the event loop."""
        ...

    def answered(self, recorded: Call) -> None:
        """The replayed call that took ``recorded`` has ended."""
        ...
