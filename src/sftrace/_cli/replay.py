"""``sftrace replay``: re-run an agent's entrypoint against a recorded bundle.

Exit codes: 0 the replay matched the recording and reproduced its behaviour (the same
output, or the same failure); 1 it diverged, left recorded calls unused, or behaved
differently; 2 bad input (unreadable bundle, unimportable entrypoint, bad options).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import click
import orjson

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._bundle.writer import check_bundle_target
from sftrace._cli.bundle import missing_content
from sftrace._cli.main import EXIT_CHANGED, EXIT_OK, bad_input_policy
from sftrace._cli.options import (
    ALLOW_LIVE_TOOL_OPTION,
    ENTRYPOINT_OPTION,
    JSON_OPTION,
    LIVE_LLM_OPTION,
    MATCH_IGNORE_OPTION,
    MATCH_OPTION,
    ON_MISS_OPTION,
    TIERS_OPTION,
    agent_stdout,
    check_output_location,
    parse_match_ignore_option,
    parse_tiers_option,
)
from sftrace._cli.replay_report import print_report, replay_document, replay_verdict
from sftrace._cli.view import finish_page, html_option
from sftrace._errors import BundleError, ConfigError
from sftrace._model.policy import ReplayMode
from sftrace._replay.options import ReplayOptions
from sftrace._replay.run import Entrypoint, resolve_entrypoint, run_replay
from sftrace._view.render import render_replay


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
@LIVE_LLM_OPTION
@ALLOW_LIVE_TOOL_OPTION
@MATCH_OPTION
@TIERS_OPTION
@MATCH_IGNORE_OPTION
@ON_MISS_OPTION
@click.option(
    "--save",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Also write the replayed run as a bundle at PATH (with --on-miss live: a "
    "refreshed bundle that replays frozen); a replay that diverged is not saved.",
)
@click.option("--overwrite", is_flag=True, help="With --save, replace an existing bundle.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="List at most this many matched calls (0: all). --json always lists every call.",
)
@JSON_OPTION
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
        check_output_location(html_path, "--html")
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
        with agent_stdout(as_json):
            result = run_replay(recorded, target, options)
    verdict = replay_verdict(result)
    if as_json:
        document = replay_document(result, entrypoint=entrypoint, mode=mode, match=match)
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    else:
        print_report(
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
