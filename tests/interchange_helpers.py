"""Agents and comparisons shared by the push/import tests (in-process and real collectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sample_agents as agents
from sftrace import record, replay_run


def failing_agent() -> dict[str, Any]:
    """search -> llm -> book the first flight, which is sold out (ValueError)."""
    flights = agents.search_flights("Lisbon")
    agents.ask(f"pick from {[f.id for f in flights]}")
    return agents.book(flights[0].id)


def record_failing(path: Path) -> Path:
    with pytest.raises(ValueError, match="sold out"), record("lisbon", output=path):
        failing_agent()
    return path


def record_completed(path: Path) -> Path:
    with record("booker", output=path, run_input="Lisbon") as session:
        session.set_output(agents.booking_agent("Lisbon"))
    return path


def lines(bundle: Path) -> list[bytes]:
    """The bundle's span lines, as bytes."""
    return (bundle / "spans.jsonl").read_bytes().splitlines()


def replay_summary(bundle: Path, entrypoint: Any) -> tuple[Any, ...]:
    """What a replay of ``bundle`` did: status, reproduction, decisions, error and output."""
    result = replay_run(bundle, entrypoint)
    return (
        result.status,
        result.reproduced,
        [(m.recorded.seq, m.action) for m in result.matched],
        type(result.error).__name__,
        str(result.error),
        result.output,
    )
