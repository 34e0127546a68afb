"""The round trip every integration test makes: record a run, then replay it offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sftrace import ReplaySession, record, replay


class Dependency(Protocol):
    """A test double for what the agent calls (an HTTP API, a chat model)."""

    refused: list[str]
    """The calls that reached it while offline (a replay must make none)."""

    def offline(self) -> None:
        """From now on refuse every call, and list it in ``refused``."""


def record_then_replay(
    path: Path, dependency: Dependency, agent: Callable[[], Any]
) -> tuple[Any, Any, ReplaySession]:
    """Run ``agent`` recorded, then replayed with ``dependency`` offline.

    Checks that the replay reached nothing and matched every recorded call; returns both
    results and the replay session.
    """
    with record("agent", output=path):
        recorded = agent()
    dependency.offline()
    with replay(path) as session:
        replayed = agent()
    assert dependency.refused == []
    assert session.divergence is None
    session.verify_complete()
    return recorded, replayed, session
