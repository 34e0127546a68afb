"""Behavioural comparison of two runs: ``diff`` and ``compare``.

Calls are aligned by content (``align``), then each difference becomes a
:class:`~sftrace._regress.findings.Finding` with a stable code and the severity the
:class:`~sftrace._regress.findings.ComparisonPolicy` gives it (``findings``). What is
compared of a run and of a call is in ``runs``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError
from sftrace._model.calls import Call, CallRef
from sftrace._model.jsonpath import JsonPath, strip
from sftrace._model.text import first_line, pluralize, preview, shorten, were
from sftrace._regress.align import align_calls
from sftrace._regress.diff import Difference, content_key, value_differences
from sftrace._regress.findings import (
    DEFAULT_POLICY,
    AlignedCall,
    ComparisonPolicy,
    Finding,
    FindingCode,
    Report,
    RunSummary,
    Severity,
    Verdict,
)
from sftrace._regress.runs import ComparedRun, as_run, compared_input, compared_output

if TYPE_CHECKING:
    from sftrace._regress.expectations import Expectations
    from sftrace._replay.run import ReplayResult

__all__ = [
    "AlignedCall",
    "CallRef",
    "ComparisonPolicy",
    "Finding",
    "FindingCode",
    "Report",
    "RunSummary",
    "Severity",
    "Verdict",
    "compare",
    "diff",
    "expected_output_report",
]


# --- building findings -------------------------------------------------------------


class _Builder:
    def __init__(self, policy: ComparisonPolicy, labels: tuple[str, str]) -> None:
        self.policy = policy
        self.labels = labels
        self.findings: list[Finding] = []
        # Set by _calls when the candidate diverged: the calls at the divergence and how
        # their inputs differ, and how many recorded calls the stopped replay never reached.
        self.diverged: tuple[CallRef | None, CallRef | None, list[Difference], bool] | None = None
        self.not_reached = 0

    def add(
        self,
        code: FindingCode,
        message: str,
        *,
        baseline: CallRef | None = None,
        candidate: CallRef | None = None,
        severity: Severity | None = None,
    ) -> None:
        self.findings.append(
            Finding(code, severity or self.policy.severity(code), message, baseline, candidate)
        )

    def add_paths(
        self,
        code: FindingCode,
        message: str,
        differences: Sequence[Difference],
        truncated: bool,
        *,
        baseline: CallRef | None = None,
        candidate: CallRef | None = None,
    ) -> None:
        """A finding for the differences not ignored, and an ``info`` one for the rest."""
        active = tuple(d for d in differences if d.ignored_by is None)
        ignored = tuple(d for d in differences if d.ignored_by is not None)
        if active:
            self.findings.append(
                Finding(
                    code,
                    self.policy.severity(code),
                    f"{message} at {pluralize(len(active), 'path')}",
                    baseline,
                    candidate,
                    active,
                    truncated,
                )
            )
        if ignored:
            self.findings.append(
                Finding(
                    code,
                    Severity.INFO,
                    f"{message} at {pluralize(len(ignored), 'ignored path')}",
                    baseline,
                    candidate,
                    ignored,
                    truncated and not active,
                )
            )


def _name(ref: CallRef, other: CallRef | None, other_label: str) -> str:
    if other is None or other.number == ref.number:
        return str(ref)
    return f"{ref} ({other_label} call {other.number})"


def _calls(
    builder: _Builder, base: ComparedRun, cand: ComparedRun
) -> tuple[list[AlignedCall], bool]:
    """Align the calls and add the call findings; return the alignment rows."""
    patterns = builder.policy.patterns
    # A call a replay matched in the relaxed tier is aligned without the ignored paths.
    relaxed_left = {seq: ignored for _, seq, ignored in cand.tiers.values() if ignored}
    relaxed_right = {seq: tier[2] for seq, tier in cand.tiers.items() if tier[2]}

    def key(
        call: Call, relaxed: dict[int, tuple[JsonPath, ...]]
    ) -> tuple[str, str, str | None, str]:
        compared = strip(compared_input(call), (*patterns, *relaxed.get(call.seq, ())))
        return (call.kind, call.name, call.provider, content_key(compared))

    def identity(call: Call) -> tuple[str, str, str | None]:
        return (call.kind, call.name, call.provider)

    # Calls recorded inside a call the replay answered from the recording were not run,
    # so they are left out (their positions still count from the whole run).
    left_positions = [i for i, call in enumerate(base.calls) if call.seq not in cand.covered]
    left, right = [base.calls[i] for i in left_positions], cand.calls
    alignment = align_calls(
        [key(call, relaxed_left) for call in left],
        [key(call, relaxed_right) for call in right],
        [identity(call) for call in left],
        # a call that ran live (on_miss="live") pairs with no recorded call
        [
            ("live", str(k), None) if call.seq in cand.live else identity(call)
            for k, call in enumerate(right)
        ],
    )
    # After a divergence that ended the run, the recorded calls not reached before it are
    # its consequence, not findings of their own.
    diverged = cand.diverged_call
    reached_upto = max(
        (
            i
            for status, i, j in alignment.rows
            if status != "moved" and i is not None and j is not None and j < (diverged or 0)
        ),
        default=-1,
    )
    aligned: list[AlignedCall] = []
    for status, li, ri in alignment.rows:
        lref = CallRef.of(left[li], left_positions[li] + 1) if li is not None else None
        rref = CallRef.of(right[ri], ri + 1) if ri is not None else None
        if diverged is not None and _at_divergence(builder, cand, ri, li, reached_upto):
            if ri == diverged:
                builder.diverged = (lref, rref, *_input_differences(builder, left, right, li, ri))
            aligned.append(AlignedCall(status, lref, rref))
            continue
        before = len(builder.findings)
        lcall = left[li] if li is not None else None
        rcall = right[ri] if ri is not None else None
        if status == "unexpected" and rcall is not None and rcall.seq in cand.live:
            builder.add(
                FindingCode.CALL_ADDED_LIVE,
                f"{rref} of the {builder.labels[1]} run has no counterpart in the "
                f"{builder.labels[0]} run and ran live (on_miss='live'); input "
                f"{preview(rcall.input)}",
                candidate=rref,
            )
        else:
            _placement(builder, status, (lcall, lref), (rcall, rref))
        if lcall is not None and rcall is not None and lref is not None and rref is not None:
            _compare_pair(builder, lcall, rcall, lref, rref, cand.tiers.get(rcall.seq))
            if status == "same" and len(builder.findings) > before:
                status = "changed"
        aligned.append(AlignedCall(status, lref, rref))
    return aligned, alignment.approximate


def _placement(
    builder: _Builder,
    status: str,
    left: tuple[Call | None, CallRef | None],
    right: tuple[Call | None, CallRef | None],
) -> None:
    """The finding for a call that is missing, unexpected or moved (none otherwise)."""
    left_label, right_label = builder.labels
    (lcall, lref), (rcall, rref) = left, right
    if status == "missing" and lcall is not None and lref is not None:
        builder.add(
            FindingCode.MISSING_CALL,
            f"{lref} of the {left_label} run is not in the {right_label} run; "
            f"input {preview(lcall.input)}",
            baseline=lref,
        )
    elif status == "unexpected" and rcall is not None and rref is not None:
        builder.add(
            FindingCode.UNEXPECTED_CALL,
            f"{rref} of the {right_label} run is not in the {left_label} run; "
            f"input {preview(rcall.input)}",
            candidate=rref,
        )
    elif status == "moved" and lref is not None and rref is not None:
        builder.add(
            FindingCode.CALL_ORDER_CHANGED,
            f"{lref} moved: position {lref.position} in the {left_label} run, "
            f"{rref.position} in the {right_label} run",
            baseline=lref,
            candidate=rref,
        )


def _at_divergence(
    builder: _Builder, cand: ComparedRun, ri: int | None, li: int | None, reached_upto: int
) -> bool:
    """Whether an alignment row is the diverged call itself (its findings become the one
    REPLAY_DIVERGED finding) or a recorded call the stopped replay never reached."""
    if ri is not None:
        return ri == cand.diverged_call or ri in cand.refused_after_divergence
    if cand.ended_by_divergence and li is not None and li > reached_upto:
        builder.not_reached += 1
        return True
    return False


def _input_differences(
    builder: _Builder, left: list[Call], right: list[Call], li: int | None, ri: int | None
) -> tuple[list[Difference], bool]:
    if li is None or ri is None:
        return [], False
    return value_differences(
        compared_input(left[li]), compared_input(right[ri]), ignore=builder.policy.patterns
    )


def _compare_pair(
    builder: _Builder,
    left: Call,
    right: Call,
    lref: CallRef,
    rref: CallRef,
    tier: tuple[str, int, tuple[JsonPath, ...]] | None = None,
) -> None:
    left_label, right_label = builder.labels
    named = _name(lref, rref, right_label)
    patterns = builder.policy.patterns
    if left.input_json != right.input_json:
        _compare_inputs(builder, left, right, lref, rref, tier)
    left_error, right_error = left.error, right.error
    if (left_error is None) != (right_error is None) or (
        left_error is not None
        and right_error is not None
        and (left_error.type, left_error.message.strip())
        != (right_error.type, right_error.message.strip())
    ):
        builder.add(
            FindingCode.CALL_ERROR_CHANGED,
            f"{named}: {_outcome(left)} in the {left_label} run, {_outcome(right)} in the "
            f"{right_label} run",
            baseline=lref,
            candidate=rref,
        )
        return
    if left.output_json != right.output_json:
        differences, truncated = value_differences(
            compared_output(left), compared_output(right), ignore=patterns
        )
        builder.add_paths(
            FindingCode.CALL_OUTPUT_CHANGED,
            f"{named}: output changed",
            differences,
            truncated,
            baseline=lref,
            candidate=rref,
        )


def _compare_inputs(
    builder: _Builder,
    left: Call,
    right: Call,
    lref: CallRef,
    rref: CallRef,
    tier: tuple[str, int, tuple[JsonPath, ...]] | None,
) -> None:
    """Input findings of a pair of calls; a replay's non-exact match tier is said as such."""
    named = _name(lref, rref, builder.labels[1])
    relaxed = tier[2] if tier is not None else ()
    differences, truncated = value_differences(
        compared_input(left), compared_input(right), ignore=(*builder.policy.patterns, *relaxed)
    )
    relaxed_names = {str(path) for path in relaxed}
    builder.add_paths(
        FindingCode.CALL_INPUT_CHANGED,
        f"{named}: input changed",
        [d for d in differences if d.ignored_by not in relaxed_names],
        truncated,
        baseline=lref,
        candidate=rref,
    )
    ignored = tuple(d for d in differences if d.ignored_by in relaxed_names)
    if ignored:
        builder.findings.append(
            Finding(
                FindingCode.CALL_INPUT_RELAXED,
                builder.policy.severity(FindingCode.CALL_INPUT_RELAXED),
                f"{named}: input matched the recording only with match_ignore paths ignored, "
                f"at {pluralize(len(ignored), 'path')}",
                lref,
                rref,
                ignored,
                truncated,
            )
        )
    if tier is not None and tier[0] == "normalized":
        builder.add(
            FindingCode.CALL_INPUT_NORMALIZED,
            f"{named}: input matched the recording after normalisation (surrounding "
            f"whitespace, 2.0 == 2, a None-valued key == a missing key)",
            baseline=lref,
            candidate=rref,
        )


