"""The manifest of a bundle as it is written: header fields, totals, environment."""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from sftrace._bundle.format import FORMAT_NAME, FORMAT_VERSION, STATUS_COMPLETED, STATUS_FAILED
from sftrace._model import attributes as A
from sftrace._model.otlp_json import encode_attributes, span_id_hex, trace_id_hex
from sftrace._version import __version__


def environment() -> dict[str, str]:
    """What produced a bundle (no host names, no user names)."""
    from opentelemetry.sdk.version import __version__ as otel_sdk_version

    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sys.platform,
        "sftrace": __version__,
        "opentelemetry_sdk": otel_sdk_version,
    }


def utc_iso(nanos: int | None = None) -> str:
    moment = (
        _dt.datetime.now(_dt.UTC)
        if nanos is None
        else _dt.datetime.fromtimestamp(nanos / 1e9, _dt.UTC)
    )
    return moment.isoformat().replace("+00:00", "Z")


def journal_header(trace_id: int, **fields: Any) -> dict[str, Any]:
    """The ``header.json`` of a run's journal: what recovery needs to rebuild it."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "trace_id": trace_id_hex(trace_id),
        "environment": environment(),
        **fields,
    }


@dataclass
class RunTotals:
    spans: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, attributes: Any) -> None:
        self.spans += 1
        kind = attributes.get(A.KIND)
        if kind == A.KIND_TOOL:
            self.tool_calls += 1
        elif kind == A.KIND_LLM:
            self.llm_calls += 1
            input_tokens = attributes.get(A.GEN_AI_USAGE_INPUT_TOKENS) or 0
            output_tokens = attributes.get(A.GEN_AI_USAGE_OUTPUT_TOKENS) or 0
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.total_tokens += (
                attributes.get(A.USAGE_TOTAL_TOKENS) or input_tokens + output_tokens
            )
            self.cost_usd += attributes.get(A.COST_USD) or 0.0


def build_manifest(header: dict[str, Any], root: ReadableSpan, totals: RunTotals) -> dict[str, Any]:
    """The manifest of a finished run, from its journal header, run span and totals."""
    context = root.context
    assert context is not None
    scope = root.instrumentation_scope
    return manifest_from_parts(
        header,
        attributes=root.attributes or {},
        trace_id=trace_id_hex(context.trace_id),
        root_span_id=span_id_hex(context.span_id),
        start=root.start_time or 0,
        end=root.end_time or 0,
        resource_attributes=encode_attributes(root.resource.attributes),
        scope={"name": scope.name, "version": scope.version or ""} if scope else None,
        totals=totals,
    )


def manifest_from_parts(
    header: dict[str, Any],
    *,
    attributes: Mapping[str, Any],
    trace_id: str,
    root_span_id: str,
    start: int,
    end: int,
    resource_attributes: list[dict[str, Any]],
    scope: dict[str, Any] | None,
    totals: RunTotals,
) -> dict[str, Any]:
    """The manifest of a finished run from plain values (also used by ``sftrace import``).

    ``resource_attributes`` are OTLP/JSON key-value objects; ``start``/``end`` nanoseconds.
    """
    status = attributes.get(A.STATUS) or STATUS_COMPLETED
    failure = None
    if status == STATUS_FAILED:
        failure = {
            "type": attributes.get(A.ERROR_TYPE),
            "message": attributes.get(A.ERROR_MESSAGE),
            "step": attributes.get(A.ERROR_STEP),
        }
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "run_id": str(attributes.get(A.RUN_ID) or header.get("run_id")),
        "trace_id": trace_id,
        "root_span_id": root_span_id,
        "agent_name": str(attributes.get(A.GEN_AI_AGENT_NAME) or header.get("agent_name")),
        "created_at": header.get("created_at") or utc_iso(start),
        "started_at": utc_iso(start),
        "ended_at": utc_iso(end),
        "status": status,
        "failure": failure,
        "totals": {
            "spans": totals.spans,
            "tool_calls": totals.tool_calls,
            "llm_calls": totals.llm_calls,
            "input_tokens": totals.input_tokens,
            "output_tokens": totals.output_tokens,
            "total_tokens": totals.total_tokens,
            "cost_usd": round(totals.cost_usd, 10),
            "duration_ms": round((end - start) / 1e6, 3),
        },
        "replay_of": attributes.get(A.REPLAY_OF),
        "environment": header.get("environment") or environment(),
        "resource": {"attributes": resource_attributes},
        "scope": scope,
        "notes": [],
    }
    return manifest
