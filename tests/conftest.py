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


def _whole_suite(config: pytest.Config) -> bool:
    """True when the run selects the whole suite (no -k, -m or explicit test files)."""
    selected = config.getoption("-k") or config.getoption("-m")
    explicit = any("::" in arg or arg.endswith(".py") for arg in config.args)
    return not selected and not explicit


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.items:
        # pytest exits 5 on an empty selection; make that an error with a reason.
        raise pytest.UsageError("no tests collected; is test discovery broken?")
    if _whole_suite(session.config) and len(session.items) < MIN_TESTS_COLLECTED:
        raise pytest.UsageError(
            f"only {len(session.items)} tests collected (expected at least "
            f"{MIN_TESTS_COLLECTED}); is test discovery broken?"
        )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # The coverage floor (fail_under in pyproject's [tool.coverage.report]) holds for the
    # whole suite; a partial run still prints the report but is not held to it.
    plugin = config.pluginmanager.get_plugin("_cov")
    if plugin is not None and not _whole_suite(config):
        plugin.options.cov_fail_under = None
