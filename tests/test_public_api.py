"""The public surface: sorted, complete, and light to import."""

from __future__ import annotations

import subprocess
import sys

import sftrace


def test_all_is_sorted_and_matches_public_names() -> None:
    """__all__ lists every public name of the package, sorted, and nothing else."""
    public = {
        name
        for name in dir(sftrace)
        if not name.startswith("_") and not isinstance(getattr(sftrace, name), type(sys))
    }
    assert sftrace.__all__ == sorted(sftrace.__all__)
    assert set(sftrace.__all__) - {"__version__"} == public


def test_every_public_error_derives_from_sftrace_error() -> None:
    """Users can catch any error of the library with SftraceError."""
    errors = [
        getattr(sftrace, name)
        for name in sftrace.__all__
        if name.endswith("Error") and isinstance(getattr(sftrace, name), type)
    ]
    assert len(errors) >= 9
    assert all(issubclass(error, sftrace.SftraceError) for error in errors)


def test_import_is_light() -> None:
    """Importing sftrace loads neither the CLI toolkit nor any LLM SDK."""
    code = (
        "import sys, sftrace\n"
        "heavy = {'click', 'rich', 'openai', 'anthropic', 'langchain_core', 'httpx', 'grpc'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
