"""``examples/collector``: production run -> Rotel -> collector file -> import -> replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.otlp, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "collector" / "main.py"


def test_the_collector_example_reproduces_the_production_failure(tmp_path: Path) -> None:
    """The example runs end to end: one bundle imported, and its replay reproduces the run."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 bundle(s) written, 0 run(s) skipped" in done.stdout
    assert "reproduced: the replay matched the recording and its failure" in done.stdout
    [bundle] = (tmp_path / ".sftrace" / "collector-example" / "imported").iterdir()
    assert bundle.name.startswith("booking-agent-")
