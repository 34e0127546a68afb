"""What a report page shows, as a compact JSON payload (the page's script renders it).

Two documents go into a page: the *payload* (``build_*`` below: the header, the rows of
the timeline or of the alignment, the findings) and the *values* table, one JSON array
holding every recorded input and output as its JSON text. The payload refers to a value
by its index and carries each value's character range in the table, so the page parses
only the values it shows: a run of 100,000 calls or hundreds of megabytes opens without
parsing them all.

Everything recorded is untrusted text. It never reaches the page as markup: the payload
and the table are JSON inside ``<script type="application/json">`` with ``<``, ``>``,
``&`` and U+2028/U+2029 escaped (:func:`script_json`), and the page's script writes them
with ``textContent`` only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any, Final

import orjson

from sftrace._bundle.reader import Bundle
from sftrace._errors import ReplayError
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.otlp_json import decode_attributes
from sftrace._model.serialize import loads
from sftrace._regress.diff import MISSING, Difference
from sftrace._regress.findings import Finding, FindingCode, Report
from sftrace._version import __version__

# Characters that must not appear raw inside a <script> element's JSON, and what they
# become. In valid JSON they can only occur inside strings, where \uXXXX means the same.
_SCRIPT_ESCAPES: Final = (
    ("&", "\\u0026"),
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
    # Outside strings a CR is only whitespace, but HTML turns CR LF into LF, which would
    # shift the values' offsets: make it a space (inside strings JSON forbids raw CRs).
    ("\r", " "),
)
# Strings longer than this show the window where they differ, not their whole text.
WINDOW_MIN_CHARS: Final = 160
WINDOW_CONTEXT: Final = 60
WINDOW_MAX_CHARS: Final = 2000

_SEVERITY_RANK: Final = {"error": 0, "warning": 1, "info": 2}


def script_json(text: str) -> str:
    """JSON text made safe to place inside a ``<script>`` element (same JSON value)."""
    for raw, escaped in _SCRIPT_ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _utf16_length(text: str) -> int:
    """Length in the UTF-16 code units JavaScript strings index by."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


class Values:
    """The page's table of JSON values, each kept as its (escaped) JSON text."""

    def __init__(self) -> None:
        self._texts: list[str] = []

    def add_json(self, text: str | None) -> int | None:
        """Add a value given as JSON text (as bundles store them); None stays None."""
        if text is None:
            return None
        self._texts.append(script_json(text))
        return len(self._texts) - 1

    def add(self, value: Any) -> int:
        index = self.add_json(dumps(value))
        assert index is not None
        return index

    def script(self) -> tuple[str, list[int]]:
        """The table as one JSON array, and each value's [start, end) in it (flat)."""
        offsets: list[int] = []
        position = 1  # after "["
        for text in self._texts:
            end = position + _utf16_length(text)
            offsets.extend((position, end))
            position = end + 1  # the comma
        return "[" + ",".join(self._texts) + "]", offsets


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
    }


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


# --- a comparison: the alignment and its findings -------------------------------------


def text_window(left: str, right: str) -> dict[str, Any] | None:
    """Where two long strings differ: the common context around the differing middle."""
    if max(len(left), len(right)) < WINDOW_MIN_CHARS:
        return None
    prefix = _common_prefix(left, right)
    limit = min(len(left), len(right)) - prefix
    suffix = _common_prefix(left[::-1][:limit], right[::-1][:limit])
    before_start = max(0, prefix - WINDOW_CONTEXT)
    left_end, right_end = len(left) - suffix, len(right) - suffix
    after_end = min(len(left), left_end + WINDOW_CONTEXT)
    return {
        "skipped_before": before_start,
        "before": left[before_start:prefix],
        "baseline": left[prefix:left_end][:WINDOW_MAX_CHARS],
        "candidate": right[prefix:right_end][:WINDOW_MAX_CHARS],
        "baseline_cut": max(0, left_end - prefix - WINDOW_MAX_CHARS),
        "candidate_cut": max(0, right_end - prefix - WINDOW_MAX_CHARS),
        "after": left[left_end:after_end],
        "skipped_after": len(left) - after_end,
    }


