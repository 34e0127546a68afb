"""sftrace beside the tracing set-ups applications already have (issue 18, item 0).

For each set-up (a plain SDK provider, Logfire, Logfire instrumenting Pydantic AI beside
sftrace's Pydantic AI integration, Phoenix ``register()``, OpenLLMetry's
``Traceloop.init``, OpenInference's instrumentation beside sftrace's), in either order of
set-up, a recorded run reaches the application's exporter exactly once with the parents
the bundle has, and the bundle is written; with a sampler that drops everything, the
bundle is still written and the application's exporter gets nothing. Each case runs in
a fresh interpreter (tests/dropin_setups_child.py): the set-ups patch the process.

Traceloop pins OpenTelemetry to an older version, so it lives in its own virtualenv,
``.venv-traceloop`` (made by .ci/run: ``pip install -e . traceloop-sdk``); locally the
Traceloop cases are skipped when it is absent, in CI (``SFTRACE_REQUIRE_TRACELOOP=1``)
they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import sample_agents as agents
import sftrace
from sftrace._record.config import get_state

HERE = Path(__file__).parent
ROOT = HERE.parent
TRACELOOP_PYTHON = ROOT / ".venv-traceloop" / "bin" / "python"
BOOKING_CALLS = ["flight_search", "fake-1", "book"]


def child_python(setup: str) -> str:
    if setup != "traceloop":
        return sys.executable
    if TRACELOOP_PYTHON.exists():
        return str(TRACELOOP_PYTHON)
    reason = (
        f"Traceloop's virtualenv {TRACELOOP_PYTHON} is absent (traceloop-sdk pins "
        f"OpenTelemetry 1.44; .ci/run makes it: python3 -m venv .venv-traceloop && "
        f".venv-traceloop/bin/pip install -e . traceloop-sdk)"
    )
    if os.environ.get("SFTRACE_REQUIRE_TRACELOOP") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def run_setup(setup: str, order: str, sampling: str, tmp_path: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    command = [child_python(setup), str(HERE / "dropin_setups_child.py")]
    done = subprocess.run(
        [*command, setup, order, sampling, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # importing phoenix.otel imports the Phoenix server: ~20 s of CPU
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return result


SETUPS = ["sdk", "logfire", "pydantic-ai", "phoenix", "traceloop", "openinference"]
# What the run of each set-up calls: the child's booking agent, or an agent whose library
# the set-up instruments too (its replay is checked as well).
CALLS = {
    "openinference": ["gpt-4o"],
    "pydantic-ai": ["gpt-4o", "parcel_status", "gpt-4o"],
}
OUTPUTS = {"openinference": "Lisbon it is", "pydantic-ai": "It shipped."}


@pytest.mark.slow
@pytest.mark.parametrize("order", ["app-first", "sftrace-first"])
@pytest.mark.parametrize("setup", SETUPS)
def test_a_run_reaches_the_applications_exporter_once_with_its_parents(
    setup: str, order: str, tmp_path: Path
) -> None:
    result = run_setup(setup, order, "on", tmp_path)
    bundle = {span["id"]: span["parent"] for span in result["bundle"]}
    exported = result["exported"]
    ids = [span["id"] for span in exported]
    assert len(ids) == len(set(ids)), f"a span was exported twice: {exported}"
    assert result["app_span"] in ids  # the application's own span still goes out
    # Every span of the bundle reached the application's exporter, with the same parent.
    assert {span["id"]: span["parent"] for span in exported if span["id"] in bundle} == bundle
    assert result["calls"] == CALLS.get(setup, BOOKING_CALLS)
    if setup == "openinference":
        # OpenInference's span of the same request is a child of sftrace's LLM span.
        (theirs,) = [s for s in exported if s["scope"] == "openinference.instrumentation.openai"]
        (chat,) = [s for s in result["bundle"] if s["name"] == "chat gpt-4o"]
        assert theirs["parent"] == chat["id"]
    elif setup == "pydantic-ai":
        check_pydantic_ai_spans(result)
    else:
        assert set(ids) == {*bundle, result["app_span"]}
    if setup in OUTPUTS:
        assert result["output"] == OUTPUTS[setup]
        # The replay answers from the bundle, with their instrumentation still on.
        assert result["replayed"] == {
            "status": "completed",
            "output": OUTPUTS[setup],
            "refused": [],
        }


def check_pydantic_ai_spans(result: dict[str, Any]) -> None:
    """Pydantic AI's spans (through Logfire) and sftrace's reach the one exporter, nested:
    sftrace's run span > Pydantic AI's agent run > its model request or tool run >
    sftrace's LLM or tool span. (The exporter also got the replayed run: a trace of its
    own, nested the same way.)"""
    exported = result["exported"]
    by_id = {span["id"]: span for span in exported}
    ours = [s for s in exported if s["scope"] == "sftrace" and s["parent"] is not None]
    theirs = [s for s in exported if s["scope"] == "pydantic-ai"]
    assert sorted(s["name"] for s in ours) == sorted(
        s["name"] for s in theirs if s["parent"] and by_id[s["parent"]]["scope"] == "pydantic-ai"
    )
    agent_runs = [s for s in theirs if s["name"] == "invoke_agent support"]
    assert len(agent_runs) == 2  # the recorded run and the replayed one
    for agent_run in agent_runs:
        assert by_id[agent_run["parent"]]["name"] == "invoke_agent child-agent"
    for span in ours:
        parent = by_id[span["parent"]]
        # the same operation, one level up: Pydantic AI's "chat gpt-4o" holds sftrace's
        assert (parent["scope"], parent["name"]) == ("pydantic-ai", span["name"])
        assert by_id[parent["parent"]]["name"] == "invoke_agent support"
    # The bundle holds the recorded run's spans of both, as exported.
    names = sorted(span["name"] for span in result["bundle"])
    assert names == sorted(
        ["invoke_agent child-agent", "invoke_agent support"]
        + 2 * ["chat gpt-4o", "chat gpt-4o", "execute_tool parcel_status"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("order", ["app-first", "sftrace-first"])
@pytest.mark.parametrize("setup", SETUPS)
def test_a_bundle_never_depends_on_the_applications_sampler(
    setup: str, order: str, tmp_path: Path
) -> None:
    result = run_setup(setup, order, "off", tmp_path)
    assert result["app_span_sampled"] is False
    assert result["calls"] == CALLS.get(setup, BOOKING_CALLS)
    assert result["exported"] == []  # what the application's sampler dropped stays dropped
    if setup == "pydantic-ai":
        # Pydantic AI's spans were dropped: sftrace's are parented on its run span, not
        # on spans the bundle lacks (loading it checks every parent comes first).
        (root,) = [span["id"] for span in result["bundle"] if span["parent"] is None]
        assert [span["parent"] for span in result["bundle"]] == [None] + 3 * [root]
        assert result["replayed"]["status"] == "completed"


# --- in process: the same rules on providers given explicitly -------------------------


def test_spans_the_providers_sampler_drops_are_still_recorded(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=TraceIdRatioBased(0))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    sftrace.configure(tracer_provider=provider, bundle_dir=tmp_path)
    with sftrace.record("sampled-out") as session:
        agents.booking_agent()
    bundle = sftrace.load_bundle(session.path or "", verify_integrity=True)
    assert [call.name for call in bundle.calls] == BOOKING_CALLS
    # The spans kept their attributes (a dropping sampler's result carries none) ...
    assert bundle.manifest.agent_name == "sampled-out"
    # ... and stayed unsampled: the application's exporter got none of them.
    assert memory.get_finished_spans() == ()


def test_a_call_inside_a_dropped_span_of_another_instrumentation_keeps_a_parent(
    tmp_path: Path,
) -> None:
    """Another instrumentation's span (Pydantic AI's agent run) that the sampler dropped is
    in no bundle: the calls inside it are parented on sftrace's innermost span instead."""
    provider = TracerProvider(sampler=TraceIdRatioBased(0))
    sftrace.configure(tracer_provider=provider, bundle_dir=tmp_path)
    other = provider.get_tracer("another-instrumentation")
    with sftrace.record("dropped-parent") as session:
        with other.start_as_current_span("agent run") as dropped:
            agents.booking_agent()
        assert not dropped.is_recording()
    bundle = sftrace.load_bundle(session.path or "", verify_integrity=True)
    assert [call.name for call in bundle.calls] == BOOKING_CALLS
    (root,) = [span["spanId"] for span in bundle.spans if not span.get("parentSpanId")]
    assert [span.get("parentSpanId") for span in bundle.spans[1:]] == 3 * [root]


