"""What a report page shows, as a compact JSON payload (the page's script renders it).

Two documents go into a page: the *payload* (``build_run`` and ``build_index`` below,
``build_compare`` in ``compare_data``: the header, the rows of the timeline or of the
alignment, the findings) and the *values* table (``values``), one JSON array
holding every recorded input and output as its JSON text. The payload refers to a value
by its index and carries each value's character range in the table, so the page parses
only the values it shows: a run of 100,000 calls or hundreds of megabytes opens without
parsing them all.

Everything recorded is untrusted text. It never reaches the page as markup: the payload
and the table are JSON inside ``<script type="application/json">`` with ``<``, ``>``,
``&`` and U+2028/U+2029 escaped (``values.script_json``), and the page's script writes them
with ``textContent`` only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final

import orjson

from sftrace._bundle.reader import Bundle
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.otlp_json import decode_attributes
from sftrace._model.serialize import loads
from sftrace._version import __version__
from sftrace._view.values import Values

# --- calls -------------------------------------------------------------------------


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def call_detail(call: Call, values: Values) -> dict[str, Any]:
    """What the page shows about one call (values by index into the table)."""
    call.check_values()  # its texts go into the page as JSON
    detail: dict[str, Any] = {
        "seq": call.seq,
        "kind": call.kind,
        "name": call.name,
        "label": call.label,
        "policy": call.policy,
        "dur": round(call.duration_ms, 3),
        "in": values.add_json(call.input_json),
    }
    if call.provider is not None:
        detail["provider"] = call.provider
    if call.output_json is not None:
        detail["out"] = values.add_json(call.output_json)
    if call.error is not None:
        detail["err"] = {"type": call.error.type, "message": call.error.message}
    attributes = call.attributes
    redactions = attributes.get(A.REDACTIONS)
    if isinstance(redactions, str):
        try:
            detail["red"] = loads(redactions)
        except ValueError:
            detail["red"] = [{"field": "?", "path": "?", "rule": redactions}]
    usage = {
        key: number
        for key, attribute in _USAGE_ATTRIBUTES
        if attribute in attributes and (number := _number(attributes[attribute])) is not None
    }
    if usage:
        detail["usage"] = usage
    return detail


_USAGE_ATTRIBUTES: Final = (
    ("input", A.GEN_AI_USAGE_INPUT_TOKENS),
    ("output", A.GEN_AI_USAGE_OUTPUT_TOKENS),
    ("total", A.USAGE_TOTAL_TOKENS),
    ("cost_usd", A.COST_USD),
)


# --- a recorded run: header and timeline ---------------------------------------------


def run_header(bundle: Bundle) -> dict[str, Any]:
    manifest = bundle.manifest
    failure = manifest.failure
    recorded_with = manifest.environment.get("sftrace")
    return {
        "agent": manifest.agent_name,
        "run_id": manifest.run_id,
        "status": manifest.status,
        "failure": None if failure is None else failure.to_json(),
        "started_at": manifest.started_at,
        "totals": manifest.totals.to_json(),
        "recorded_with": recorded_with if isinstance(recorded_with, str) else None,
        "replay_of": (manifest.derived_from or {}).get("run_id"),
        "path": str(bundle.path) if bundle.path is not None else None,
        "metadata": _metadata_text(bundle.metadata),
        "notes": list(manifest.notes),
    }


def _metadata_text(metadata: Any) -> str | None:
    """``record(metadata=...)`` as compact JSON for the header (None: none given)."""
    if metadata is None:
        return None
    return orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS).decode()


def _nanos(span: dict[str, Any], key: str) -> int:
    try:
        return int(span.get(key, 0))
    except (TypeError, ValueError):
        return 0


# A span of the waterfall before it is placed: start (ns), parent span id, id, its row.
_Node = tuple[int, str | None, str, dict[str, Any]]


def build_run(bundle: Bundle, values: Values) -> dict[str, Any]:
    """The payload of a recorded run's page: header, and the spans as a waterfall.

    Rows come in tree order (children by start time), each with its depth, start and
    duration in milliseconds from the run's start; state changes are rows under the run.
    """
    rows = _waterfall(bundle.run_span, _run_row(bundle, values), _nodes(bundle, values))
    total = 0.0
    for row in rows:
        total = max(total, row["s"] + row["dur"])
    return {"page": "run", "header": run_header(bundle), "rows": rows, "total_ms": total}


def _nodes(bundle: Bundle, values: Values) -> list[_Node]:
    """Every span but the run's (calls, the application's own spans) and state changes."""
    run_id = bundle.run_span["spanId"]
    calls = {call.span_id: call for call in bundle.calls}
    nodes: list[_Node] = []
    for call in bundle.calls:
        row = call_detail(call, values)
        row["k"] = call.kind
        nodes.append((call.start_time_ns, call.parent_span_id, call.span_id, row))
    if len(bundle.spans) > len(calls) + 1:  # the application's own spans too
        for span in bundle.spans:
            span_id = span["spanId"]
            if span_id in calls or span_id == run_id:
                continue
            start = _nanos(span, "startTimeUnixNano")
            row = {
                "k": "span",
                "name": span["name"],
                "label": span["name"],
                "dur": round(max(0, _nanos(span, "endTimeUnixNano") - start) / 1e6, 3),
                "attrs": values.add(decode_attributes(span.get("attributes", ()))),
            }
            nodes.append((start, span.get("parentSpanId") or None, span_id, row))
    for index, change in enumerate(bundle.state_changes):
        row = {
            "k": "state",
            "name": change.key,
            "label": f"state {change.key}",
            "dur": 0,
            "before": values.add(change.before),
            "after": values.add(change.after),
        }
        nodes.append((change.time_ns, run_id, f"state-{index}", row))
    return nodes


def _waterfall(run_span: dict[str, Any], run_row: dict[str, Any], nodes: list[_Node]) -> list[Any]:
    """The rows in tree order (depth first, children by start time), with depth and start."""
    run_id = run_span["spanId"]
    start0 = _nanos(run_span, "startTimeUnixNano")
    children: dict[str, list[tuple[int, int, str, dict[str, Any]]]] = defaultdict(list)
    for order, (start, parent, node_id, row) in enumerate(nodes):
        children[parent if parent is not None else run_id].append((start, order, node_id, row))
    rows: list[dict[str, Any]] = []
    stack: list[tuple[str, dict[str, Any], int, int]] = [(run_id, run_row, 0, start0)]
    seen: set[str] = set()
    while stack:
        node_id, row, depth, start = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        row["d0"] = depth
        row["s"] = round(max(0, start - start0) / 1e6, 3)
        rows.append(row)
        kids = sorted(children.get(node_id, ()), key=lambda item: (item[0], item[1]))
        stack.extend(
            (kid_id, kid, depth + 1, kid_start) for kid_start, _, kid_id, kid in reversed(kids)
        )
    if len(rows) < len(nodes) + 1:  # a parent outside the bundle (the loader prevents it)
        for start, _, node_id, row in nodes:
            if node_id not in seen:
                row["d0"], row["s"] = 1, round(max(0, start - start0) / 1e6, 3)
                rows.append(row)
    return rows


def _run_row(bundle: Bundle, values: Values) -> dict[str, Any]:
    span = bundle.run_span
    duration = max(0, _nanos(span, "endTimeUnixNano") - _nanos(span, "startTimeUnixNano"))
    row: dict[str, Any] = {
        "k": "run",
        "name": bundle.agent_name,
        "label": f"run {bundle.agent_name}",
        "dur": round(duration / 1e6, 3),
        "status": bundle.status,
    }
    if bundle.has_run_input:
        row["in"] = values.add(bundle.run_input)
    if bundle.has_output:
        row["out"] = values.add(bundle.output)
    failure = bundle.failure
    if failure is not None:
        row["err"] = {"type": failure.type or "", "message": failure.message or ""}
    if bundle.redactions:
        row["red"] = bundle.redactions
    return row


# --- a suite run: the index page --------------------------------------------------------


def build_index(title: str, cases: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The payload of a suite run's index: one entry per case, linking to its page."""
    return {"page": "index", "title": title, "cases": list(cases)}


def document(payload: dict[str, Any], title: str) -> dict[str, Any]:
    """The payload with what every page carries: its title and the sftrace version."""
    return {**payload, "title": title, "sftrace": __version__}
