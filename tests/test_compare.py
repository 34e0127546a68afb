"""Behavioural diff and compare: every finding code, policies, ignore paths and reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sftrace
from regress_helpers import Step, llm, play, record_steps, tool
from sftrace import ComparisonPolicy, Expectations, FindingCode, Report, Severity

BASE = [
    tool("lookup_order", {"id": "A-1", "days": 45}, order_id="A-1"),
    llm("planner-1", {"action": "refund"}, messages=["refund A-1?"]),
    tool("issue_refund", {"ok": True}, order_id="A-1", amount=30),
]


def _diff(
    tmp_path: Path,
    candidate: list[Step],
    *,
    baseline: list[Step] = BASE,
    base_output: Any = None,
    output: Any = None,
    base_fail: str | None = None,
    fail: str | None = None,
    policy: ComparisonPolicy | None = None,
) -> Report:
    left = record_steps(tmp_path / "a.sftrace", baseline, output=base_output, fail=base_fail)
    right = record_steps(tmp_path / "b.sftrace", candidate, output=output, fail=fail)
    return sftrace.diff(left, right, policy=policy)


def _codes(report: Report, severity: Severity | None = Severity.ERROR) -> list[str]:
    return [f.code.value for f in report.findings if severity is None or f.severity is severity]


def test_the_same_behaviour_recorded_twice_is_equivalent(tmp_path: Path) -> None:
    """Two recordings differ in ids, timestamps and durations only: no finding, a pass."""
    report = _diff(tmp_path, BASE, base_output={"a": 1}, output={"a": 1})
    assert report.findings == ()
    assert report.verdict == "pass"
    assert [row.status for row in report.alignment] == ["same", "same", "same"]


def test_an_inserted_call_is_one_unexpected_call(tmp_path: Path) -> None:
    """One call inserted in the middle shows as one UNEXPECTED_CALL, not later calls changed."""
    inserted = [BASE[0], tool("check_policy", {"window": 30}, order_id="A-1"), *BASE[1:]]
    report = _diff(tmp_path, inserted)
    (finding,) = report.findings
    assert finding.code is FindingCode.UNEXPECTED_CALL
    assert finding.candidate_call is not None
    assert (finding.candidate_call.number, finding.candidate_call.name) == (2, "check_policy")
    assert "call 2 (tool check_policy)" in finding.message
    assert [row.status for row in report.alignment] == ["same", "unexpected", "same", "same"]


def test_a_removed_call_is_one_missing_call(tmp_path: Path) -> None:
    """The fixed agent no longer refunds: one MISSING_CALL naming the recorded call."""
    report = _diff(tmp_path, BASE[:2])
    (finding,) = report.findings
    assert finding.code is FindingCode.MISSING_CALL
    assert finding.baseline_call is not None
    assert (finding.baseline_call.number, finding.baseline_call.kind) == (3, "tool")
    assert "issue_refund" in finding.message
    assert report.verdict == "fail"


def test_swapped_calls_are_an_order_change(tmp_path: Path) -> None:
    """Two calls made in the other order give one CALL_ORDER_CHANGED."""
    report = _diff(tmp_path, [BASE[1], BASE[0], BASE[2]])
    (finding,) = report.findings
    assert finding.code is FindingCode.CALL_ORDER_CHANGED
    assert finding.baseline_call is not None
    assert finding.candidate_call is not None
    assert (finding.baseline_call.position, finding.candidate_call.position) in {(1, 2), (2, 1)}
    assert "moved" in finding.message


def test_an_unordered_replay_in_another_order_is_no_order_change(tmp_path: Path) -> None:
    """match="unordered" accepts any order (concurrent calls): compare and the diff of the
    saved replay report no CALL_ORDER_CHANGED; a strict diff of two recordings still does."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, output={"a": 1})
    swapped = [BASE[1], BASE[0], BASE[2]]
    saved = tmp_path / "replayed.sftrace"
    result = sftrace.replay_run(
        bundle, lambda: play(swapped, {"a": 1}), match="unordered", save=saved
    )
    assert result.status == "completed"
    assert [m.recorded.seq for m in result.matched] == [2, 1, 3]
    assert sftrace.compare(bundle, result).findings == ()
    assert sftrace.diff(bundle, saved).findings == ()
    strict = record_steps(tmp_path / "b.sftrace", swapped, output={"a": 1})
    assert _codes(sftrace.diff(bundle, strict)) == ["CALL_ORDER_CHANGED"]


