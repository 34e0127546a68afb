"""Shared fixtures: every test runs on its own tracer provider, in its own directory,
offline (no socket outside loopback, in this process and in Python subprocesses)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sftrace.testing import isolated_tracing

# Fixtures shared by the OTLP test modules (provider, sink, clean_otlp_env).
pytest_plugins = ["otlp_fixtures"]

# What the libraries the tests drive would send on their own, switched off before any of
# them is imported (subprocesses inherit it): Traceloop's telemetry, the OpenAI Agents
# SDK's trace export, LiteLLM's download of its model-cost map, Logfire's export to its
# cloud, Phoenix's telemetry. The network guard below catches anything left.
OFFLINE_ENVIRONMENT = {
    "TRACELOOP_TELEMETRY": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}
for _name, _value in OFFLINE_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

# The network guard (tests/loopback_site/loopback_guard.py): here, and through its
# sitecustomize.py in every Python subprocess that inherits PYTHONPATH.
GUARD_DIR = Path(__file__).parent / "loopback_site"
sys.path.insert(0, str(GUARD_DIR))
import loopback_guard  # noqa: E402

loopback_guard.install()
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(GUARD_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
)
_network_log_fd, _network_log = tempfile.mkstemp(prefix="sftrace-network-", suffix=".log")
os.close(_network_log_fd)
os.environ[loopback_guard.LOG_VARIABLE] = _network_log


@pytest.fixture(autouse=True)
def _loopback_only() -> Iterator[None]:
    """Fails the test when it (or a subprocess, or a thread) reached outside loopback."""
    yield
    blocked = loopback_guard.take_attempts()
    with open(_network_log, "r+", encoding="utf-8") as log:
        blocked += [line.rstrip("\n") for line in log]
        log.truncate(0)
    if blocked:
        pytest.fail(
            "network access outside loopback (tests must run offline; switch the library's "
            "own telemetry/export off, see OFFLINE_ENVIRONMENT in tests/conftest.py):\n  "
            + "\n  ".join(blocked),
            pytrace=False,
        )


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


def pytest_unconfigure(config: pytest.Config) -> None:
    Path(_network_log).unlink(missing_ok=True)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # The coverage floor (fail_under in pyproject's [tool.coverage.report]) holds for the
    # whole suite; a partial run still prints the report but is not held to it.
    plugin = config.pluginmanager.get_plugin("_cov")
    if plugin is not None and not _whole_suite(config):
        plugin.options.cov_fail_under = None