def _common_prefix(left: str, right: str) -> int:
    """Length of the common prefix (binary search on slices: C speed on long strings)."""
    low, high = 0, min(len(left), len(right))
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _difference(difference: Difference, values: Values) -> dict[str, Any]:
    item: dict[str, Any] = {
        "path": difference.path,
        "seg": list(difference.segments),
        "kind": difference.kind,
        "b": None if difference.baseline is MISSING else values.add(difference.baseline),
        "c": None if difference.candidate is MISSING else values.add(difference.candidate),
    }
    if difference.ignored_by is not None:
        item["ignored_by"] = difference.ignored_by
    if isinstance(difference.baseline, str) and isinstance(difference.candidate, str):
        window = text_window(difference.baseline, difference.candidate)
        if window is not None:
            item["window"] = window
    return item


_ON_INPUT: Final = {FindingCode.CALL_INPUT_CHANGED}
_ON_OUTPUT: Final = {FindingCode.CALL_OUTPUT_CHANGED}
_ON_RUN_OUTPUT: Final = {
    FindingCode.OUTPUT_STRUCTURE_CHANGED,
    FindingCode.OUTPUT_VALUE_CHANGED,
    FindingCode.OUTPUT_TEXT_CHANGED,
}


def _finding(finding: Finding, values: Values) -> dict[str, Any]:
    on = None
    if finding.code in _ON_INPUT:
        on = "input"
    elif finding.code in _ON_OUTPUT or finding.code in _ON_RUN_OUTPUT:
        on = "output"
    item: dict[str, Any] = {
        "code": finding.code.value,
        "severity": finding.severity.value,
        "message": finding.message,
        "on": on,
        "diffs": [_difference(difference, values) for difference in finding.differences],
    }
    if finding.truncated:
        item["truncated"] = True
    return item


def _ref_detail(number: int, kind: str, name: str, provider: str | None) -> dict[str, Any]:
    """A call known only by its reference (a report without the runs' calls)."""
    label = f"{kind} {provider}/{name}" if kind == A.KIND_LLM and provider else f"{kind} {name}"
    detail: dict[str, Any] = {"seq": number, "kind": kind, "name": name, "label": label}
    if provider is not None:
        detail["provider"] = provider
    return detail


def build_compare(
    report: Report,
    values: Values,
    *,
    baseline_calls: Sequence[Call] | None = None,
    candidate_calls: Sequence[Call] | None = None,
    baseline_output: tuple[bool, Any] = (False, None),
    candidate_output: tuple[bool, Any] = (False, None),
    actions: dict[int, tuple[str, str | None]] | None = None,
) -> dict[str, Any]:
    """The payload of a comparison page: the report's alignment rows (as ``diff``
    aligned the calls), each with its findings; the first row is the run itself.

    ``actions`` maps a baseline call number to what a replay did with it (action, tier).
    """
    calls = (
        {call.seq: call for call in baseline_calls or ()},
        {call.seq: call for call in candidate_calls or ()},
    )
    rows: list[dict[str, Any]] = [_run_sides(report, values, baseline_output, candidate_output)]
    for aligned in report.alignment:
        row: dict[str, Any] = {"st": aligned.status, "f": []}
        for side, ref, by_number in (
            ("b", aligned.baseline, calls[0]),
            ("c", aligned.candidate, calls[1]),
        ):
            if ref is not None:
                call = by_number.get(ref.number)
                row[side] = (
                    call_detail(call, values)
                    if call is not None
                    else _ref_detail(ref.number, ref.kind, ref.name, ref.provider)
                )
        if actions is not None:
            _mark_action(row, aligned.baseline.number if aligned.baseline else None, actions)
        rows.append(row)
    findings = [_finding(finding, values) for finding in report.findings]
    _attach_findings(report, rows, findings)
    return {
        "page": "compare",
        "verdict": report.verdict.value,
        "summary": report.summary(),
        "counts": report.counts,
        "baseline": report.baseline.to_dict(),
        "candidate": report.candidate.to_dict(),
        "expected": report.expected,
        "approximate": report.approximate,
        "divergence": report.divergence,
        "findings": findings,
        "rows": rows,
    }