def _outcome(call: Call) -> str:
    if call.error is None:
        return "returned normally"
    return f"raised {call.error.type}: {first_line(call.error.message, 160)}"


def _status(
    builder: _Builder,
    base_status: str,
    base_failure_type: str | None,
    base_failure: str | None,
    cand: ComparedRun,
    base_label: str,
) -> None:
    _, right_label = builder.labels
    if cand.ended_by_divergence:
        return  # the run failed because the replay diverged: REPLAY_DIVERGED says so
    if base_status != cand.status:
        base_text = f"{base_status} ({base_failure})" if base_failure else base_status
        cand_text = f"{cand.status} ({cand.failure})" if cand.failure else cand.status
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run status changed: {base_label} {base_text}, {right_label} {cand_text}",
        )
    elif base_failure_type is not None and base_failure_type != cand.failure_type:
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run failure changed: {base_label} {base_failure}, {right_label} {cand.failure}",
        )


_OUTPUT_CODES: Final = {
    "structure": FindingCode.OUTPUT_STRUCTURE_CHANGED,
    "value": FindingCode.OUTPUT_VALUE_CHANGED,
    "text": FindingCode.OUTPUT_TEXT_CHANGED,
}
_OUTPUT_MESSAGES: Final = {
    "structure": "output structure changed",
    "value": "output value changed",
    "text": "output text changed",
}


