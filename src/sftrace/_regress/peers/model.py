"""One recorded run as the peers' formats describe it, before it becomes a bundle.

Each peer reader (``stepfork``, ``agenttrace``) turns a recording into a
:class:`PeerRun`; :mod:`sftrace._regress.peers.write` turns that into a bundle. Values
are plain JSON as the peer stored them; times are nanoseconds since the epoch.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

JSON = Any
# What a call without a recorded output holds (None is a recorded null).
NO_VALUE: Final[Any] = type("NoValue", (), {"__repr__": lambda self: "NO_VALUE"})()


@dataclass(frozen=True, slots=True)
class PeerError:
    """A recorded exception: its type name (as the peer stored it) and message."""

    type: str
    message: str

    @property
    def builtin(self) -> bool:
        """Whether the name is a Python builtin exception (replayed as that type)."""
        found = getattr(builtins, self.type, None)
        return isinstance(found, type) and issubclass(found, BaseException)


@dataclass(slots=True)
class PeerCall:
    """One tool or LLM call, in the order the agent reached it."""

    kind: str  # "tool" or "llm"
    name: str  # tool name, or the LLM's model
    input: JSON
    start_ns: int
    provider: str | None = None
    policy: str = "frozen"
    parent: int | None = None  # index of the enclosing call; None: the run
    end_ns: int | None = None
    output: JSON = NO_VALUE
    error: PeerError | None = None
    usage: dict[str, Any] = field(default_factory=dict)  # span attribute -> value
    # Where the peer itself redacted values: {"field", "path", "rule"} records.
    redactions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.output is not NO_VALUE or self.error is not None


@dataclass(frozen=True, slots=True)
class PeerState:
    """A recorded change of agent state."""

    time_ns: int
    key: str
    before: JSON
    after: JSON


@dataclass(slots=True)
class PeerRun:
    """One run of an agent read from a peer's recording."""

    source: str  # the peer: "stepfork" or "agenttrace"
    path: Path  # the recording it was read from
    run_id: str
    agent_name: str
    start_ns: int
    end_ns: int
    status: str  # "completed" or "failed"
    run_input: JSON = NO_VALUE
    output: JSON = NO_VALUE
    failure: PeerError | None = None
    failure_call: int | None = None  # index of the call the run failed in
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_version: str | None = None
    replay_of: str | None = None
    calls: list[PeerCall] = field(default_factory=list)
    states: list[PeerState] = field(default_factory=list)
    redactions: list[dict[str, Any]] = field(default_factory=list)  # of the run's values
    # What the recording holds that a bundle has no place for (kept in its manifest).
    notes: list[str] = field(default_factory=list)
    # Set when the recording is readable but holds no complete run: why it is skipped.
    problem: str | None = None
