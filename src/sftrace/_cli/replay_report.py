"""A replay's report, as ``sftrace replay`` (and ``sftrace fork``) print it: the verdict,
the JSON document of ``--json`` and the text report, from one ``ReplayResult``."""

from __future__ import annotations

from typing import Any, Literal

from rich.text import Text

from sftrace._bundle.reader import Bundle
from sftrace._cli.output import SafeConsole, human_console
from sftrace._errors import ReplayExhaustedError, ReplayMismatchError, SftraceError
from sftrace._model.calls import Call
from sftrace._model.jsondiff import MISSING
from sftrace._model.serialize import to_json
from sftrace._model.text import one_line, pluralize, preview, were
from sftrace._record.run import exception_type_name, safe_str
from sftrace._replay.controller import MatchedCall
from sftrace._replay.run import ReplayResult, ended_by_divergence

PREVIEW_CHARS = 100

Verdict = Literal["reproduced", "diverged", "incomplete", "changed"]

_ACTION_STYLES = {
    "substituted": "green",
    "executed": "yellow",
    "derived": "cyan",
    "manual": "blue",
    "refused": "bold red",
    "live": "magenta",
    "overridden": "blue",
}


def replay_verdict(result: ReplayResult) -> Verdict:
    """``reproduced`` (exit 0), or why not: ``diverged``, ``incomplete``, ``changed``."""
    if result.divergence is not None:
        return "diverged"
    if result.unused:
        return "incomplete"
    return "reproduced" if result.reproduced else "changed"


# --- JSON ---------------------------------------------------------------------------


def replay_document(
    result: ReplayResult, *, entrypoint: str, mode: str, match: str
) -> dict[str, Any]:
    """The facts of the text report as a JSON document, keys in a fixed order."""
    recorded = result.bundle
    failure = recorded.manifest.failure
    divergence = result.divergence
    return {
        "bundle": str(recorded.path) if recorded.path is not None else None,
        "entrypoint": entrypoint,
        "mode": mode,
        "match": match,
        "verdict": replay_verdict(result),
        "reproduced": result.reproduced,
        "reproduced_failure": result.reproduced_failure,
        "recorded": {
            "run_id": recorded.run_id,
            "agent_name": recorded.agent_name,
            "status": recorded.status,
            "failure": None
            if failure is None
            else {"type": failure.type, "message": failure.message, "step": failure.step},
            "has_output": recorded.has_output,
            "output": recorded.output,
            "calls": len(recorded.calls),
        },
        "replay": {
            "status": result.status,
            "return_value": _jsonable(result.return_value),
            "has_output": result.has_output,
            "output": result.output,
            "error": _error_document(result.error),
        },
        "matched": [
            {
                "number": item.number,
                "seq": item.recorded.seq,
                "kind": item.recorded.kind,
                "name": item.recorded.name,
                "provider": item.recorded.provider,
                "action": item.action,
                "tier": item.tier,
                "differences": [_difference_document(*entry) for entry in item.differences],
            }
            for item in result.matched
        ],
        "match_counts": result.match_counts,
        "unused": [
            {
                "seq": call.seq,
                "kind": call.kind,
                "name": call.name,
                "provider": call.provider,
                "input": call.input,
            }
            for call in result.unused
        ],
        # Recorded inside calls answered from the recording: not reached, not missing.
        "covered": [
            {"seq": call.seq, "kind": call.kind, "name": call.name, "provider": call.provider}
            for call in result.covered
        ],
        "divergence": None if divergence is None else _divergence_document(divergence),
        "recording_end": None
        if result.recording_end is None
        else _divergence_document(result.recording_end),
        "saved_path": str(result.saved_path) if result.saved_path is not None else None,
    }


def _divergence_document(divergence: BaseException) -> dict[str, Any]:
    """The divergence with the full values (the message shortens them): the recorded and
    reached calls and each differing path."""
    return {
        "type": type(divergence).__name__,
        "call_number": getattr(divergence, "call_number", None),
        "message": str(divergence),
        "recorded": getattr(divergence, "recorded", None),
        "reached": getattr(divergence, "reached", None),
        "differences": [
            _difference_document(path, recorded, reached)
            for path, recorded, reached in getattr(divergence, "differences", ())
        ],
    }


