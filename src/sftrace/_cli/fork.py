"""``sftrace fork``: replay a recorded run up to a call, then let the agent run for real.

Exit codes: 0 the run was forked (it reached the fork point; the forked run's own
status, completed or failed, is printed); 1 the replay diverged before the fork point or
the run ended before reaching it; 2 bad input (unreadable bundle or override, a fork
point the recording does not have or that is never made, an unimportable entrypoint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson
from rich.text import Text

from sftrace._bundle.load import load_bundle
from sftrace._cli.main import EXIT_CHANGED, EXIT_OK, bad_input_policy
from sftrace._cli.options import (
    ENTRYPOINT_OPTION,
    JSON_OPTION,
    MATCH_OPTION,
    agent_stdout,
    parse_match_ignore_option,
    parse_tiers_option,
)
from sftrace._cli.output import SafeConsole, human_console
from sftrace._cli.replay import check_before_running
from sftrace._cli.replay_report import (
    print_matched,
    print_outcome,
    print_unused,
    replay_document,
)
from sftrace._errors import ConfigError
from sftrace._model.text import shorten
from sftrace._replay.fork import NO_OVERRIDE, ForkPlan, plan_fork, run_fork
from sftrace._replay.options import ReplayOptions
from sftrace._replay.run import ReplayResult


def register(group: click.Group) -> None:
    group.add_command(fork_command)


@click.command("fork")
@click.argument("bundle", type=click.Path(path_type=Path))
@ENTRYPOINT_OPTION
@click.option(
    "--at",
    "at",
    required=True,
    metavar="N|NAME#K",
    help="The fork point: call N (1-based, in recorded order, as `sftrace inspect` numbers "
    "them) or NAME#K, the K-th call of the tool or model NAME.",
)
@click.option(
    "--override",
    metavar="JSON|@FILE",
    help="Answer the fork point with this JSON value (a string needs its quotes: "
    "'\"no\"'), or with the JSON in FILE; for an SDK call, the response JSON as recorded. "
    "Without it the call at the fork point runs for real.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Write the forked run as a bundle at PATH.",
)
@click.option("--overwrite", is_flag=True, help="With -o, replace an existing bundle.")
@MATCH_OPTION
@click.option(
    "--tiers",
    metavar="TIER,...",
    help="Match tiers for the calls before the fork point (as for `sftrace replay`).",
)
@click.option(
    "--match-ignore",
    "match_ignore",
    multiple=True,
    metavar="NAME=PATH",
    help="In the relaxed tier, ignore this input path (as for `sftrace replay`); repeatable.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="List at most this many calls before and after the fork point each (0: all).",
)
@JSON_OPTION
def fork_command(
    bundle: Path,
    entrypoint: str,
    at: str,
    override: str | None,
    output: Path | None,
    overwrite: bool,
    match: str,
    tiers: str | None,
    match_ignore: tuple[str, ...],
    limit: int,
    as_json: bool,
) -> None:
    """Fork a recorded run at a call: the calls before it are answered from BUNDLE (in
    recorded order, or any order with --match unordered, for concurrent agents), the call
    itself is answered with --override (or runs for real), and every call after it runs
    for real (tool bodies run, LLM calls are made), whatever its replay policy."""
    with bad_input_policy():
        # Check everything we can before any agent code runs.
        recorded = load_bundle(bundle)
        options = ReplayOptions.build(
            save=output,
            overwrite=overwrite,
            match=match,
            tiers=parse_tiers_option(tiers),
            match_ignore=parse_match_ignore_option(match_ignore),
        )
        plan = plan_fork(recorded, at, parse_override(override))
        target = check_before_running(
            recorded, entrypoint, save=output, overwrite=overwrite, purpose="save the fork"
        )
        with agent_stdout(as_json):
            result = run_fork(recorded, target, options, plan)
    if as_json:
        document = replay_document(result, entrypoint=entrypoint, mode="frozen", match=match)
        document["fork"] = {
            "at": at,
            "step": plan.step,
            "overridden": plan.overridden,
            "override": None if plan.override_json is None else orjson.loads(plan.override_json),
            "fork_number": result.fork_number,
        }
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    else:
        _print_report(result, plan, entrypoint=entrypoint, limit=limit)
    forked = result.fork_number is not None and result.divergence is None
    raise click.exceptions.Exit(EXIT_OK if forked else EXIT_CHANGED)


def parse_override(text: str | None) -> Any:
    """``--override``: JSON text, or ``@FILE`` holding JSON; absent: no override."""
    if text is None:
        return NO_OVERRIDE
    where = "--override"
    if text.startswith("@"):
        path = Path(text[1:])
        where = f"--override file {str(path)!r}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the {where}: {exc}; pass @FILE naming a JSON file, or the JSON itself"
            ) from None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not JSON ({exc}): {shorten(text, 80)!r}; pass a JSON value, e.g. "
            f'--override \'{{"action": "escalate"}}\' (a string needs its quotes: \'"no"\'), '
            f"or @FILE.json"
        ) from None


def _print_report(result: ReplayResult, plan: ForkPlan, *, entrypoint: str, limit: int) -> None:
    console = human_console()
    recorded = result.bundle
    point = recorded.calls[plan.index]
    how = "answered with the override" if plan.overridden else "run for real"
    console.print(
        Text.assemble(
            "Forked ",
            (recorded.agent_name, "bold"),
            f" run {recorded.run_id} at call {plan.step} ({point.label}, {how}) with {entrypoint}",
        )
    )
    number = result.fork_number
    matched = result.matched
    before = [m for m in matched if number is None or m.number < number]
    at = [m for m in matched if m.number == number]
    after = [m for m in matched if number is not None and m.number > number]
    width = max((len(m.recorded.label) for m in matched), default=0)
    _section(console, "before the fork point (answered from the recording):", before, limit, width)
    _section(console, "at the fork point:", at, limit, width)
    _section(console, "after the fork point (run for real):", after, limit, width)
    print_unused(console, result.unused, "recorded calls not made")
    print_outcome(console, result)
    forked = number is not None and result.divergence is None
    if result.saved_path is not None:
        what = "the forked run" if forked else "the run (not forked)"
        console.print(f"saved {what}: {result.saved_path}")
    if not forked:
        console.print(Text("not forked: the run did not reach the fork point", "bold red"))
    else:
        console.print(Text(f"forked at call {plan.step}: {result.status}", "bold green"))


def _section(console: SafeConsole, title: str, matched: list[Any], limit: int, width: int) -> None:
    console.print(Text(title, style="bold"))
    if not matched:
        console.print(Text("  none", style="dim"))
    print_matched(console, matched, limit=limit, width=width)
