"""Behavioural comparison of two runs: ``diff`` and ``compare``.

Calls are aligned by content (``align``), then each difference becomes a
:class:`~sftrace._regress.findings.Finding` with a stable code and the severity the
:class:`~sftrace._regress.findings.ComparisonPolicy` gives it (``findings``). The call
findings are made in ``call_findings``, the run's (status, output, divergence) here.
What is compared of a run and of a call is in ``runs``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError
from sftrace._model.calls import CallRef
from sftrace._model.normalize import message_key
from sftrace._model.text import pluralize, preview, shorten, show_pair, were
from sftrace._regress.call_findings import compare_calls
from sftrace._regress.diff import value_differences
from sftrace._regress.findings import (
    DEFAULT_POLICY,
    AlignedCall,
    ComparisonPolicy,
    Finding,
    FindingBuilder,
    FindingCode,
    Report,
    RunSummary,
    Severity,
    Verdict,
)
from sftrace._regress.runs import ComparedRun, as_run, covered_by_saved_replay

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


# --- run findings ------------------------------------------------------------------


def _status(builder: FindingBuilder, base: ComparedRun, cand: ComparedRun, base_label: str) -> None:
    _, right_label = builder.labels
    if cand.ended_by_divergence:
        return  # the run failed because the replay diverged: REPLAY_DIVERGED says so
    if base.status != cand.status:
        base_text = f"{base.status} ({base.failure})" if base.failure else base.status
        cand_text = f"{cand.status} ({cand.failure})" if cand.failure else cand.status
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run status changed: {base_label} {base_text}, {right_label} {cand_text}",
        )
    elif base.failure_type is not None and base.failure_type != cand.failure_type:
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run failure changed: {base_label} {base.failure}, {right_label} {cand.failure}",
        )
    elif (
        base.failure_message is not None
        and cand.failure_message is not None
        and message_key(base.failure_message) != message_key(cand.failure_message)
    ):
        shown = show_pair(
            base.failure_message, cand.failure_message, labels=(base_label, right_label)
        )
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run failure message changed ({base.failure_type}): " + "\n    ".join(shown),
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


def _output(builder: FindingBuilder, baseline: Any, cand: ComparedRun, base_label: str) -> None:
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


def _divergence(builder: FindingBuilder, cand: ComparedRun, calls: FindingBuilder) -> None:
    """One REPLAY_DIVERGED finding for the divergence and what it caused: the differing
    input paths of the diverged call, and the recorded calls never reached after it."""
    if not cand.divergence:
        return
    message = shorten(cand.divergence.strip().splitlines()[0], 400)
    if calls.not_reached:
        message += (
            f"; the replay stopped there, so {pluralize(calls.not_reached, 'recorded call')}"
            f" from there on {were(calls.not_reached)} not reached"
        )
    if calls.after_divergence:
        count = calls.after_divergence
        message += (
            f"; {pluralize(count, 'call')} reached after it (concurrently, in other threads or"
            f" tasks) {'differs' if count == 1 else 'differ'} from the recording as a consequence"
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
    cand.covered = covered_by_saved_replay(base, cand)
    builder = FindingBuilder(policy, labels)
    if expect is None:
        rows, approximate = _against_baseline(builder, base, cand)
    else:
        rows, approximate = _against_expectations(builder, base, cand, expect)
    return Report(
        tuple(builder.findings),
        base.summary(),
        cand.summary(),
        tuple(rows),
        policy,
        expect is not None,
        cand.divergence,
        approximate,
    )


def _against_baseline(
    builder: FindingBuilder, base: ComparedRun, cand: ComparedRun
) -> tuple[list[AlignedCall], bool]:
    """The findings of ``cand`` judged against the baseline run; the alignment rows."""
    base_label = builder.labels[0]
    _status(builder, base, cand, base_label)
    if base.has_output:
        _output(builder, base.output, cand, base_label)
    rows, approximate = compare_calls(builder, base, cand)
    _divergence(builder, cand, builder)
    return rows, approximate


def _against_expectations(
    builder: FindingBuilder, base: ComparedRun, cand: ComparedRun, expect: Expectations
) -> tuple[list[AlignedCall], bool]:
    """The findings of ``cand`` judged against ``expect``, with how it differs from the
    baseline run as ``info``; the alignment rows."""
    from sftrace._regress.expectations import unknown_names, unmet_expectations

    expected_status = expect.status or "completed"
    expected_run = ComparedRun(
        "expected", "expectations", [], expected_status, None, None, False, None
    )
    _status(builder, expected_run, cand, "expected")
    if expect.has_output:
        _output(builder, expect.output, cand, "expected")
    made = cand.made if cand.made is not None else cand.calls
    for message, ref in unmet_expectations(made, expect):
        builder.add(FindingCode.EXPECTATION_FAILED, message, candidate=ref)
    for name in unknown_names(expect, base.calls, made):
        builder.add(
            FindingCode.EXPECTATION_UNKNOWN_NAME,
            f"the expectations name {name!r}, which no call of the recorded or the replayed "
            f"run has: a misspelt or renamed tool or model? (an expectation about it holds "
            f"whatever the agent does)",
        )
    # The difference from the recorded run is context here, not a verdict.
    context = FindingBuilder(builder.policy, builder.labels)
    rows, approximate = compare_calls(context, base, cand)
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
    return rows, approximate


def expected_output_report(
    result: ReplayResult | Bundle, expected: Any, policy: ComparisonPolicy | None = None
) -> Report:
    """Only the output of ``result`` judged against ``expected`` (``assert_output``)."""
    policy = policy or DEFAULT_POLICY
    run = as_run(result, "replayed")
    builder = FindingBuilder(policy, ("expected", run.label))
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