def _difference_document(path: str, recorded: Any, reached: Any) -> dict[str, Any]:
    return {
        "path": path,
        "recorded": None if recorded is MISSING else recorded,
        "reached": None if reached is MISSING else reached,
        "missing": "recorded" if recorded is MISSING else "reached" if reached is MISSING else None,
    }


def _jsonable(value: Any) -> Any:
    """The value as JSON when sftrace can convert it, else its repr (a string)."""
    try:
        return to_json(value)
    except SftraceError:
        return repr(value)


def _error_document(error: BaseException | None) -> dict[str, str] | None:
    if error is None:
        return None
    return {"type": _error_name(error), "message": safe_str(error)}


def _error_name(error: BaseException) -> str:
    """``ValueError``, ``pkg.mod.Error``; sftrace's own errors by their public name."""
    return exception_type_name(error)[0]


# --- text ---------------------------------------------------------------------------


def print_report(
    result: ReplayResult, *, entrypoint: str, mode: str, match: str, verdict: Verdict, limit: int
) -> None:
    """The text report of ``sftrace replay``: the calls matched and unused, the outcome,
    the verdict."""
    console = human_console()
    recorded = result.bundle
    console.print(
        Text.assemble(
            "Replayed ",
            (recorded.agent_name, "bold"),
            f" run {recorded.run_id} ({recorded.status}) with {entrypoint}",
            (f"  [mode {mode}, match {match}]", "dim"),
        )
    )
    print_matched(console, result.matched, limit=limit)
    if not result.matched:
        console.print(Text("  no recorded call was matched", style="dim"))
    print_unused(console, result.unused, "unused recorded calls")
    if result.covered:
        covered = len(result.covered)
        console.print(
            Text(
                f"{pluralize(covered, 'recorded call')} inside calls answered from the "
                f"recording (covered: made by them, not reached again)",
                style="dim",
            )
        )
    print_outcome(console, result)
    if result.saved_path is not None:
        console.print(f"saved the replayed run: {result.saved_path}")
    elif result.options.save is not None and result.divergence is not None:
        console.print(
            Text(
                f"not saved to {result.options.save}: the replay diverged, and a bundle of "
                "it would hold the replay's own error as the run's failure",
                "yellow",
            )
        )
    console.print(_verdict_text(result, verdict))
    if verdict == "diverged" and isinstance(
        result.divergence, ReplayMismatchError | ReplayExhaustedError
    ):
        console.print(
            Text(
                "  if the agent changed this call on purpose (a fix): --match-ignore NAME=PATH "
                "accepts a reworded input, --on-miss live runs calls the recording lacks "
                '(docs/regression-tests.md, "When the fix changes the calls")',
                style="dim",
            )
        )


def print_matched(
    console: SafeConsole, matched: list[MatchedCall], *, limit: int, width: int | None = None
) -> None:
    """One line per matched call (at most ``limit``; 0: all): its number, recorded seq
    (``new`` for a live call), label, action, tier and where its input differed."""
    shown = matched if limit == 0 else matched[:limit]
    if width is None:
        width = max((len(item.recorded.label) for item in shown), default=0)
    for item in shown:
        console.print(_matched_line(item, width))
    if len(shown) < len(matched):
        console.print(
            Text(
                f"  ... and {pluralize(len(matched) - len(shown), 'more matched call')} "
                f"(--limit 0 lists all)",
                style="dim",
            )
        )


def _matched_line(item: MatchedCall, width: int) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    seq = f"#{item.recorded.seq}" if item.action != "live" else "new"
    line.append(f"  {item.number:>3}. {seq} ")
    line.append(item.recorded.label.ljust(width), style="bold")
    line.append("  ")
    line.append(item.action, style=_ACTION_STYLES.get(item.action, ""))
    if item.tier is not None:
        line.append(f" [{item.tier}]", style="" if item.tier == "exact" else "yellow")
    if item.differences:
        paths = ", ".join(path for path, _, _ in item.differences[:3])
        more = f" +{len(item.differences) - 3}" if len(item.differences) > 3 else ""
        line.append(f"  (input differs at {paths}{more})", style="dim")
    error = item.recorded.error
    if error is not None and item.action == "substituted":
        line.append(
            f"  (recorded error {error.type}: {one_line(error.message, PREVIEW_CHARS)})",
            style="dim",
        )
    return line


