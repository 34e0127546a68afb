"""Rows 4, 6 (strict) and 4m counted in instructions, for callgrind: the machine's speed
does not change them, so two source trees compare in one session.

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=_operator_call \\
        python benchmarks/callgrind_rows.py <tree> record|replay|mix

``<tree>`` is a checkout of sftrace (its ``src`` and ``benchmarks`` are put first on the
path). Only what runs inside ``operator.call`` is counted: ``record``, two recordings of
500 calls of the bench's tool; ``replay``, two strict replays of 500-call bundles loaded
beforehand; ``mix``, two recordings of 200 calls of the payload-mix tool. A warm-up runs
first. Divide the collected total by 1,000 (record, replay) or 400 (mix).
"""

from __future__ import annotations

import itertools
import operator
import sys
import tempfile
from pathlib import Path

tree = Path(sys.argv[1]).resolve()
sys.path[:0] = [str(tree / "src"), str(tree / "benchmarks")]

import workload  # noqa: E402

import sftrace  # noqa: E402
from sftrace import load_bundle, record, replay, trace_tool  # noqa: E402

if not str(sftrace.__file__).startswith(str(tree)):
    raise SystemExit(f"sftrace was imported from {sftrace.__file__}, not from {tree}")
traced = trace_tool(workload.search_flights)
arguments = workload.tool_arguments(500)
out = Path(tempfile.mkdtemp())
numbers = itertools.count()


def call_all(tool: object, count: int) -> None:
    assert callable(tool)
    for destination, date, passengers in arguments[:count]:
        tool(destination, date, passengers=passengers)


def record_run(tool: object = traced, count: int = 500) -> Path:
    path = out / f"run{next(numbers)}.sftrace"
    with record("bench", output=path):
        call_all(tool, count)
    return path


def replay_run(bundle: sftrace.Bundle) -> None:
    with replay(bundle, match="strict") as session:
        call_all(traced, 500)
    if session.divergence is not None or session.unused:
        raise SystemExit(f"the replay did not match: {session.divergence}")


def main(what: str) -> None:
    if what == "mix":
        import payload_mix

        record_run(payload_mix.traced_fetch, 200)  # warm-up
        for _ in range(2):
            operator.call(record_run, payload_mix.traced_fetch, 200)
    elif what == "record":
        record_run()  # warm-up
        for _ in range(2):
            operator.call(record_run)
    elif what == "replay":
        bundles = [load_bundle(record_run()) for _ in range(3)]
        replay_run(bundles[0])  # warm-up
        for bundle in bundles[1:]:
            operator.call(replay_run, bundle)
    else:
        raise SystemExit(f"usage: {sys.argv[0]} <tree> record|replay|mix")


main(sys.argv[2])
