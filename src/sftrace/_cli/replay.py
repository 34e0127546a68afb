"""``sftrace replay``: re-run an agent's entrypoint against a recorded bundle.

Exit codes: 0 the replay matched the recording and reproduced its behaviour (the same
output, or the same failure); 1 it diverged, left recorded calls unused, or behaved
differently; 2 bad input (unreadable bundle, unimportable entrypoint, bad options).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from pathlib import Path
from typing import Any, Literal

import click
import orjson
from rich.text import Text

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._bundle.writer import check_bundle_target
from sftrace._cli.bundle import missing_content
from sftrace._cli.main import EXIT_CHANGED, EXIT_OK, bad_input_policy
from sftrace._cli.options import (
    ENTRYPOINT_OPTION,
    parse_match_ignore_option,
    parse_tiers_option,
)
from sftrace._cli.output import SafeConsole, human_console
from sftrace._cli.view import finish_page, html_option
from sftrace._errors import BundleError, ConfigError, SftraceError
from sftrace._model.calls import Call
from sftrace._model.jsondiff import MISSING
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._model.serialize import to_json
from sftrace._model.text import one_line, pluralize, preview, were
from sftrace._record.run import exception_type_name
from sftrace._replay.controller import MatchedCall
from sftrace._replay.options import ReplayOptions
from sftrace._replay.run import Entrypoint, ReplayResult, resolve_entrypoint, run_replay
from sftrace._view.render import render_replay

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


def register(group: click.Group) -> None:
    group.add_command(replay_command)


@click.command("replay")
@click.argument("bundle", type=click.Path(path_type=Path))
@ENTRYPOINT_OPTION
@click.option(
    "--mode",
    type=click.Choice([mode.value for mode in ReplayMode]),
    default=ReplayMode.FROZEN.value,
    show_default=True,
    help="frozen: answer every call from the recording; live: run LLM calls (and the tools "
    "named by --allow-live-tool) for real; hybrid: run only the --live-llm models for real.",
)
@click.option(
    "--live-llm",
    "live_llms",
    multiple=True,
    metavar="PROVIDER/MODEL",
    help="In hybrid mode, call this model for real (repeatable).",
)
@click.option(
    "--allow-live-tool",
    "allow_live_tools",
    multiple=True,
    metavar="NAME",
    help="In live mode, let this tool run for real (repeatable).",
)
@click.option(
    "--match",
    type=click.Choice([match.value for match in MatchMode]),
    default=MatchMode.STRICT.value,
    show_default=True,
    help="strict: the Nth call must match the Nth recorded call; unordered: any unused "
    "recorded call with the same kind, name and input.",
)
@click.option(
    "--tiers",
    metavar="TIER,...",
    help="Match tiers tried in order, from exact, normalized, relaxed (default "
    "exact,normalized, plus relaxed with --match-ignore); 'exact' turns tolerance off.",
)
@click.option(
    "--match-ignore",
    "match_ignore",
    multiple=True,
    metavar="NAME=PATH",
    help="In the relaxed tier, ignore this input path for the tool NAME, for LLM calls "
    "('llm' or PROVIDER/MODEL) or for every call ('*'); repeatable.",
)
@click.option(
    "--on-miss",
    "on_miss",
    type=click.Choice(["error", "live"]),
    default="error",
    show_default=True,
    help="live: a call no recorded call matches runs for real (LLM calls, or only the "
    "--live-llm models; tools only if named by --allow-live-tool, '*' for all) instead of "
    "diverging. With --save, the combined run is a refreshed bundle.",
)
@click.option(
    "--save",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Also write the replayed run as a bundle at PATH.",
)
@click.option("--overwrite", is_flag=True, help="With --save, replace an existing bundle.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="List at most this many matched calls (0: all). --json always lists every call.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON document (the agent's own prints go to stderr).",
)
@html_option("Also write the replay as a self-contained HTML page.")
def replay_command(
    bundle: Path,
    entrypoint: str,
    mode: str,
    live_llms: tuple[str, ...],
    allow_live_tools: tuple[str, ...],
    match: str,
    tiers: str | None,
    match_ignore: tuple[str, ...],
    on_miss: str,
    save: Path | None,
    overwrite: bool,
    limit: int,
    as_json: bool,
    html_path: Path | None,
) -> None:
    """Replay a recorded run: call the agent's entrypoint with every instrumented call
    answered from BUNDLE, and say whether the recorded behaviour came back."""
    with bad_input_policy():
        # Check everything we can before any agent code runs.
        recorded = load_bundle(bundle)
        options = ReplayOptions.build(
            mode=mode,
            live_llms=live_llms,
            allow_live_tools=allow_live_tools,
            match=match,
            save=save,
            overwrite=overwrite,
            tiers=parse_tiers_option(tiers),
            match_ignore=parse_match_ignore_option(match_ignore),
            on_miss=on_miss,
        )
        target = check_before_running(
            recorded, entrypoint, save=save, overwrite=overwrite, purpose="save the replay"
        )
        # With --json, stdout carries only the document: the agent's prints go to stderr.
        redirect = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
        with redirect:
            result = run_replay(recorded, target, options)
    verdict = replay_verdict(result)
    if as_json:
        document = replay_document(result, entrypoint=entrypoint, mode=mode, match=match)
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    else:
        _print_report(
            result, entrypoint=entrypoint, mode=mode, match=match, verdict=verdict, limit=limit
        )
    if html_path is not None:
        facts = {"entrypoint": entrypoint, "mode": mode, "match": match, "verdict": verdict}
        finish_page(html_path, render_replay(result, facts=facts), err=as_json)
    raise click.exceptions.Exit(EXIT_OK if verdict == "reproduced" else EXIT_CHANGED)


def check_before_running(
    recorded: Bundle, entrypoint: str, *, save: Path | None, overwrite: bool, purpose: str
) -> Entrypoint:
    """What can be checked before any agent code runs: the save target (``purpose``
    says what for), a bundle that lost content, the entrypoint and its arguments."""
    if save is not None:
        check_bundle_target(
            save, overwrite=overwrite, purpose=purpose, overwrite_hint="pass --overwrite"
        )
    missing = missing_content(recorded)
    if missing:
        raise BundleError(
            f"{str(recorded.path)!r} is incomplete ({missing[0]}); a replay would report the "
            f"calls the file lost as the agent's divergence. `sftrace validate` lists "
            f"every problem"
        )
    target = resolve_entrypoint(entrypoint)
    check_arguments(target, recorded, entrypoint)
    return target


def check_arguments(target: Any, recorded: Bundle, entrypoint: str) -> None:
    """``ConfigError`` unless ``target`` accepts what the replay passes: the recorded
    ``run_input`` as its one argument, or nothing when the run recorded no input."""
    arguments = (recorded.run_input,) if recorded.has_run_input else ()
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # no signature to check (some builtins): the call itself will tell
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        given = "the recorded run_input as its one argument" if arguments else "no argument"
        raise ConfigError(
            f"entrypoint {entrypoint!r} cannot be called with {given} ({exc}); the replay "
            f"calls it as the recorded run was started: make it take "
            f"{'one argument' if arguments else 'no required argument'}"
        ) from None


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
        "divergence": None if divergence is None else _divergence_document(divergence),
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
    return {"type": _error_name(error), "message": str(error)}


def _error_name(error: BaseException) -> str:
    """``ValueError``, ``pkg.mod.Error``; sftrace's own errors by their public name."""
    return exception_type_name(error)[0]


# --- text ---------------------------------------------------------------------------


def _print_report(
    result: ReplayResult, *, entrypoint: str, mode: str, match: str, verdict: Verdict, limit: int
) -> None:
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
    print_outcome(console, result)
    if result.saved_path is not None:
        console.print(f"saved the replayed run: {result.saved_path}")
    console.print(_verdict_text(result, verdict))


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
    console.print(Text.assemble("result: ", _outcome_text(result)))
    console.print(Text.assemble("recorded: ", _recorded_text(result.bundle)))


def _outcome_text(result: ReplayResult) -> Text:
    error, divergence = result.error, result.divergence
    if divergence is not None and error is divergence:
        number = getattr(divergence, "call_number", None)
        where = f" at call {number}" if number is not None else ""
        return Text(f"{result.status}: the replay raised {_error_name(divergence)}{where}", "red")
    if error is not None:
        return Text(
            f"{result.status}: {_error_name(error)}: {one_line(str(error), PREVIEW_CHARS)}",
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
            f"diverged: {pluralize(unused, 'recorded call')} {were(unused)} never reached",
            "bold red",
        )
    return Text(
        "behaviour changed: every call matched, but the result differs from the recording",
        "bold red",
    )
