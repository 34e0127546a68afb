"""The errors a replay raises where a reached call matches no recorded one: what was
recorded, what was reached, where the inputs differ, and what to do about it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sftrace._errors import RecordingEndedError, ReplayExhaustedError, ReplayMismatchError
from sftrace._model.calls import Call
from sftrace._model.jsondiff import differences, format_differences, unlikeness
from sftrace._model.jsonpath import child
from sftrace._model.serialize import canonical, loads
from sftrace._model.text import pluralize, shorten, were
from sftrace._record.intercept import Reached


def nearest_of(same: list[Call], reached: Reached) -> Call:
    """Of ``same`` (calls of ``reached``'s identity), the one whose input differs least:
    in the fewest paths, then in the most alike values (the earliest of equals)."""
    reached_input = loads(reached.input_json)
    scored = [(differences(call.input, reached_input), call) for call in same]
    fewest = min(len(diffs) for diffs, _ in scored)
    ties = [(diffs, call) for diffs, call in scored if len(diffs) == fewest]
    return min(ties, key=lambda tie: unlikeness(tie[0]))[1]


# Longer strings are not compared character by character for reordered_only.
_REORDER_CHARS = 1_000_000


def reordered_only(left: Any, right: Any) -> bool:
    """Whether two differing values hold the same items in another order: lists of the
    same items, or texts of the same characters (a serialized set, a joined list)."""
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and sorted(map(canonical, left)) == sorted(
            map(canonical, right)
        )
    if isinstance(left, str) and isinstance(right, str):
        return (
            left != right
            and len(left) == len(right)
            and len(left) <= _REORDER_CHARS
            and Counter(left) == Counter(right)
        )
    return False


def shuffled_paths(left: Any, right: Any, path: str = "$", limit: int = 3) -> list[str]:
    """The outermost paths (at most ``limit``) where two values hold the same items in
    another order (:func:`reordered_only`)."""
    if left == right:
        return []
    if reordered_only(left, right):
        return [path]
    found: list[str] = []
    if isinstance(left, dict) and isinstance(right, dict):
        pairs: list[tuple[str | int, Any, Any]] = [
            (key, left[key], right[key]) for key in left if key in right
        ]
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        pairs = [(index, a, b) for index, (a, b) in enumerate(zip(left, right, strict=True))]
    else:
        return found
    for segment, a, b in pairs:
        found.extend(shuffled_paths(a, b, child(path, segment), limit - len(found)))
        if len(found) >= limit:
            break
    return found


def exhausted_error(
    number: int,
    reached: Reached,
    count: int,
    unfinished: int | None = None,
    *,
    covered: int = 0,
) -> ReplayExhaustedError:
    """Reached call ``number`` finds all ``count`` recorded calls used (``covered`` of them
    made inside calls answered from the recording, so never reached); ``unfinished``: the
    seq of a recorded call of the same kind and name that was still running when the
    recorded run ended (the bundle lacks it)."""
    inside = f" ({covered} of them inside calls answered from the recording)" if covered else ""
    message = (
        f"replay exhausted at call {number}: reached {reached.label} with input "
        f"{shorten(reached.input_json, 200)}, but {'the' if count == 1 else 'all'} "
        f"{pluralize(count, 'recorded call')} {were(count)} already used{inside}; the agent "
        f"makes more calls than the recorded run did"
    )
    if unfinished is not None:
        message += "\n" + unfinished_hint(unfinished, reached)
    return ReplayExhaustedError(message, call_number=number, reached=reached.describe())


def recording_ended_error(
    number: int, reached: Reached, count: int, inside: list[int] | None = None
) -> RecordingEndedError:
    """Reached call ``number`` goes past the end of an ``interrupted`` recording whose
    ``count`` calls were all used, or (``inside``: the seqs of the calls left) is taken to
    be the call the recorded process died in, or (``inside == [-1]``) one of the calls
    still running when it died, among concurrent ones."""
    where = f"call {number} ({reached.label} with input {shorten(reached.input_json, 200)})"
    if inside == [-1]:
        message = (
            f"the recorded run was interrupted (its process died) while calls ran "
            f"concurrently: {where} matches none of its calls not yet used, and is taken to "
            f"be one still running then, lost with the process; the replay stops it here "
            f"(the other calls go on)"
        )
    elif inside:
        listed = ", ".join(map(str, inside[:10])) + (" ..." if len(inside) > 10 else "")
        message = (
            f"the recorded run was interrupted inside a call (its process died): recorded "
            f"{'call' if len(inside) == 1 else 'calls'} {listed} ran inside a call that never "
            f"finished, and the replay matched every other recorded call; {where} is taken "
            f"to be that call, which was never recorded, so the replay stops the agent here"
        )
    else:
        message = (
            f"the recorded run was interrupted after its {pluralize(count, 'recorded call')} "
            f"(its process died), and the replay matched {'it' if count == 1 else 'every one'}"
            f"; {where} was never recorded, so the replay stops the agent here"
        )
    return RecordingEndedError(message, call_number=number, reached=reached.describe())


def live_hint(reached: Reached) -> str:
    """What to say of a call ``on_miss="live"`` may not run (tools must be named)."""
    if reached.kind == "llm":
        return (
            f"  on_miss='live' runs only the models in live_llms; add "
            f"'{reached.provider}/{reached.name}' to live_llms (CLI: --live-llm) to run "
            f"{reached.label} live"
        )
    return (
        f"  on_miss='live' runs only the tools it is allowed to: pass "
        f"allow_live_tools=['{reached.name}'] (CLI: --allow-live-tool {reached.name}) to run "
        f"this one for real, or ['*'] for every tool"
    )


def unfinished_hint(seq: int, reached: Reached) -> str:
    """What to say of a reached call the recording left running when its run ended."""
    return (
        f"  the recorded run ended while its call {seq} ({reached.label}) was still "
        f"running, so the bundle lacks it: the recording did not wait for work it handed "
        f"to a thread or task (it logged a warning); wait for it before the run ends "
        f"(future.result(), executor.shutdown(wait=True), awaiting the task) and record "
        f"again"
    )


def mismatch_error(
    number: int,
    reached: Reached,
    recorded: Call | None,
    *,
    unordered: bool,
    same_identity: bool,
    later: Call | None,
    concurrent: bool,
    unfinished: int | None = None,
    not_live: bool = False,
) -> ReplayMismatchError:
    """Reached call ``number`` does not match ``recorded`` (the call at its position, or
    the nearest unused one when ``unordered``); ``same_identity``: the two have the same
    kind, name and provider; ``later``: an unused recorded call after the position that
    it matches; ``concurrent``: the recording has calls made concurrently; ``unfinished``:
    the seq of a call of ``reached``'s kind and name still running when the recorded run
    ended; ``not_live``: ``on_miss="live"`` would have run it, had it been allowed."""
    diffs: list[tuple[str, Any, Any]] = []
    lines: list[str] = []
    if unordered:
        lines.append(
            f"replay diverged at call {number}: reached {reached.label}, and no unused "
            f"recorded call has the same kind, name and input"
        )
    elif recorded is not None and same_identity:
        lines.append(
            f"replay diverged at call {number}: reached {reached.label} with a different "
            f"input than recorded"
        )
    else:
        recorded_label = recorded.label if recorded is not None else "nothing"
        lines.append(
            f"replay diverged at call {number}: reached {reached.label}, but the recording "
            f"has {recorded_label} at this position"
        )
    reached_input = loads(reached.input_json)
    if recorded is not None:
        diffs = differences(recorded.input, reached_input)
        where = "nearest unused recorded call" if unordered else "recorded"
        shown = shorten(recorded.input_json, 200)
        lines.append(f"  {where}: call {recorded.seq}: {recorded.label} {shown}")
    lines.append(f"  reached:  {reached.label} {shorten(reached.input_json, 200)}")
    if diffs and recorded is not None and same_identity:
        lines.append("  input differs at:")
        lines.append(format_differences(diffs, left="recorded", right="reached"))
        shuffled = shuffled_paths(recorded.input, reached_input)
        if shuffled:
            lines.append(
                f"  {', '.join(shuffled[:3])}: the same items in another order, which an "
                f"agent gets from iterating a set (its order changes from process to "
                f"process with PYTHONHASHSEED) or from collecting concurrent results as "
                f"they finish; sort such values before using them"
            )
    if later is not None and not concurrent:
        first = recorded.seq if recorded is not None else later.seq
        one = later.seq - first <= 1
        skipped = f"recorded call {first}" if one else f"recorded calls {first}-{later.seq - 1}"
        lines.append(
            f"  the recording makes this call later, as call {later.seq}: the agent now "
            f"skips {skipped} before it, or makes {'it' if one else 'them'} after it; if "
            f"its calls may change order from run to run (threads, asyncio tasks), "
            f"match='unordered' (CLI: --match unordered) matches each call by kind, name "
            f"and input instead of position"
        )
    elif later is not None:
        lines.append(
            f"  the recording makes this call later, as call {later.seq}, and shows it "
            f"made after the calls before it had ended (not concurrently with them), so "
            f"a strict replay keeps that order: the agent now skips the calls recorded "
            f"before it, or makes them after it; if its order may vary from run to run, "
            f"match='unordered' (CLI: --match unordered) matches each call by kind, name "
            f"and input instead of position"
        )
    if unfinished is not None and later is None:
        lines.append(unfinished_hint(unfinished, reached))
    if not_live:
        lines.append(live_hint(reached))
    return ReplayMismatchError(
        "\n".join(lines),
        call_number=number,
        recorded=recorded.describe() if recorded is not None else None,
        reached=reached.describe(),
        differences=diffs,
    )


__all__ = [
    "exhausted_error",
    "mismatch_error",
    "nearest_of",
    "recording_ended_error",
    "unfinished_hint",
]