def test_a_changed_argument_is_an_input_change_with_the_path(tmp_path: Path) -> None:
    """Same tool, other argument: CALL_INPUT_CHANGED with the path and both values."""
    changed = [*BASE[:2], tool("issue_refund", {"ok": True}, order_id="A-1", amount=45)]
    report = _diff(tmp_path, changed)
    (finding,) = report.findings
    assert finding.code is FindingCode.CALL_INPUT_CHANGED
    (difference,) = finding.differences
    assert (difference.path, difference.baseline, difference.candidate) == ("$.amount", 30, 45)
    assert "$.amount: baseline 30, candidate 45" in report.format()


def test_a_changed_result_is_an_output_change(tmp_path: Path) -> None:
    """Same call and input, another result: CALL_OUTPUT_CHANGED at the differing path."""
    changed = [tool("lookup_order", {"id": "A-1", "days": 12}, order_id="A-1"), *BASE[1:]]
    report = _diff(tmp_path, changed)
    (finding,) = report.findings
    assert finding.code is FindingCode.CALL_OUTPUT_CHANGED
    assert [d.path for d in finding.differences] == ["$.days"]


def test_a_call_that_now_raises_is_an_error_change(tmp_path: Path) -> None:
    """A call that raised where it returned: CALL_ERROR_CHANGED with the exception."""
    changed = [*BASE[:2], tool("issue_refund", error="declined", order_id="A-1", amount=30)]
    report = _diff(tmp_path, changed)
    (finding,) = report.findings
    assert finding.code is FindingCode.CALL_ERROR_CHANGED
    assert "raised ValueError: declined" in finding.message


def test_call_errors_differing_only_in_object_addresses_are_the_same(tmp_path: Path) -> None:
    """LangGraph cancels with a fresh object() as the message: its address differs on
    every run, and the unchanged agent was judged CALL_ERROR_CHANGED every time. Error
    messages are compared as run failures are (addresses, UUIDs, times masked)."""
    first = [*BASE[:2], tool("issue_refund", error="<object object at 0x7fb0aa11>", amount=30)]
    again = [*BASE[:2], tool("issue_refund", error="<object object at 0x7f3c9e02>", amount=30)]
    other = [*BASE[:2], tool("issue_refund", error="declined", amount=30)]
    a = record_steps(tmp_path / "a.sftrace", first)
    assert sftrace.diff(a, record_steps(tmp_path / "b.sftrace", again)).passed
    changed = sftrace.diff(a, record_steps(tmp_path / "c.sftrace", other))
    assert [f.code for f in changed.findings] == [FindingCode.CALL_ERROR_CHANGED]


def test_a_run_that_now_fails_is_a_status_change(tmp_path: Path) -> None:
    """Completed then failed: STATUS_CHANGED with the failure."""
    report = _diff(tmp_path, BASE, fail="boom")
    assert _codes(report) == ["STATUS_CHANGED"]
    assert "RuntimeError: boom" in report.findings[0].message


def test_a_different_failure_is_a_status_change(tmp_path: Path) -> None:
    """Both runs failed, with different exception types: STATUS_CHANGED naming both."""
    left = record_steps(tmp_path / "a.sftrace", BASE, fail="boom")
    right = record_steps(tmp_path / "b.sftrace", BASE, fail=KeyError("order"))
    (finding,) = sftrace.diff(left, right).findings
    assert finding.code is FindingCode.STATUS_CHANGED
    assert "RuntimeError: boom" in finding.message
    assert "KeyError" in finding.message


