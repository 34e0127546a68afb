"""The benchmark harness keeps working as sftrace changes (it asserts no timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"


@pytest.mark.slow
@pytest.mark.otlp
def test_bench_runs_every_item_and_writes_json(tmp_path: Path) -> None:
    """bench.py on tiny runs reports items 1-11 and the payload mix, checks each target,
    drops no span."""
    out = tmp_path / "results.json"
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--lengths",
            "20,40",
            "--repeats",
            "1",
            "--min-calls",
            "40",
            "--memory-calls",
            "300",
            "--load-memory-calls",
            "300",
            "--json",
            str(out),
        ],
        cwd=BENCH.parents[1],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    names = [row["name"] for row in report["table"]]
    for item in range(1, 12):
        assert any(name.startswith(f"{item}. ") for name in names), (item, names)
    assert any(name.startswith("4m. ") for name in names), names  # the payload mix
    assert "error" not in report["otlp"], report["otlp"]
    assert report["otlp"]["dropped"] == 0
    expected_checks = {
        "passthrough_overhead_ns",
        "record_vs_journal@40",
        "record_mix_vs_journal@40",
        "record_mix_flat",
        "replay_strict_vs_bare@40",
        "record_flat",
        "record_llm_flat",
        "replay_strict_flat",
        "replay_unordered_flat",
        "load_vs_floor",
        "size_vs_floor",
        "otlp_on_vs_off",
        "otlp_spans_per_s",
        "memory_growth_mb",
        "load_memory_ratio",
        *(f"redaction_us_per_kb_{shape}" for shape in range(11)),
    }
    assert expected_checks <= report["checks"].keys()
    assert "wall/call" in result.stdout
