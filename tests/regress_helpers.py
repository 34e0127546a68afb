"""Record small scripted runs as real bundles, for the diff, compare and suite tests.

A script is a list of steps; :func:`play` executes each one through a real
``@trace_tool`` or ``llm_request`` boundary, so recordings and replays go through the
whole stack.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sftrace
from sftrace import llm_request, trace_tool


@dataclass(frozen=True)
class Step:
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: str | None = None  # raise ValueError(error) from the call
    kind: str = "tool"


def tool(name: str, output: Any = None, *, error: str | None = None, **arguments: Any) -> Step:
    return Step(name, arguments, output, error)


def llm(model: str, output: Any, **request: Any) -> Step:
    return Step(model, request, output, kind="llm")


def _execute(step: Step) -> Any:
    def body(**_: Any) -> Any:
        if step.error is not None:
            raise ValueError(step.error)
        return step.output

    if step.kind == "llm":
        return llm_request(provider="fakellm", model=step.name, input=step.input, call=body)
    return trace_tool(name=step.name)(body)(**step.input)


def play(steps: list[Step], output: Any = None, fail: str | Exception | None = None) -> Any:
    """Run the steps (a failing call is caught, as agents do), then return ``output`` or
    raise ``fail`` (a message means a ``RuntimeError``)."""
    for step in steps:
        with contextlib.suppress(ValueError):
            _execute(step)
    if isinstance(fail, str):
        raise RuntimeError(fail)
    if fail is not None:
        raise fail
    return output


def record_steps(
    path: Path, steps: list[Step], *, output: Any = None, fail: str | Exception | None = None
) -> Path:
    """Record ``play(steps, output, fail)`` into a bundle at ``path``; return the path."""
    try:
        with sftrace.record("scripted-agent", output=path, overwrite=True) as session:
            result = play(steps, output, fail)
            if output is not None:
                session.set_output(result)
    except Exception:
        if fail is None:
            raise
    return path