@pytest.mark.parametrize(
    ("base_output", "output", "code", "severity"),
    [
        pytest.param({"a": 1}, {"a": 1, "b": 2}, "OUTPUT_STRUCTURE_CHANGED", "error", id="key"),
        pytest.param({"a": "denied"}, {"a": "refunded"}, "OUTPUT_VALUE_CHANGED", "error", id="v"),
        pytest.param(
            {"reply": "Sorry, you are out of the window."},
            {"reply": "We cannot refund this order."},
            "OUTPUT_TEXT_CHANGED",
            "warning",
            id="text",
        ),
    ],
)
def test_output_changes_by_kind(
    tmp_path: Path, base_output: Any, output: Any, code: str, severity: str
) -> None:
    """Output differences are split by kind; free-text wording is only a warning."""
    report = _diff(tmp_path, BASE, base_output=base_output, output=output)
    (finding,) = report.findings
    assert (finding.code.value, finding.severity.value) == (code, severity)
    assert report.verdict == ("pass" if severity == "warning" else "fail")


def test_an_output_that_is_gone_is_missing(tmp_path: Path) -> None:
    """The baseline had an output, the candidate failed without one: OUTPUT_MISSING."""
    report = _diff(tmp_path, BASE, base_output={"a": 1}, fail="boom")
    assert sorted(_codes(report)) == ["OUTPUT_MISSING", "STATUS_CHANGED"]


def test_normalised_outputs_are_equal(tmp_path: Path) -> None:
    """2 vs 2.0, surrounding whitespace and None-valued keys are not differences."""
    report = _diff(
        tmp_path,
        BASE,
        base_output={"total": 2, "note": "ok", "extra": None},
        output={"total": 2.0, "note": " ok\n"},
    )
    assert report.findings == ()


def test_replay_divergence_is_an_error_and_ends_the_report(tmp_path: Path) -> None:
    """A replay reaching a call the recording cannot answer: REPLAY_DIVERGED, divergence last."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, output="done")
    changed = [*BASE[:2], tool("issue_refund", {"ok": True}, order_id="A-1", amount=999)]
    result = sftrace.replay_run(bundle, lambda: play(changed, "done"))
    report = sftrace.compare(bundle, result)
    assert "REPLAY_DIVERGED" in _codes(report)
    text = report.format()
    assert text.index("REPLAY_DIVERGED") < text.index("first divergence:")
    assert text.rstrip().splitlines()[-1].strip().startswith("$.amount")


def test_a_faithful_replay_compares_equal_to_its_recording(tmp_path: Path) -> None:
    """compare(bundle, replay) passes when the agent still behaves as recorded."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, output={"refunded": 30})
    result = sftrace.replay_run(bundle, lambda: play(BASE, {"refunded": 30}))
    report = sftrace.compare(bundle, result)
    assert report.verdict == "pass", report.format()
    assert report.candidate.label == "replayed"


def test_expectation_failures_are_findings(tmp_path: Path) -> None:
    """With expectations the replay is judged against them: EXPECTATION_FAILED per miss."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, output={"decision": "refunded"})
    result = sftrace.replay_run(bundle, lambda: play(BASE, {"decision": "refunded"}))
    expect = Expectations(output={"decision": "denied"}, not_called=("issue_refund",))
    report = sftrace.compare(bundle, result, expect=expect)
    assert _codes(report) == ["OUTPUT_VALUE_CHANGED", "EXPECTATION_FAILED"]
    assert "expected 'issue_refund' not to be called" in report.format()
    assert '$.decision: expected "denied", replayed "refunded"' in report.format()


def test_with_expectations_the_recording_is_context_only(tmp_path: Path) -> None:
    """The fixed agent's departures from the buggy recording are info, not errors."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, output={"decision": "refunded"})
    result = sftrace.replay_run(bundle, lambda: play(BASE[:2], {"decision": "denied"}))
    expect = Expectations(output={"decision": "denied"}, not_called=("issue_refund",))
    report = sftrace.compare(bundle, result, expect=expect)
    assert report.verdict == "pass", report.format()
    assert _codes(report, Severity.INFO) == ["MISSING_CALL"]