def test_spans_the_sampler_drops_are_not_exported_over_otlp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = TracerProvider(sampler=TraceIdRatioBased(0))
    sftrace.configure(tracer_provider=provider, otlp_endpoint="http://127.0.0.1:9")
    otlp = get_state().otlp
    assert otlp is not None
    queued: list[Any] = []
    monkeypatch.setattr(otlp.worker, "put", queued.append)
    with sftrace.record("sampled-out", output=tmp_path / "run.sftrace"):
        agents.booking_agent()
    assert sftrace.load_bundle(tmp_path / "run.sftrace").calls
    assert queued == []


class Proxy(trace.TracerProvider):
    """A provider that delegates to a replaceable SDK provider, as Logfire's does."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return self.provider.get_tracer(*args, **kwargs)


def test_a_proxy_is_looked_through_and_followed_when_its_provider_changes(
    tmp_path: Path,
) -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    providers = [TracerProvider(), TracerProvider()]
    for provider, memory in zip(providers, (first, second), strict=True):
        provider.add_span_processor(SimpleSpanProcessor(memory))
    proxy = Proxy(providers[0])
    sftrace.configure(tracer_provider=proxy, bundle_dir=tmp_path)
    with sftrace.record("one"):
        agents.booking_agent()
    assert get_state().provider is providers[0]
    proxy.provider = providers[1]  # logfire.configure() called again
    with sftrace.record("two") as session:
        agents.booking_agent()
    assert get_state().provider is providers[1]
    names = {span.name for span in second.get_finished_spans()}
    assert "invoke_agent two" in names
    assert "invoke_agent one" not in names
    assert {span.name for span in first.get_finished_spans()} == {
        "invoke_agent one",
        "execute_tool flight_search",
        "chat fake-1",
        "execute_tool book",
    }
    assert sftrace.load_bundle(session.path or "").calls


def test_a_proxy_without_an_sdk_provider_is_refused() -> None:
    with pytest.raises(sftrace.ConfigError, match="proxy around one"):
        sftrace.configure(tracer_provider=Proxy(trace.NoOpTracerProvider()))  # type: ignore[arg-type]


# --- dependencies ---------------------------------------------------------------------


def _next_minor(distribution: str) -> Version:
    """The release after the installed one's minor series (1.45.2 -> 1.46.0)."""
    installed = Version(metadata.version(distribution))
    pre = "b0" if installed.is_prerelease else ""
    return Version(f"{installed.major}.{installed.minor + 1}.0{pre}")


