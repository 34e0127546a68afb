"""Row 11 of bench.py: what a short run costs whole, as a service recording one run per
request sees it.

A run of three calls of the bench's tool, timed from entering ``record()`` to its exit
(the bundle written, placed and, by default, fsynced), with ``configure(fsync=True)``
(the default) and ``fsync=False``. Each setting runs in blocks that start after
``os.sync()``: without fsync the OS keeps the written files to flush later, and an
fsync made right after would pay for them. Medians and 90th percentiles per run; the
fsync figures depend on the disk far more than on the CPU.
"""

from __future__ import annotations

import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import workload

import sftrace
from sftrace import record, trace_tool

CALLS = 3


def measure(repeats: int, *, runs_per_block: int = 100) -> dict[str, Any]:
    """Per-run wall and CPU nanoseconds (median, p90) with fsync on and off, and the rows."""
    tool = trace_tool(workload.search_flights)
    arguments = workload.tool_arguments(CALLS)
    numbers = itertools.count()
    samples: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="sftrace-bench-short-") as tmp:
        out = Path(tmp)

        def run() -> None:
            with record("bench", output=out / f"run{next(numbers)}.sftrace"):
                for destination, date, passengers in arguments:
                    tool(destination, date, passengers=passengers)

        try:
            for block in range(2 * repeats):
                order = (True, False) if block % 2 == 0 else (False, True)
                for fsync in order:
                    sftrace.configure(fsync=fsync)
                    run()  # (the first run after configure() sets up the run's state)
                    os.sync()
                    for _ in range(runs_per_block):
                        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
                        run()
                        samples[fsync].append(
                            (time.perf_counter_ns() - wall, time.process_time_ns() - cpu)
                        )
        finally:
            sftrace.configure(fsync=True)
    results: dict[str, Any] = {}
    for fsync, pairs in samples.items():
        walls = sorted(wall for wall, _ in pairs)
        results["on" if fsync else "off"] = {
            "runs": len(pairs),
            "wall_ns": statistics.median(walls),
            "wall_p90_ns": walls[int(len(walls) * 0.9)],
            "cpu_ns": statistics.median(cpu for _, cpu in pairs),
        }
    on, off = results["on"], results["off"]
    saved = on["wall_ns"] / off["wall_ns"]
    rows = [
        {
            "name": f"11. a run of {CALLS} tool calls, whole (record() in and out), fsync on",
            "value": f"{on['wall_ns'] / 1e6:.2f} ms",
            "ratio": f"p90 {on['wall_p90_ns'] / 1e6:.2f} ms",
            "cpu": f"{on['cpu_ns'] / 1e6:.2f} ms",
        },
        {
            "name": "   ... with configure(fsync=False)",
            "value": f"{off['wall_ns'] / 1e6:.2f} ms",
            "ratio": f"p90 {off['wall_p90_ns'] / 1e6:.2f} ms; on/off {saved:.2f}x",
            "cpu": f"{off['cpu_ns'] / 1e6:.2f} ms",
        },
    ]
    return {"calls": CALLS, "results": results, "rows": rows}
