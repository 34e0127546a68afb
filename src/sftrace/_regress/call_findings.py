"""The call findings of a comparison: the calls of two runs aligned by content
(``align``), and each call that is missing, unexpected, moved or changed (input, output,
error) as a finding; a replay's divergence noted for ``compare``'s REPLAY_DIVERGED."""

from __future__ import annotations

from collections.abc import Sequence

from sftrace._model.calls import Call, CallRef
from sftrace._model.jsonpath import JsonPath, strip
from sftrace._model.normalize import message_key
from sftrace._model.text import first_line, pluralize, preview
from sftrace._regress.align import align_calls
from sftrace._regress.diff import Difference, content_key, value_differences
from sftrace._regress.findings import AlignedCall, Finding, FindingBuilder, FindingCode
from sftrace._regress.runs import ComparedRun, compared_input, compared_output

__all__ = ["compare_calls"]


def _name(ref: CallRef, other: CallRef | None, other_label: str) -> str:
    if other is None or other.number == ref.number:
        return str(ref)
    return f"{ref} ({other_label} call {other.number})"


def compare_calls(
    builder: FindingBuilder, base: ComparedRun, cand: ComparedRun
) -> tuple[list[AlignedCall], bool]:
    """Align the calls and add the call findings; return the alignment rows."""
    patterns = builder.policy.patterns
    # A call a replay matched in the relaxed tier is aligned without the ignored paths.
    relaxed_left = {seq: ignored for _, seq, ignored in cand.tiers.values() if ignored}
    relaxed_right = {seq: tier[2] for seq, tier in cand.tiers.items() if tier[2]}

    # A replay says which recorded call each of its calls was answered from: that pair
    # aligns, also among calls with the same input (threads reaching them in any order).
    answered = cand.answered
    answered_from = set(answered.values())

    def key(
        call: Call, relaxed: dict[int, tuple[JsonPath, ...]], paired: int | None
    ) -> tuple[str, str, str | None, str, int | None]:
        compared = strip(compared_input(call), (*patterns, *relaxed.get(call.seq, ())))
        return (call.kind, call.name, call.provider, content_key(compared), paired)

    def identity(call: Call, paired: int | None) -> tuple[str, str, str | None, int | None]:
        return (call.kind, call.name, call.provider, paired)

    # Calls recorded inside a call the replay answered from the recording were not run,
    # so they are left out (their positions still count from the whole run).
    left_positions = [i for i, call in enumerate(base.calls) if call.seq not in cand.covered]
    left, right = [base.calls[i] for i in left_positions], cand.calls
    left_paired = [c.seq if c.seq in answered_from else None for c in left]
    right_paired = [answered.get(c.seq) for c in right]
    alignment = align_calls(
        [key(c, relaxed_left, paired) for c, paired in zip(left, left_paired, strict=True)],
        [key(c, relaxed_right, paired) for c, paired in zip(right, right_paired, strict=True)],
        [identity(c, paired) for c, paired in zip(left, left_paired, strict=True)],
        # a call that ran live (on_miss="live") pairs with no recorded call
        [
            ("live", str(k), None, None) if c.seq in cand.live else identity(c, paired)
            for k, (c, paired) in enumerate(zip(right, right_paired, strict=True))
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
    reordered = _reordered_by_the_agent(base, left_positions, alignment.rows)
    aligned: list[AlignedCall] = []
    for status, li, ri in alignment.rows:
        lref = CallRef.of(left[li], left_positions[li] + 1) if li is not None else None
        rref = CallRef.of(right[ri], ri + 1) if ri is not None else None
        if diverged is not None and _at_divergence(builder, cand, (status, li, ri), reached_upto):
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
        elif not (status == "moved" and (cand.order_free or li not in reordered)):
            # An unordered replay accepted its calls in any order, and calls the baseline
            # made concurrently come in any order: a moved call is no finding then.
            _placement(builder, status, (lcall, lref), (rcall, rref))
        if lcall is not None and rcall is not None and lref is not None and rref is not None:
            _compare_pair(builder, lcall, rcall, lref, rref, cand.tiers.get(rcall.seq))
            if status == "same" and len(builder.findings) > before:
                status = "changed"
        aligned.append(AlignedCall(status, lref, rref))
    return aligned, alignment.approximate


def _reordered_by_the_agent(
    base: ComparedRun, left_positions: list[int], rows: Sequence[tuple[str, int | None, int | None]]
) -> frozenset[int]:
    """The moved calls (indexes into the aligned baseline calls) whose order the agent
    changed: each comes on the other side of a call that the baseline shows it made
    before (or after) in the agent's own order. Where the baseline's calls overlapped or
    were handed to threads (``base.concurrency``), a call that only changed places with
    calls it ran concurrently with moved by the scheduler's hand; a sequential baseline
    has every moved call."""
    moved = [(li, ri) for status, li, ri in rows if status == "moved" and li is not None]
    concurrency = base.concurrency
    if concurrency is None or not moved:
        return frozenset(li for li, _ in moved)
    paired = [(li, ri) for _, li, ri in rows if li is not None and ri is not None]
    changed = set()
    for li, ri in moved:
        assert ri is not None
        i = left_positions[li]
        for lk, rk in paired:
            if lk == li or (lk < li) == (rk < ri):
                continue
            k = left_positions[lk]
            if concurrency.before(i, k) or concurrency.before(k, i):
                changed.add(li)
                break
    return frozenset(changed)


def _placement(
    builder: FindingBuilder,
    status: str,
    left: tuple[Call | None, CallRef | None],
    right: tuple[Call | None, CallRef | None],
) -> None:
    """The finding for a call that is missing, unexpected or moved (none otherwise)."""
    left_label, right_label = builder.labels
    (lcall, lref), (rcall, rref) = left, right
    if status in ("missing", "unexpected"):
        # A call of one run with no counterpart in the other: the same sentence either way.
        missing = status == "missing"
        call, ref = (lcall, lref) if missing else (rcall, rref)
        here, there = (left_label, right_label) if missing else (right_label, left_label)
        if call is not None and ref is not None:
            builder.add(
                FindingCode.MISSING_CALL if missing else FindingCode.UNEXPECTED_CALL,
                f"{ref} of the {here} run is not in the {there} run; input {preview(call.input)}",
                baseline=ref if missing else None,
                candidate=None if missing else ref,
                input_json=call.input_json,
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
    builder: FindingBuilder,
    cand: ComparedRun,
    row: tuple[str, int | None, int | None],
    reached_upto: int,
) -> bool:
    """Whether an alignment row is the diverged call itself (its findings become the one
    REPLAY_DIVERGED finding), a recorded call the stopped replay never reached, or a call
    that differs only because it was reached after the divergence that ended the run
    (concurrent calls of other threads or tasks, compared with a recording the replay had
    left): those are counted into the REPLAY_DIVERGED finding, not findings of their own."""
    status, li, ri = row
    if ri is not None:
        if ri == cand.diverged_call or ri in cand.refused_after_divergence:
            return True
        after = cand.diverged_call is not None and ri > cand.diverged_call
        if cand.ended_by_divergence and after and status != "same":
            builder.after_divergence += 1
            return True
        return False
    if cand.ended_by_divergence and li is not None and li > reached_upto:
        builder.not_reached += 1
        return True
    return False


def _input_differences(
    builder: FindingBuilder, left: list[Call], right: list[Call], li: int | None, ri: int | None
) -> tuple[list[Difference], bool]:
    if li is None or ri is None:
        return [], False
    return value_differences(
        compared_input(left[li]), compared_input(right[ri]), ignore=builder.policy.patterns
    )


def _compare_pair(
    builder: FindingBuilder,
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
        and (left_error.type, message_key(left_error.message))
        != (right_error.type, message_key(right_error.message))
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
    builder: FindingBuilder,
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
