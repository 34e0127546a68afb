"""Rows 2m and 4m of bench.py: recording a tool whose result looks like real agent traffic.

The plain workload returns values no secret scanner looks at twice. This tool returns
what agents do record (issue 16): twenty sha256 hex ids, eight 60-character alphanumeric
strings, 4 KB of prose and one 64 KB base64 image (about 71 KB of JSON a call), the
values of the redaction rows (``redaction_bench.shapes()``), built from fixed seeds.

Measured side by side, like the plain rows: 2m, the durable floor with the same
attributes (bench.py's row 2c with this tool), and 4m, the tool under ``@trace_tool``
inside ``record()``, for each run length. Long runs are repeated to cover fewer calls
than the plain rows (``MIN_CALLS_SHARE``): each call writes ~71 KB.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from redaction_bench import shapes

from sftrace import record, trace_tool

if TYPE_CHECKING:
    from bench import Bench

# A mixed run covers this share of bench.py's --min-calls per sample.
MIN_CALLS_SHARE = 5


def _mix() -> dict[str, Any]:
    values = shapes()
    return {
        "hashes": values["twenty sha256 hex ids"]["hashes"],
        "ids": values["eight 60-char alphanumeric strings"]["ids"],
        "summary": values["4 KB of prose"]["text"],
        "screenshot": values["one 64 KB base64 image"]["image"],
    }


MIX_RESULT: dict[str, Any] = _mix()


def fetch_listing(
    destination: str, date: str, passengers: int = 1, cabin: str = "economy"
) -> dict[str, Any]:
    """The tool: the plain tool's four parameters, the mixed result."""
    return MIX_RESULT


traced_fetch = trace_tool(fetch_listing)


def sample_round(bench: Bench, n: int) -> None:
    """One round of rows 2m and 4m at ``n`` calls (samples ``mix_journal@n``, ``mix@n``)."""
    from bench import bare_tool_with_sftrace_attributes, call_tool

    args = bench.tool_args[n]
    reps = max(1, bench.min_calls // MIN_CALLS_SHARE // n)
    floor = bare_tool_with_sftrace_attributes(bench.journal_tracer, fetch_listing, "fetch_listing")

    def journal_run(_: int) -> None:
        with bench.journal_tracer.start_as_current_span("invoke_agent bench"):
            call_tool(floor, args)

    paths = [bench.workdir / f"mix-{n}-{i}.sftrace" for i in range(reps)]

    def record_run(i: int) -> None:
        with record("bench", output=paths[i]):
            call_tool(traced_fetch, args)

    bench.journal.truncate()
    bench._interleaved(
        n,
        [
            (f"mix_journal@{n}", journal_run),
            (f"mix_bundle@{n}", bench.bundle_floor(floor, args)),
            (f"mix@{n}", record_run),
        ],
        reps,
    )
    for path in paths:
        shutil.rmtree(path)
