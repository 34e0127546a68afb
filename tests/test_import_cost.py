"""The record path stays light: pydantic (replay uses it to restore return types) is not
imported by ``import sftrace``, by the recording API, or by recording a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _run(code: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return result.stdout.strip()


def test_recording_api_does_not_import_pydantic(tmp_path: Path) -> None:
    """Importing record, trace_tool and llm_request leaves pydantic unloaded."""
    code = (
        "import sys\n"
        "from sftrace import record, trace_tool, llm_request\n"
        "print('pydantic' in sys.modules)\n"
    )
    assert _run(code, tmp_path) == "False"


def test_recording_a_run_does_not_import_pydantic(tmp_path: Path) -> None:
    """Recording a run with a tool call and writing its bundle leaves pydantic unloaded."""
    code = (
        "import sys\n"
        "from sftrace import record, trace_tool\n"
        "@trace_tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "with record('tiny', output='tiny.sftrace') as session:\n"
        "    session.set_output(add(1, 2))\n"
        "import os\n"
        "assert os.path.isfile('tiny.sftrace/manifest.json')\n"
        "print('pydantic' in sys.modules)\n"
    )
    assert _run(code, tmp_path) == "False"