def _output(builder: _Builder, baseline: Any, cand: ComparedRun, base_label: str) -> None:
    _, right_label = builder.labels
    if not cand.has_output:
        if cand.ended_by_divergence:
            return  # no output because the replay diverged: REPLAY_DIVERGED says so
        ended = f"failed: {cand.failure}" if cand.failure else cand.status
        builder.add(
            FindingCode.OUTPUT_MISSING,
            f"the {right_label} run has no output ({ended}); {base_label} output "
            f"{preview(baseline)}",
        )
        return
    differences, truncated = value_differences(
        baseline, cand.output, ignore=builder.policy.patterns
    )
    for kind in ("structure", "value", "text"):
        group = [difference for difference in differences if difference.kind == kind]
        if group:
            builder.add_paths(_OUTPUT_CODES[kind], _OUTPUT_MESSAGES[kind], group, truncated)


def _divergence(builder: _Builder, cand: ComparedRun, calls: _Builder) -> None:
    """One REPLAY_DIVERGED finding for the divergence and what it caused: the differing
    input paths of the diverged call, and the recorded calls never reached after it."""
    if not cand.divergence:
        return
    message = shorten(cand.divergence.strip().splitlines()[0], 400)
    if calls.not_reached:
        message += (
            f"; the replay stopped there, so {pluralize(calls.not_reached, 'later recorded call')}"
            f" {were(calls.not_reached)} not reached"
        )
    lref, rref, differences, truncated = calls.diverged or (None, None, [], False)
    code = FindingCode.REPLAY_DIVERGED
    builder.findings.append(
        Finding(
            code,
            builder.policy.severity(code),
            message,
            lref,
            rref,
            tuple(differences),
            truncated,
        )
    )


