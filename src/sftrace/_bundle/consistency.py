"""Whether a bundle's manifest agrees with its spans (totals, root span, run id, status)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sftrace._bundle.format import SPANS_FILE
from sftrace._bundle.manifest import Manifest
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.otlp_json import decode_attributes


def consistency_problems(
    manifest: Manifest,
    display: str,
    *,
    span_count: int,
    calls: Sequence[Call],
    run_span: dict[str, Any],
) -> list[str]:
    """Disagreements between the manifest (``display``) and the spans (e.g. a span line
    deleted): the totals, the root span id and the run id."""
    problems = []
    counted = {
        "spans": span_count,
        "tool_calls": sum(1 for call in calls if call.kind == A.KIND_TOOL),
        "llm_calls": sum(1 for call in calls if call.kind == A.KIND_LLM),
    }
    for field_name, actual in counted.items():
        declared = getattr(manifest.totals, field_name)
        if declared != actual:
            problems.append(
                f"{display}: totals.{field_name} is {declared}, but {SPANS_FILE} holds {actual}"
            )
    run_span_id = run_span.get("spanId")
    if manifest.root_span_id is not None and manifest.root_span_id != run_span_id:
        problems.append(
            f"{display}: root_span_id is {manifest.root_span_id!r}, but the run span in "
            f"{SPANS_FILE} is {run_span_id!r}"
        )
    run_attributes = decode_attributes(run_span.get("attributes", []))
    span_run_id = run_attributes.get(A.RUN_ID)
    if span_run_id is not None and span_run_id != manifest.run_id:
        problems.append(
            f"{display}: run_id is {manifest.run_id!r}, but the run span in {SPANS_FILE} "
            f"says {span_run_id!r}"
        )
    # The status decides how a replay is judged ("interrupted" accepts an agent going past
    # the recording): the manifest must say what the run span says.
    span_status = run_attributes.get(A.STATUS)
    if isinstance(span_status, str) and span_status != manifest.status:
        problems.append(
            f"{display}: status is {manifest.status!r}, but the run span in {SPANS_FILE} "
            f"says {span_status!r}"
        )
    return problems
