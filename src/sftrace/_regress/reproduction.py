"""Whether a replay reproduced a recorded failure: what ``minimize`` keeps constant.

A :data:`Signature` is what a replay brought back: when the recorded run failed, the
exception's type and message (as the replayed run span records them, redacted the same
way as the recording); with expectations, also which of them stay unmet (``status``,
``output``, and each trajectory expectation by its key, e.g. ``not_called:issue_refund``).
A replay that diverged has no signature.
"""

from __future__ import annotations

from sftrace._bundle.reader import Bundle
from sftrace._errors import ReplayError
from sftrace._model import attributes as A
from sftrace._model.normalize import message_key
from sftrace._model.text import pluralize
from sftrace._regress.compare import compare
from sftrace._regress.expectations import Expectations, unmet_expectation_keys
from sftrace._regress.findings import FindingCode, Severity
from sftrace._replay.run import ReplayResult, run_span_attributes

__all__ = ["Signature", "check_reproduced", "describe", "signature"]

Signature = tuple[tuple[str, ...], ...]


def signature(
    recorded: Bundle, result: ReplayResult, expect: Expectations | None
) -> Signature | None:
    """What ``result`` reproduced of ``recorded`` (see the module doc), or None."""
    if result.divergence is not None:
        return None
    parts: list[tuple[str, ...]] = []
    if recorded.status == "failed":
        attributes = run_span_attributes(result.spans)
        parts.append(
            (
                "failure",
                str(attributes.get(A.ERROR_TYPE, "")),
                message_key(str(attributes.get(A.ERROR_MESSAGE, ""))),
            )
        )
    if expect is not None:
        parts.extend((key,) for key in _unmet(recorded, result, expect))
    return tuple(parts)


def check_reproduced(
    recorded: Bundle, first: ReplayResult, found: Signature | None, expect: Expectations | None
) -> Signature:
    """``found`` (the signature of ``first``, a replay of ``recorded``), when it is the
    recorded failure; else ``ReplayError`` saying what the replay did instead."""
    failure = recorded.failure
    problem = None
    if found is None:
        problem = f"the replay diverged: {str(first.divergence).splitlines()[0]}"
    elif recorded.status == "failed" and failure is not None:
        if found[0] != ("failure", failure.type, message_key(failure.message or "")):
            got = f"{found[0][1]}: {found[0][2]}" if found[0][1] else "no failure"
            problem = f"the recorded run failed with {failure.type}, the replay with {got}"
    elif expect is not None and not found:
        problem = "the replay meets every expectation given"
    if problem is not None or found is None:
        raise ReplayError(
            f"cannot minimize run {recorded.run_id}: a frozen replay of it does not "
            f"reproduce the failure ({problem}); minimize needs a failure the agent's "
            f"entrypoint brings back"
        )
    return found


def describe(found: Signature) -> str:
    """``KeyError: 'XXX'``, ``2 expectations not met: output, not_called:issue_refund``."""
    parts = [f"{part[1]}: {part[2]}" for part in found if part[0] == "failure"]
    unmet = [part[0] for part in found if part[0] != "failure"]
    if unmet:
        parts.append(f"{pluralize(len(unmet), 'expectation')} not met: {', '.join(unmet)}")
    return "; ".join(parts)


def _unmet(recorded: Bundle, result: ReplayResult, expect: Expectations) -> list[str]:
    """Which expectations the replay does not meet: ``status``, ``output`` and the keys
    of the trajectory expectations (as ``compare(..., expect=)`` judges them)."""
    keys: list[str] = []
    report = compare(recorded, result, expect=expect)
    for finding in report.findings:
        if finding.severity is not Severity.ERROR:
            continue
        if finding.code is FindingCode.STATUS_CHANGED:
            key = "status"
        elif finding.code.value.startswith("OUTPUT_"):
            key = "output"
        else:
            continue
        if key not in keys:
            keys.append(key)
    return keys + unmet_expectation_keys(result.made_calls, expect)
