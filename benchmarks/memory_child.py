"""Peak memory of one long recording, or of loading one, measured in a process of its own.

``bench.py`` runs this script in a subprocess: it warms up (imports, a short recording),
notes the peak resident set size, records ``--calls`` tool calls (``--mode sftrace``),
runs as many bare OpenTelemetry spans (``--mode bare``) or loads a bundle of that many
calls recorded beforehand (``--mode load``, which also reports the size of its
``spans.jsonl``), notes the peak again and prints the growth as one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402
from bench import bare_tool, bare_tracer, call_tool, traced_search  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import sftrace  # noqa: E402


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/self/status (this measurement needs Linux)")


def peak_rss_kb() -> int:
    # VmHWM, not getrusage's ru_maxrss: on Linux ru_maxrss carries over the parent's peak
    # through fork and exec, which would hide the growth of a small child.
    return _status_kb("VmHWM")


def reset_peak() -> None:
    """Reset the peak RSS mark to the current RSS (Linux 4.0+), where permitted."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def current_rss_kb() -> int:
    return _status_kb("VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--mode", choices=("sftrace", "bare", "load"), default="sftrace")
    args = parser.parse_args()
    # Arguments for every call exist before the first measurement (they are the
    # agent's, not the recorder's); the warm-up uses the first few.
    arguments = workload.tool_arguments(args.calls)
    with tempfile.TemporaryDirectory(prefix="sftrace-mem-") as tmp:
        if args.mode == "load":
            print(json.dumps(measure_load(Path(tmp), arguments)))
            return
        if args.mode == "sftrace":
            sftrace.configure(tracer_provider=TracerProvider())

            def run(count: int, name: str) -> None:
                with sftrace.record("bench", output=Path(tmp) / name):
                    call_tool(traced_search, arguments[:count])

        else:
            tracer = bare_tracer()
            func = bare_tool(tracer)

            def run(count: int, name: str) -> None:
                with tracer.start_as_current_span("invoke_agent bench"):
                    call_tool(func, arguments[:count])

        run(500, "warm-up.sftrace")
        gc.collect()
        reset_peak()
        before = peak_rss_kb()
        start_rss = current_rss_kb()
        run(args.calls, "long.sftrace")
        after = peak_rss_kb()
        gc.collect()
        end_rss = current_rss_kb()
    print(
        json.dumps(
            {
                "mode": args.mode,
                "calls": args.calls,
                "peak_before_kb": before,
                "peak_after_kb": after,
                "rss_before_kb": start_rss,
                "rss_after_kb": end_rss,
                "growth_mb": (after - before) / 1024,
            }
        )
    )


def measure_load(tmp: Path, arguments: list[tuple[str, str, int]]) -> dict[str, object]:
    """Peak RSS growth of ``load_bundle`` on a bundle of ``len(arguments)`` calls, with
    the loaded bundle still referenced at the end, against the size of its spans.jsonl."""
    sftrace.configure(tracer_provider=TracerProvider())
    path = tmp / "load.sftrace"
    with sftrace.record("bench", output=path):
        call_tool(traced_search, arguments)
    with sftrace.record("bench", output=tmp / "warm-up.sftrace"):
        call_tool(traced_search, arguments[:50])
    sftrace.load_bundle(tmp / "warm-up.sftrace")
    size = (path / "spans.jsonl").stat().st_size
    gc.collect()
    reset_peak()
    before = peak_rss_kb()
    bundle = sftrace.load_bundle(path)
    after = peak_rss_kb()
    assert len(bundle.calls) == len(arguments)
    return {
        "mode": "load",
        "calls": len(arguments),
        "spans_bytes": size,
        "growth_mb": (after - before) / 1024,
        "ratio": (after - before) * 1024 / size,
    }


if __name__ == "__main__":
    main()
