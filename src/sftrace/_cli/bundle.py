"""``sftrace inspect`` and ``sftrace validate``: look at a bundle, check a bundle."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.text import Text
from rich.tree import Tree

from sftrace._bundle.consistency import consistency_problems
from sftrace._bundle.format import MANIFEST_FILE
from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle, check_bundle
from sftrace._cli.main import EXIT_BAD_INPUT, EXIT_CHANGED, bad_input_policy
from sftrace._cli.output import echo, human_console
from sftrace._model.calls import Call
from sftrace._model.text import one_line, pluralize, preview

# How many calls the tree shows by default; --limit 0 shows all, --json always gives all.
DEFAULT_TREE_LIMIT = 500
PREVIEW_CHARS = 160

_STATUS_STYLES = {"completed": "bold green", "failed": "bold red", "interrupted": "bold yellow"}


def register(group: click.Group) -> None:
    group.add_command(inspect_command)
    group.add_command(validate_command)


# --- inspect ------------------------------------------------------------------------


@click.command("inspect")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of a tree.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=DEFAULT_TREE_LIMIT,
    show_default=True,
    help="Show at most this many calls in the tree (0: all). --json always lists every call.",
)
def inspect_command(bundle: Path, as_json: bool, limit: int) -> None:
    """Show a recorded run: its status, totals, and every call nested under its parent."""
    with bad_input_policy():
        # --json copies each call's input and output text as JSON: check them all first.
        loaded = load_bundle(bundle, eager=as_json)
    parents = call_parents(loaded)
    missing = missing_content(loaded)
    if as_json:
        _echo_document(loaded, parents)
        _exit_if_incomplete(bundle, missing)
        return
    # Header lines wrap at the terminal; tree lines are cut to its width.
    console = human_console()
    for line in _header(loaded):
        console.print(line)
    console.print(_tree(loaded, parents, limit))
    shown = len(loaded.calls) if limit == 0 else min(limit, len(loaded.calls))
    if shown < len(loaded.calls):
        console.print(
            Text(
                f"... {pluralize(len(loaded.calls) - shown, 'more call')} not shown "
                f"(of {len(loaded.calls)}); "
                f"use --limit 0 to show all, or --json",
                style="dim",
            )
        )
    _exit_if_incomplete(bundle, missing)


def missing_content(bundle: Bundle) -> list[str]:
    """Why a bundle that loads is not whole (its spans file cut at a line boundary loses
    calls but still parses): where its manifest's totals and run disagree with the spans."""
    if bundle.path is None:
        return []
    return consistency_problems(
        bundle.manifest,
        str(bundle.path / MANIFEST_FILE),
        span_count=len(bundle.spans),
        calls=bundle.calls,
        run_span=bundle.run_span,
    )


def _exit_if_incomplete(path: Path, missing: list[str]) -> None:
    if missing:
        echo(
            f"sftrace: {str(path)!r} is incomplete ({missing[0]}): what is shown is not the "
            f"whole run; `sftrace validate` lists every problem",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_CHANGED)


def call_parents(bundle: Bundle) -> dict[int, int | None]:
    """Each call's parent call (by seq), or None when the run itself is its parent.

    A call nested in a non-boundary span (say, the application's own span inside a tool)
    belongs to the nearest call above it. Spans come parents first, so one pass suffices.
    """
    by_span_id = {call.span_id: call for call in bundle.calls}
    nearest: dict[str, int | None] = {}  # span id -> seq of the nearest call at or above it
    parents: dict[int, int | None] = {}
    for span in bundle.spans:
        span_id = span["spanId"]
        parent_id = span.get("parentSpanId") or None
        above = nearest.get(parent_id) if parent_id is not None else None
        call = by_span_id.get(span_id)
        if call is None:
            nearest[span_id] = above
        else:
            nearest[span_id] = call.seq
            parents[call.seq] = above
    return parents