def test_expected_status_defaults_to_completed(tmp_path: Path) -> None:
    """A replay that still fails does not meet expectations unless status='failed'."""
    bundle = record_steps(tmp_path / "a.sftrace", BASE, fail="boom")
    result = sftrace.replay_run(bundle, lambda: play(BASE, fail="boom"))
    failing = sftrace.compare(bundle, result, expect=Expectations(max_calls=3))
    assert _codes(failing) == ["STATUS_CHANGED"]
    passing = sftrace.compare(bundle, result, expect=Expectations(status="failed", max_calls=3))
    assert passing.verdict == "pass"


def test_severity_overrides_change_the_verdict(tmp_path: Path) -> None:
    """A policy can make a missing call a warning and text changes an error."""
    policy = ComparisonPolicy(
        severity_overrides={"MISSING_CALL": "warning", FindingCode.OUTPUT_TEXT_CHANGED: "error"}
    )
    report = _diff(tmp_path, BASE[:2], policy=policy)
    assert report.verdict == "pass"
    assert report.counts == {"error": 0, "warning": 1, "info": 0}
    assert policy.severity(FindingCode.OUTPUT_TEXT_CHANGED) is Severity.ERROR


@pytest.mark.parametrize(
    ("overrides", "paths", "match"),
    [
        pytest.param({"MISING_CALL": "error"}, (), "did you mean 'MISSING_CALL'", id="code"),
        pytest.param({"MISSING_CALL": "fatal"}, (), "unknown severity 'fatal'", id="severity"),
        pytest.param({}, ("a..b",), "invalid ignore path", id="path"),
        pytest.param({}, "reply.at", "must be a list", id="paths-string"),
        pytest.param(["MISSING_CALL"], (), "must be a mapping", id="overrides-list"),
    ],
)
def test_invalid_policies_raise_value_error_when_built(
    overrides: Any, paths: Any, match: str
) -> None:
    """Unknown codes or severities and malformed paths fail when the policy is built."""
    with pytest.raises(ValueError, match=match):
        ComparisonPolicy(severity_overrides=overrides, ignore_paths=paths)


def test_ignored_paths_are_reported_as_info(tmp_path: Path) -> None:
    """Differences under ignore paths (with wildcards) stay in the report, as info."""
    policy = ComparisonPolicy(ignore_paths=["reply.generated_at", "items.*.id"])
    report = _diff(
        tmp_path,
        BASE,
        base_output={"reply": {"generated_at": "09:00"}, "items": [{"id": 1, "n": 1}]},
        output={"reply": {"generated_at": "10:00"}, "items": [{"id": 2, "n": 1}]},
        policy=policy,
    )
    assert report.verdict == "pass"
    (finding,) = report.findings
    assert finding.severity is Severity.INFO
    assert [(d.path, d.ignored_by) for d in finding.differences] == [
        ("$.items[0].id", "$.items[*].id"),
        ("$.reply.generated_at", "$.reply.generated_at"),
    ]


def test_ignore_paths_apply_to_call_inputs_and_keep_calls_aligned(tmp_path: Path) -> None:
    """A call whose input differs only under an ignore path stays paired, as info."""
    with_stamp = [*BASE[:2], tool("issue_refund", {"ok": True}, order_id="A-1", amount=30, at=1)]
    base = [*BASE[:2], tool("issue_refund", {"ok": True}, order_id="A-1", amount=30, at=2)]
    report = _diff(
        tmp_path, with_stamp, baseline=base, policy=ComparisonPolicy(ignore_paths=["at"])
    )
    assert report.verdict == "pass"
    assert [(f.code.value, f.severity.value) for f in report.findings] == [
        ("CALL_INPUT_CHANGED", "info")
    ]