@cache
def _replay_error_types() -> frozenset[str]:
    """The qualified names of sftrace's replay errors, as a refused call records them."""
    found: set[str] = set()
    pending: list[type[BaseException]] = [ReplayError]
    while pending:
        error = pending.pop()
        found.add(f"{error.__module__}.{error.__qualname__}")
        pending.extend(error.__subclasses__())
    return frozenset(found)


def _mark_action(
    row: dict[str, Any], recorded: int | None, actions: dict[int, tuple[str, str | None]]
) -> None:
    """What the replay did with the row's recorded call; a reached call the replay
    answered with one of its own errors (a divergence) was refused."""
    action: str | None = None
    tier: str | None = None
    if recorded is not None:
        action, tier = actions.get(recorded, ("unused", None))
    reached = row.get("c")
    error = reached.get("err") if reached is not None else None
    if error is not None and error["type"] in _replay_error_types():
        action = "refused"
    if action is not None:
        row["act"] = action
    if tier is not None:
        row["tier"] = tier


def _run_sides(
    report: Report,
    values: Values,
    baseline_output: tuple[bool, Any],
    candidate_output: tuple[bool, Any],
) -> dict[str, Any]:
    """The first row of a comparison: each run's status, failure and output."""
    row: dict[str, Any] = {"st": "run", "f": []}
    for side, summary, (has_output, output) in (
        ("b", report.baseline, baseline_output),
        ("c", report.candidate, candidate_output),
    ):
        row[side] = {"label": "run", "status": summary.status, "failure": summary.failure}
        if has_output:
            row[side]["out"] = values.add(output)
    return row


def _attach_findings(report: Report, rows: list[dict[str, Any]], findings: list[Any]) -> None:
    """Put each finding on the row of the call(s) it names (the run row otherwise), and
    give each row its worst severity."""
    pairs: dict[tuple[int | None, int | None], int] = {}
    by_baseline: dict[int, int] = {}
    by_candidate: dict[int, int] = {}
    for index, aligned in enumerate(report.alignment, start=1):
        b_number = aligned.baseline.number if aligned.baseline else None
        c_number = aligned.candidate.number if aligned.candidate else None
        pairs[(b_number, c_number)] = index
        if b_number is not None:
            by_baseline.setdefault(b_number, index)
        if c_number is not None:
            by_candidate.setdefault(c_number, index)
    for index, finding in enumerate(report.findings):
        b_number = finding.baseline_call.number if finding.baseline_call else None
        c_number = finding.candidate_call.number if finding.candidate_call else None
        target = pairs.get((b_number, c_number))
        if target is None and b_number is not None:
            target = by_baseline.get(b_number)
        if target is None and c_number is not None:
            target = by_candidate.get(c_number)
        rows[target or 0]["f"].append(index)
    for row in rows:
        severities = [findings[index]["severity"] for index in row["f"]]
        if severities:
            row["sev"] = min(severities, key=lambda level: _SEVERITY_RANK.get(level, 3))


# --- a suite run: the index page --------------------------------------------------------


def build_index(title: str, cases: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The payload of a suite run's index: one entry per case, linking to its page."""
    return {"page": "index", "title": title, "cases": list(cases)}


def document(payload: dict[str, Any], title: str) -> dict[str, Any]:
    """The payload with what every page carries: its title and the sftrace version."""
    return {**payload, "title": title, "sftrace": __version__}