def print_unused(console: SafeConsole, unused: list[Call], title: str) -> None:
    """``title: N`` and the first 20 of the recorded calls ``unused``, if any."""
    if not unused:
        return
    console.print(Text(f"{title}: {len(unused)}", style="yellow"))
    for call in unused[:20]:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"  #{call.seq} {call.label}", style="bold")
        line.append(f"  {one_line(call.input_json, PREVIEW_CHARS)}", style="dim")
        console.print(line)
    if len(unused) > 20:
        console.print(Text(f"  ... and {len(unused) - 20} more", style="dim"))


def print_outcome(console: SafeConsole, result: ReplayResult) -> None:
    """The divergence (if any), what the replayed run did, and what the recorded one did."""
    if result.divergence is not None:
        console.print(Text("divergence:", style="bold red"))
        for part in str(result.divergence).splitlines():
            console.print(Text(f"  {part}"))
    elif result.recording_end is not None and result.status == "interrupted":
        console.print(Text("end of the recording:", style="bold yellow"))
        console.print(Text(f"  {result.recording_end}"))
    console.print(Text.assemble("result: ", _outcome_text(result)))
    console.print(Text.assemble("recorded: ", _recorded_text(result.bundle)))


def _outcome_text(result: ReplayResult) -> Text:
    error, divergence = result.error, result.divergence
    end = result.recording_end
    if end is not None and result.status == "interrupted":
        return Text(f"interrupted: stopped at call {end.call_number}, past the recording")
    if divergence is not None and ended_by_divergence(error, divergence):
        # also when the run ended on an error the replay raised after the divergence (in
        # another thread): the divergence is the cause, named once
        number = getattr(divergence, "call_number", None)
        where = f" at call {number}" if number is not None else ""
        return Text(f"{result.status}: the replay raised {_error_name(divergence)}{where}", "red")
    if error is not None:
        return Text(
            f"{result.status}: {_error_name(error)}: {one_line(safe_str(error), PREVIEW_CHARS)}",
            style="red",
        )
    text = Text(
        f"{result.status}, returned {preview(_jsonable(result.return_value), PREVIEW_CHARS)}"
    )
    if result.has_output:
        text.append(f", output {preview(result.output, PREVIEW_CHARS)}")
    return text


def _recorded_text(recorded: Bundle) -> Text:
    failure = recorded.manifest.failure
    if recorded.status == "failed" and failure is not None:
        return Text(f"failed: {failure.type}: {one_line(failure.message or '', PREVIEW_CHARS)}")
    if recorded.has_output:
        return Text(f"{recorded.status}, output {preview(recorded.output, PREVIEW_CHARS)}")
    return Text(f"{recorded.status}, no output recorded")


def _verdict_text(result: ReplayResult, verdict: Verdict) -> Text:
    if verdict == "reproduced" and result.status == "interrupted":
        return Text(
            "reproduced: the replay matched the recording up to where the recorded run was "
            "interrupted (what it did after that was never recorded)",
            "bold green",
        )
    if verdict == "reproduced":
        what = "failure" if result.bundle.status == "failed" else "behaviour"
        return Text(f"reproduced: the replay matched the recording and its {what}", "bold green")
    if verdict == "diverged":
        return Text(
            "diverged: the replay left the recording (see the divergence above)", "bold red"
        )
    if verdict == "incomplete":
        unused = len(result.unused)
        return Text(
            f"behaviour changed: {pluralize(unused, 'recorded call')} {were(unused)} never "
            f"reached (the agent no longer makes {'it' if unused == 1 else 'them'})",
            "bold red",
        )
    return Text(
        "behaviour changed: every call matched, but the result differs from the recording",
        "bold red",
    )
