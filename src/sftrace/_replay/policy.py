"""What a replay does with a recorded call it matched: the call's recorded replay policy
(``forbidden``, ``derived``, ``live``, ``manual``, ``frozen``) and the replay's mode decide."""

from __future__ import annotations

from collections.abc import Collection

from sftrace._errors import ReplayPolicyError
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.policy import ReplayMode, ReplayPolicy
from sftrace._record.intercept import RETURN, Action, Decision
from sftrace._replay.rebuild import rebuild_exception

# Looked up once (see ANSWERED in _record/intercept.py): tested for every reached call.
_FROZEN, _LIVE = ReplayPolicy.FROZEN, ReplayMode.LIVE


def policy_decision(
    number: int,
    recorded: Call,
    *,
    mode: ReplayMode,
    has_manual: bool,
    allow_live_tools: Collection[str],
) -> Decision:
    """The decision for reached call ``number``, matched to ``recorded``."""
    policy = recorded.policy
    if policy != _FROZEN:  # most calls are frozen
        recorded_policy = _recorded_policy(number, recorded, policy, has_manual)
        if recorded_policy is not None:
            return recorded_policy
    # frozen (or a policy this version does not know): the mode decides
    if mode is _LIVE:
        if (
            recorded.kind == A.KIND_LLM
            or recorded.name in allow_live_tools
            or "*" in allow_live_tools
        ):
            return Decision(Action.EXECUTE, recorded)
        return Decision(
            Action.RAISE,
            recorded,
            ReplayPolicyError(
                f"call {number} ({recorded.label}) would run a real tool in live mode; "
                f"allow it with allow_live_tools=[{recorded.name!r}] (CLI: "
                f"--allow-live-tool {recorded.name}) or replay it frozen"
            ),
        )
    if recorded.error is not None:
        return Decision(
            Action.RAISE, recorded, rebuild_exception(recorded.error), recorded_failure=True
        )
    return Decision(RETURN, recorded)


def _recorded_policy(number: int, recorded: Call, policy: str, has_manual: bool) -> Decision | None:
    """The decision a policy other than ``frozen`` makes whatever the mode (None: the
    mode decides)."""
    if policy == ReplayPolicy.FORBIDDEN:
        return Decision(
            Action.RAISE,
            recorded,
            ReplayPolicyError(
                f"call {number} ({recorded.label}) was recorded with replay_policy="
                f"'forbidden': it must not be reached during a replay"
            ),
        )
    if policy == ReplayPolicy.DERIVED:
        return Decision(Action.DERIVED, recorded)
    if policy == ReplayPolicy.LIVE:
        return Decision(Action.EXECUTE, recorded)
    if policy == ReplayPolicy.MANUAL:
        if not has_manual:
            return Decision(
                Action.RAISE,
                recorded,
                ReplayPolicyError(
                    f"call {number} ({recorded.label}) was recorded with replay_policy="
                    f"'manual', but the replay has no manual handler; pass manual=<a "
                    f"function taking the recorded Call and returning the value to use>"
                ),
            )
        return Decision(Action.MANUAL, recorded)
    return None


__all__ = ["policy_decision"]