def _echo_document(bundle: Bundle, parents: dict[int, int | None]) -> None:
    """Write the JSON form of ``inspect`` a call at a time: the whole document of a large
    bundle is never held in memory (each call's recorded JSON is copied, not parsed)."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    head = orjson.dumps(inspect_document(bundle), option=orjson.OPT_INDENT_2)
    out.write(head[: -len(b"\n}")] + b',\n  "calls": [')
    for index, call in enumerate(bundle.calls):
        text = orjson.dumps(_call_document(call, parents.get(call.seq)), option=orjson.OPT_INDENT_2)
        out.write((b",\n    " if index else b"\n    ") + text.replace(b"\n", b"\n    "))
    out.write(b"\n  ]\n}\n")
    out.flush()


def inspect_document(bundle: Bundle) -> dict[str, Any]:
    """The JSON form of ``inspect`` without its calls (see ``_echo_document``): keys in
    a fixed order."""
    return {
        "path": str(bundle.path) if bundle.path is not None else None,
        "manifest": bundle.manifest.to_json(),
        "run_input": bundle.run_input,
        "has_run_input": bundle.has_run_input,
        "metadata": bundle.metadata,
        "output": bundle.output,
        "has_output": bundle.has_output,
        "state_changes": [
            {"key": change.key, "before": change.before, "after": change.after}
            for change in bundle.state_changes
        ],
    }


def _call_document(call: Call, parent: int | None) -> dict[str, Any]:
    error = call.error
    return {
        "seq": call.seq,
        "kind": call.kind,
        "name": call.name,
        "provider": call.provider,
        "policy": call.policy,
        "parent": parent,
        "input": orjson.Fragment(call.input_json),
        "output": None if call.output_json is None else orjson.Fragment(call.output_json),
        "error": None if error is None else {"type": error.type, "message": error.message},
        "duration_ms": round(call.duration_ms, 3),
        "span_id": call.span_id,
        "parent_span_id": call.parent_span_id,
    }


def _header(bundle: Bundle) -> list[Text]:
    manifest, totals = bundle.manifest, bundle.manifest.totals
    title = Text.assemble(
        (manifest.agent_name, "bold"),
        "  run ",
        manifest.run_id,
        "  ",
        (manifest.status, _STATUS_STYLES.get(manifest.status, "bold")),
    )
    lines = [title]
    failure = manifest.failure
    if failure is not None and (failure.type or failure.message):
        step = f" (at call #{failure.step})" if failure.step is not None else ""
        lines.append(
            Text.assemble(
                "  failure: ",
                (
                    f"{failure.type or '?'}"
                    + (f": {one_line(failure.message, PREVIEW_CHARS)}" if failure.message else ""),
                    "red",
                ),
                step,
            )
        )
    tokens = (
        f", {totals.total_tokens} tokens ({totals.input_tokens} in, {totals.output_tokens} out)"
        if totals.total_tokens or totals.input_tokens or totals.output_tokens
        else ""
    )
    cost = f", ${totals.cost_usd:.4f}" if totals.cost_usd else ""
    lines.append(
        Text(
            f"  {pluralize(len(bundle.calls), 'call')} ({totals.tool_calls} tool, "
            f"{totals.llm_calls} llm), {pluralize(totals.spans, 'span')}{tokens}{cost}, "
            f"{totals.duration_ms:.1f} ms"
        )
    )
    if bundle.has_run_input:
        lines.append(_preview_line("  input: ", bundle.run_input))
    metadata = bundle.metadata
    if metadata is not None:
        lines.append(_preview_line("  metadata: ", metadata))
    if bundle.has_output:
        lines.append(_preview_line("  output: ", bundle.output))
    if bundle.state_changes:
        lines.append(Text(f"  {pluralize(len(bundle.state_changes), 'state change')}"))
    for note in manifest.notes:  # what a recovered run lost, and the like
        lines.append(Text(f"  note: {one_line(note, 2 * PREVIEW_CHARS)}", style="yellow"))
    derived = manifest.derived_from
    if derived:
        how = derived.get("how")
        step = f" at step {derived['step']}" if derived.get("step") is not None else ""
        lines.append(Text(f"  derived from run {derived.get('run_id')} ({how}{step})"))
    return lines


def _tree(bundle: Bundle, parents: dict[int, int | None], limit: int) -> Tree:
    run_name = bundle.run_span.get("name") or f"invoke_agent {bundle.agent_name}"
    root = Tree(Text(str(run_name), style="bold"), guide_style="dim")
    nodes: dict[int, Tree] = {}
    calls = bundle.calls if limit == 0 else bundle.calls[:limit]
    for call in calls:
        parent = parents.get(call.seq)
        # A parent is reached before its children, so it has a lower seq and is shown
        # whenever the child is; fall back to the run if a damaged file says otherwise.
        under = nodes.get(parent, root) if parent is not None else root
        nodes[call.seq] = under.add(_call_label(call))
    return root


def _call_label(call: Call) -> Text:
    """``#seq kind name  duration``, then one line each for the input, the output and the
    error, each cut to one line (the full values are in ``--json``)."""
    label = Text(no_wrap=True, overflow="ellipsis")
    label.append(f"#{call.seq} ", style="bold")
    label.append(call.kind, style="magenta" if call.kind == "llm" else "cyan")
    label.append(" ")
    label.append(f"{call.provider}/{call.name}" if call.provider else call.name, style="bold")
    label.append(f"  {_duration(call.duration_ms)}", style="dim")
    if call.policy != "frozen":
        label.append(f"  policy {call.policy}", style="yellow")
    label.append(f"\nin  {one_line(call.input_json, PREVIEW_CHARS)}", style="dim")
    # A call may have both: a stream that raised after some chunks (its output holds them).
    if call.output_json is not None:
        label.append(f"\nout {one_line(call.output_json, PREVIEW_CHARS)}", style="dim")
    if call.error is not None:
        label.append(
            f"\nerror {call.error.type}: {one_line(call.error.message, PREVIEW_CHARS)}", style="red"
        )
    return label


def _duration(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.0f} ms"


def _preview_line(prefix: str, value: Any) -> Text:
    text = preview(value, PREVIEW_CHARS)
    return Text.assemble(prefix, (text, "dim"), no_wrap=True, overflow="ellipsis")


# --- validate -----------------------------------------------------------------------


@click.command("validate")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--verify-integrity/--no-verify-integrity",
    default=True,
    show_default=True,
    help="Check every file against the SHA-256 digests in checksums.sha256, and every "
    "call's input and output against theirs (the default); --no-verify-integrity checks "
    "the structure only.",
)
def validate_command(bundles: tuple[Path, ...], verify_integrity: bool) -> None:
    """Check bundles (``sftrace validate runs/*.sftrace``). Exit 0 all valid, 1 one is
    invalid (one problem per line), 2 one is unreadable."""
    invalid = unreadable = False
    for bundle in bundles:
        try:
            invalid |= not _validate_one(bundle, verify_integrity)
        except click.exceptions.Exit:  # unreadable: its one line is written, go on
            if len(bundles) == 1:
                raise
            unreadable = True
    if unreadable:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    if invalid:
        raise click.exceptions.Exit(EXIT_CHANGED)


def _validate_one(bundle: Path, verify_integrity: bool) -> bool:
    """Check one bundle and say so; whether it is valid (unreadable: exit 2, one line)."""
    with bad_input_policy():
        loaded, problems = check_bundle(bundle, verify_integrity=verify_integrity)
    if problems:
        for problem in problems:
            echo(one_line(problem))
        found = pluralize(len(problems), "problem")
        echo(f"sftrace: {str(bundle)!r} is invalid ({found})", err=True)
        return False
    assert loaded is not None  # no problems means it loaded
    totals = loaded.manifest.totals
    checked = "digests verified" if verify_integrity else "digests not checked"
    echo(
        f"valid: {bundle}: {loaded.manifest.status} run of {loaded.agent_name!r}, "
        f"{pluralize(len(loaded.calls), 'call')} ({totals.tool_calls} tool, "
        f"{totals.llm_calls} llm), {pluralize(len(loaded.spans), 'span')}; {checked}"
    )
    return True