# --- entry points ------------------------------------------------------------------


def _report(
    baseline: Any,
    candidate: Any,
    policy: ComparisonPolicy | None,
    labels: tuple[str, str],
    expect: Expectations | None = None,
) -> Report:
    if policy is not None and not isinstance(policy, ComparisonPolicy):
        raise ConfigError(f"policy must be a ComparisonPolicy or None, got {policy!r}")
    policy = policy or DEFAULT_POLICY
    base, cand = as_run(baseline, labels[0]), as_run(candidate, labels[1])
    builder = _Builder(policy, labels)
    if expect is None:
        _status(builder, base.status, base.failure_type, base.failure, cand, labels[0])
        if base.has_output:
            _output(builder, base.output, cand, labels[0])
        rows, approximate = _calls(builder, base, cand)
        _divergence(builder, cand, builder)
        return Report(
            tuple(builder.findings),
            base.summary(),
            cand.summary(),
            tuple(rows),
            policy,
            False,
            cand.divergence,
            approximate,
        )
    from sftrace._regress.expectations import unmet_expectations

    expected_status = expect.status or "completed"
    _status(builder, expected_status, None, None, cand, "expected")
    if expect.has_output:
        _output(builder, expect.output, cand, "expected")
    for message, ref in unmet_expectations(cand.calls, expect):
        builder.add(FindingCode.EXPECTATION_FAILED, message, candidate=ref)
    # The difference from the recorded run is context here, not a verdict.
    context = _Builder(policy, labels)
    rows, approximate = _calls(context, base, cand)
    builder.findings.extend(
        Finding(
            f.code,
            Severity.INFO,
            f.message,
            f.baseline_call,
            f.candidate_call,
            f.differences,
            f.truncated,
        )
        for f in context.findings
    )
    _divergence(builder, cand, context)
    return Report(
        tuple(builder.findings),
        base.summary(),
        cand.summary(),
        tuple(rows),
        policy,
        True,
        cand.divergence,
        approximate,
    )


def expected_output_report(
    result: ReplayResult | Bundle, expected: Any, policy: ComparisonPolicy | None = None
) -> Report:
    """Only the output of ``result`` judged against ``expected`` (``assert_output``)."""
    policy = policy or DEFAULT_POLICY
    run = as_run(result, "replayed")
    builder = _Builder(policy, ("expected", run.label))
    _output(builder, expected, run, "expected")
    expected_run = ComparedRun("expected", "output", [], "completed", None, None, True, expected)
    return Report(
        tuple(builder.findings),
        expected_run.summary(),
        run.summary(),
        policy=policy,
        expected=True,
    )


def diff(
    baseline: Bundle | ReplayResult | str | os.PathLike[str],
    candidate: Bundle | ReplayResult | str | os.PathLike[str],
    *,
    policy: ComparisonPolicy | None = None,
) -> Report:
    """Compare two runs (bundles, bundle paths, or a bundle and a ``ReplayResult``).

    Calls are aligned by content, so an inserted call shows as one ``UNEXPECTED_CALL``;
    findings name each call and the JSON paths that differ. ``report.verdict`` is
    ``"fail"`` when any finding is an error under ``policy``.
    """
    return _report(baseline, candidate, policy, ("baseline", "candidate"))


def compare(
    recorded: Bundle | str | os.PathLike[str],
    replayed: ReplayResult | Bundle | str | os.PathLike[str],
    policy: ComparisonPolicy | None = None,
    *,
    expect: Expectations | None = None,
) -> Report:
    """Judge a replay against the recorded run it replayed.

    Without ``expect`` the recorded run is the reference: any behaviour change is a
    finding. With ``expect`` (the corrected behaviour) the expectations are the
    reference: the replay must reach the expected status (``"completed"`` unless stated)
    and output and meet the trajectory expectations; how it differs from the recording
    is reported as ``info``. A replay that diverged (reached a call the recording cannot
    answer) is a ``REPLAY_DIVERGED`` error either way.
    """
    return _report(recorded, replayed, policy, ("recorded", "replayed"), expect)
