"""Run by ``test_otlp_config.py`` in a fresh interpreter: sftrace set up as in production.

``python dropin_child.py SCENARIO WORKDIR`` records one run of the sample booking agent
and prints one JSON line describing what happened. Scenarios:

- ``env``: ``configure()`` with no arguments (the environment says everything);
- ``dropin``: the application made and registered its own provider first;
- ``disabled``: like ``env``, under ``OTEL_SDK_DISABLED=true``;
- ``implicit``: no ``configure()`` call at all (``record()`` configures itself).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
import sftrace
from sftrace._record.config import get_state


def main(scenario: str, workdir: Path) -> dict[str, Any]:
    os.chdir(workdir)
    result: dict[str, Any] = {}
    memory = InMemorySpanExporter()
    if scenario == "dropin":
        app_provider = TracerProvider()
        app_provider.add_span_processor(SimpleSpanProcessor(memory))
        trace.set_tracer_provider(app_provider)
    if scenario != "implicit":
        sftrace.configure(bundle_dir=workdir / "traces")
    with sftrace.record("child-agent") as session:
        if scenario == "dropin":
            with trace.get_tracer("app").start_as_current_span("app work"):
                agents.booking_agent()
        else:
            agents.booking_agent()
    provider = get_state().provider
    bundle = sftrace.load_bundle(session.path or "", verify_integrity=True)
    result["trace_id"] = session.trace_id
    result["calls"] = [call.name for call in bundle.calls]
    result["bundle"] = [span["spanId"] for span in bundle.spans]
    result["global_is_sftrace"] = trace.get_tracer_provider() is provider
    result["global_is_proxy"] = isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    if scenario == "dropin":
        result["same_provider"] = provider is trace.get_tracer_provider()
        result["memory"] = [
            f"{s.context.span_id:016x}" for s in memory.get_finished_spans() if s.context
        ]
    if scenario == "disabled":
        replayed = sftrace.replay_run(bundle, agents.booking_agent)
        result["replayed"] = replayed.status
    return result  # queued OTLP spans are sent by the provider's shutdown at exit


if __name__ == "__main__":
    print(orjson.dumps(main(sys.argv[1], Path(sys.argv[2]))).decode())
