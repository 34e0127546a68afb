"""The same workload through stepfork (a peer recorder), for a side-by-side comparison.

``bench.py --stepfork`` installs ``stepfork==0.2.1`` into a throwaway virtual environment
under /tmp and runs this script with that environment's Python. It never runs in the
project's environment, and nothing in sftrace imports stepfork. Prints one JSON line of
per-call nanoseconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stepfork  # only importable in the throwaway environment
import workload

traced_search = stepfork.trace_tool(workload.search_flights)


def call_tool(func: Callable[..., Any], arguments: list[tuple[str, str, int]]) -> None:
    for destination, date, passengers in arguments:
        func(destination, date, passengers=passengers)


def timed(action: Callable[[], Any]) -> int:
    gc.collect()
    start = time.perf_counter_ns()
    action()
    return time.perf_counter_ns() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="200,2000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    samples: dict[str, list[float]] = {}
    counter = 0
    with tempfile.TemporaryDirectory(prefix="stepfork-bench-") as tmp:
        for _ in range(args.repeats):
            for n in lengths:
                arguments = workload.tool_arguments(n)
                counter += 1
                path = Path(tmp) / f"run-{counter}.sftrace"

                def record_run(path: Path = path, arguments: Any = arguments) -> None:
                    with stepfork.record("bench", output=path):
                        call_tool(traced_search, arguments)

                samples.setdefault(f"record@{n}", []).append(timed(record_run) / n)
                loaded: list[Any] = []
                elapsed = timed(
                    lambda path=path, loaded=loaded: loaded.append(stepfork.Trace.load(path))
                )
                samples.setdefault(f"load_per_call@{n}", []).append(elapsed / n)
                trace = loaded[0]

                def replay_run(trace: Any = trace, arguments: Any = arguments) -> None:
                    with stepfork.ReplaySession.from_trace(trace, mode="frozen"):
                        call_tool(traced_search, arguments)

                samples.setdefault(f"replay@{n}", []).append(timed(replay_run) / n)
    print(
        json.dumps(
            {
                "stepfork": stepfork.__version__,
                "medians_ns": {k: statistics.median(v) for k, v in samples.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