def test_policies_extend(tmp_path: Path) -> None:
    """A case policy extends its suite's: overrides win, ignore paths add up."""
    suite = ComparisonPolicy(severity_overrides={"MISSING_CALL": "warning"}, ignore_paths=["a"])
    case = ComparisonPolicy(severity_overrides={"MISSING_CALL": "info"}, ignore_paths=["b"])
    merged = suite.extend(case)
    assert merged.severity(FindingCode.MISSING_CALL) is Severity.INFO
    assert merged.ignore_paths == ("$.a", "$.b")  # in canonical form


def test_report_dict_is_deterministic_json(tmp_path: Path) -> None:
    """to_dict() is JSON-ready with a stable key order, equal for equal comparisons."""
    left = record_steps(tmp_path / "a.sftrace", BASE, output={"a": 1})
    right = record_steps(tmp_path / "b.sftrace", BASE[:2], output={"a": 2})
    first, second = sftrace.diff(left, right).to_dict(), sftrace.diff(left, right).to_dict()
    assert json.dumps(first) == json.dumps(second)
    assert list(first) == [
        "verdict",
        "counts",
        "counts_by_code",
        "baseline",
        "candidate",
        "expected",
        "policy",
        "findings",
        "alignment",
        "approximate_alignment",
        "divergence",
    ]
    assert list(first["findings"][0]) == [
        "code",
        "severity",
        "message",
        "baseline_call",
        "candidate_call",
        "differences",
        "truncated",
        "input",
    ]


def test_a_missing_or_unexpected_calls_finding_carries_its_whole_input(tmp_path: Path) -> None:
    """The message previews the input; --json has all of it."""
    long_text = "x" * 500
    a = record_steps(tmp_path / "a.sftrace", [tool("lookup", {"ok": 1}, q="a")])
    b = record_steps(
        tmp_path / "b.sftrace",
        [tool("lookup", {"ok": 1}, q="a"), tool("notify", {}, body=long_text)],
    )
    (finding,) = sftrace.diff(a, b).findings
    assert finding.code.value == "UNEXPECTED_CALL"
    assert long_text not in finding.message
    document = json.loads(json.dumps(sftrace.diff(a, b).to_dict()))
    assert document["findings"][0]["input"] == {"body": long_text}


def test_comparing_something_else_is_a_config_error() -> None:
    """Only bundles, bundle paths and replay results can be compared."""
    with pytest.raises(sftrace.ConfigError, match="cannot compare int"):
        sftrace.diff(3, 4)  # type: ignore[arg-type]


def _chat(call_id: str, created: int, tokens: int, city: str = "Lisbon") -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{call_id}",
        "created": created,
        "model": "gpt-4o",
        "system_fingerprint": f"fp_{call_id}",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": f"call_{call_id}",
                            "function": {"name": "weather", "arguments": city},
                        }
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 9},
    }


def _conversation(call_id: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "tool_calls": [{"id": f"call_{call_id}", "type": "function"}]},
            {"role": "tool", "tool_call_id": f"call_{call_id}", "content": "21C"},
        ]
    }


def test_llm_response_ids_timestamps_and_usage_are_not_compared(tmp_path: Path) -> None:
    """Two runs of the same behaviour differ in provider ids, timestamps and usage: no
    finding; a change in what the model said still is one."""
    first = [llm("gpt-4o", _chat("a1", 100, 50), **_conversation("a1"))]
    again = [llm("gpt-4o", _chat("b2", 200, 51), **_conversation("b2"))]
    assert _diff(tmp_path, again, baseline=first).findings == ()
    other = [llm("gpt-4o", _chat("b2", 200, 51, city="Porto"), **_conversation("b2"))]
    (finding,) = _diff(tmp_path, other, baseline=first).findings
    assert finding.code is FindingCode.CALL_OUTPUT_CHANGED
    assert [d.path for d in finding.differences] == [
        "$.choices[0].message.tool_calls[0].function.arguments"
    ]
