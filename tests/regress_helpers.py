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


# --- a tiny refund agent written as a module, for suites, the plugin and export ----------

AGENT_SOURCE = '''\
"""A tiny refund agent: the buggy version refunds late orders, the fixed one denies them."""

from sftrace import trace_tool

CALLS = []


@trace_tool
def lookup(order_id):
    CALLS.append("lookup")
    return {"order_id": order_id, "days": 45}


@trace_tool
def refund(order_id):
    CALLS.append("refund")
    return {"refunded": order_id}


def buggy(request):
    order = lookup(request["order_id"])
    refund(order["order_id"])
    return {"decision": "refunded", "order_id": order["order_id"]}


def fixed(request):
    order = lookup(request["order_id"])
    if order["days"] > 30:
        return {"decision": "denied", "order_id": order["order_id"]}
    refund(order["order_id"])
    return {"decision": "refunded", "order_id": order["order_id"]}


async def afixed(request):
    return fixed(request)


def explode(request):
    raise RuntimeError("the agent crashed")


def wrong_order(request):
    lookup("B-2")
    return {"decision": "denied", "order_id": "B-2"}
'''

REQUEST = {"order_id": "A-1"}
DENIED = {"decision": "denied", "order_id": "A-1"}

_counter = iter(range(1_000_000))


def write_agent(directory: Path) -> str:
    """Write the agent module into ``directory`` under a fresh name; return the name."""
    name = f"refund_agent_{next(_counter)}_{id(directory) % 100_000}"
    (directory / f"{name}.py").write_text(AGENT_SOURCE)
    return name


def record_agent(directory: Path, module: str, bundle: Path) -> Path:
    """Record the agent's buggy run (imported from ``directory``) into ``bundle``."""
    import importlib
    import sys

    sys.path.insert(0, str(directory))
    try:
        agent = importlib.import_module(module)
    finally:
        sys.path.remove(str(directory))
    with sftrace.record(
        "refund-agent", output=bundle, overwrite=True, run_input=REQUEST
    ) as session:
        session.set_output(agent.buggy(REQUEST))
    return bundle


def invoke(*args: str | Path) -> Any:
    """Run the sftrace CLI in-process; return click's ``Result``."""
    from click.testing import CliRunner

    from sftrace._cli import bundle, regress
    from sftrace._cli.main import cli

    regress.register(cli)
    bundle.register(cli)  # validate, inspect: a test file run alone needs them too
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_exported_test_judges_the_fix(
    pytester: Any,
    bundle: Path,
    module: str,
    expected_output: Any,
    *,
    buggy: str = "handle",
    fixed: str = "handle_fixed",
) -> None:
    """Export a pytest test stating ``expected_output`` from ``bundle`` and run it in
    ``pytester`` (where ``module`` was copied): it fails against ``module:buggy`` and
    passes against ``module:fixed``."""
    import json

    (pytester.path / "expected.json").write_text(json.dumps(expected_output))
    for entrypoint, outcome in ((buggy, {"failed": 1}), (fixed, {"passed": 1})):
        exported = invoke(
            "export",
            bundle,
            "--pytest",
            "--entrypoint",
            f"{module}:{entrypoint}",
            "--expect-output",
            "expected.json",
            "-o",
            "test_exported.py",
            "--overwrite",
        )
        assert exported.exit_code == 0, exported.output
        ran = pytester.runpytest("-p", "sftrace.pytest_plugin", "-p", "no:cacheprovider")
        ran.assert_outcomes(**outcome)
