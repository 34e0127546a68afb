"""What a comparison page shows, as its JSON payload: the call alignment, its findings
attached to the rows they concern, and the differing values (see ``data``)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Final

from sftrace._errors import ReplayError
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._regress.diff import MISSING, Difference
from sftrace._regress.findings import Finding, FindingCode, Report
from sftrace._view.data import call_detail
from sftrace._view.values import Values

# Strings longer than this show the window where they differ, not their whole text.
WINDOW_MIN_CHARS: Final = 160
WINDOW_CONTEXT: Final = 60
WINDOW_MAX_CHARS: Final = 2000

_SEVERITY_RANK: Final = {"error": 0, "warning": 1, "info": 2}


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
    baseline_input: tuple[bool, Any] = (False, None),
    candidate_input: tuple[bool, Any] = (False, None),
) -> dict[str, Any]:
    """The payload of a comparison page: the report's alignment rows (as ``diff``
    aligned the calls), each with its findings; the first row is the run itself.

    ``actions`` maps a baseline call number to what a replay did with it (action, tier).
    """
    calls = (
        {call.seq: call for call in baseline_calls or ()},
        {call.seq: call for call in candidate_calls or ()},
    )
    rows: list[dict[str, Any]] = [
        _run_sides(
            report,
            values,
            (baseline_input, baseline_output),
            (candidate_input, candidate_output),
        )
    ]
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


Given = tuple[bool, Any]  # (whether there is one, the value)


def _run_sides(
    report: Report,
    values: Values,
    baseline: tuple[Given, Given],
    candidate: tuple[Given, Given],
) -> dict[str, Any]:
    """The first row of a comparison: each run's status, failure, input and output."""
    row: dict[str, Any] = {"st": "run", "f": []}
    for side, summary, ((has_input, run_input), (has_output, output)) in (
        ("b", report.baseline, baseline),
        ("c", report.candidate, candidate),
    ):
        row[side] = {"label": "run", "status": summary.status, "failure": summary.failure}
        if has_input:
            row[side]["in"] = values.add(run_input)
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
