"""A real backend: Arize Phoenix renders a recorded run as AGENT, TOOL and LLM spans."""

from __future__ import annotations

import time
import urllib.error
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from otlp_components import Phoenix

import sftrace
from interchange_helpers import failing_agent
from sftrace import record

pytestmark = [pytest.mark.otlp, pytest.mark.slow]
INGEST_TIMEOUT_S = 60.0


def spans_of_trace(phoenix: Phoenix, trace_id: str, count: int) -> list[dict[str, Any]]:
    """Poll Phoenix's REST API until the trace's spans are stored (ingestion is async)."""
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            reply = phoenix.get("/v1/projects/default/spans?limit=1000")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404 until the first span created the project
                raise
        else:
            found = [s for s in reply["data"] if s["context"]["trace_id"] == trace_id]
            if len(found) >= count:
                return found
        time.sleep(0.2)
    pytest.fail(f"Phoenix stored {len(found)} of {count} spans of trace {trace_id}")


@pytest.mark.parametrize(
    ("encoder", "protocol"), [("auto", None), ("auto", "http/protobuf"), ("official", None)]
)
def test_phoenix_shows_the_run_as_agent_tool_and_llm_spans(
    phoenix: Phoenix, encoder: str, protocol: str | None
) -> None:
    """A failed run exported over OTLP/HTTP reads back from Phoenix with the span kinds,
    parent links, inputs and error status it was recorded with: with the official
    protobuf exporter, with sftrace's OTLP/protobuf asked for, and with 'auto' alone
    (Phoenix answers OTLP/JSON with 415, so sftrace hands over to its protobuf)."""
    provider = TracerProvider()  # random ids: each run is a trace of its own in Phoenix
    sftrace.configure(
        tracer_provider=provider,
        otlp_endpoint=phoenix.url,
        otlp_encoder=encoder,
        otlp_protocol=protocol,
    )
    with pytest.raises(ValueError, match="sold out"), record("phoenix-agent") as session:
        failing_agent()
    assert provider.force_flush(10_000)
    trace_id = session.trace_id or ""
    stored = {span["name"]: span for span in spans_of_trace(phoenix, trace_id, 4)}
    assert {name: span["span_kind"] for name, span in stored.items()} == {
        "invoke_agent phoenix-agent": "AGENT",
        "execute_tool flight_search": "TOOL",
        "chat fake-1": "LLM",
        "execute_tool book": "TOOL",
    }
    run = stored["invoke_agent phoenix-agent"]
    assert run["parent_id"] is None
    assert run["status_code"] == "ERROR"
    for name in ("execute_tool flight_search", "chat fake-1", "execute_tool book"):
        assert stored[name]["parent_id"] == run["context"]["span_id"]
    search = stored["execute_tool flight_search"]["attributes"]
    assert search["input.value"] == '{"destination":"Lisbon","max_results":3}'
    assert stored["chat fake-1"]["attributes"]["llm.model_name"] == "fake-1-2025"
