"""Shared fixtures: every test runs on its own tracer provider, in its own directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sftrace.testing import isolated_tracing

# A floor on the number of tests collected: a refactor that silently stops collecting
# most of the suite fails the run instead of passing it.
MIN_TESTS_COLLECTED = 50


@pytest.fixture(autouse=True)
def spans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Isolated sftrace configuration; yields the finished spans of the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SFTRACE_DIR", raising=False)
    with isolated_tracing(bundle_dir=tmp_path / "traces") as memory:
        yield memory


def pytest_collection_finish(session: pytest.Session) -> None:
    selected = session.config.getoption("-k") or session.config.getoption("-m")
    explicit = any("::" in arg or arg.endswith(".py") for arg in session.config.args)
    if not selected and not explicit and len(session.items) < MIN_TESTS_COLLECTED:
        raise pytest.UsageError(
            f"only {len(session.items)} tests collected (expected at least "
            f"{MIN_TESTS_COLLECTED}); is test discovery broken?"
        )