def _holds_back(distribution: str, seen: set[str]) -> list[str]:
    """Requirements in ``distribution``'s installed dependency tree that keep an
    ``opentelemetry-*`` package from its next minor release."""
    key = canonicalize_name(distribution)
    if key in seen or key.startswith("opentelemetry-"):
        return []  # OpenTelemetry's own packages move together
    seen.add(key)
    try:
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for text in requirements:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name.startswith("opentelemetry-"):
            try:
                upcoming = _next_minor(name)
            except metadata.PackageNotFoundError:
                upcoming = None
            if upcoming is not None and not requirement.specifier.contains(upcoming, True):
                found.append(f"{distribution} requires {text} (excludes {upcoming})")
        found += _holds_back(requirement.name, seen)
    return found


def test_no_extra_holds_opentelemetry_back() -> None:
    """Nothing an integration's extra installs keeps OpenTelemetry from its next minor
    release, so installing one cannot hold sftrace's core packages on an older release
    (pyproject's comment). ``<2`` is fine; logfire-sdk's ``<1.46`` would not be."""
    requirements = [Requirement(text) for text in metadata.requires("sftrace") or []]
    # The integrations' extras; not the test extra (the tests' own tools: logfire-sdk's
    # cap is what the Logfire drop-in tests run with, not what a user's extra installs).
    extras = [
        requirement
        for requirement in requirements
        if requirement.marker is not None
        and requirement.marker.evaluate({"extra": "*"}) is False
        and not requirement.marker.evaluate({"extra": "test"})
    ]
    assert extras, "sftrace's extras are not visible (is sftrace installed?)"
    caps = []
    for requirement in extras:
        caps += _holds_back(requirement.name, set())
    assert caps == []
