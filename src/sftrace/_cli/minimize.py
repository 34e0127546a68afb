"""``sftrace minimize``: shrink a failing run's recorded outputs to what the failure needs.

Exit codes: 0 the minimized bundle is written and a strict frozen replay of it reproduces
the failure; 1 it is written but that replay did not reproduce it (an agent that is not
deterministic); 2 bad input (unreadable bundle, unimportable entrypoint, a run that did
not fail and no expectations, a failure the replay does not bring back).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

import click
from rich.text import Text

from sftrace._bundle.load import load_bundle
from sftrace._cli.main import EXIT_CHANGED, EXIT_OK, bad_input_policy
from sftrace._cli.options import ENTRYPOINT_OPTION, expectation_file_options
from sftrace._cli.output import echo, human_console
from sftrace._cli.replay import check_before_running
from sftrace._model.text import byte_size, pluralize
from sftrace._regress.minimize import MinimizeProgress, MinimizeResult, minimize

BAR_WIDTH = 30


def register(group: click.Group) -> None:
    group.add_command(minimize_command)


@click.command("minimize")
@click.argument("bundle", type=click.Path(path_type=Path))
@ENTRYPOINT_OPTION
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write the minimized bundle.",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing bundle at PATH.")
@expectation_file_options(
    output_help="A JSON file holding the corrected output: the failure to keep is that the run "
    "does not produce it (for a run that completed with the wrong behaviour).",
    trajectory_help="A JSON or TOML expectations document (as for sftrace export); the same "
    "expectations must stay unmet.",
)
@click.option(
    "--keep-passing",
    metavar="MODULE:FUNCTION",
    help="The fixed agent's entrypoint: keep only shrinks on which it still passes, so the "
    "minimized bundle holds what the fix reads and can carry the fix's regression test.",
)
@click.option(
    "--max-replays",
    type=int,
    default=500,
    show_default=True,
    help="Run the agent at most this many times in all.",
)
def minimize_command(
    bundle: Path,
    entrypoint: str,
    output: Path,
    overwrite: bool,
    expect_output: Path | None,
    expect_trajectory: Path | None,
    max_replays: int,
    keep_passing: str | None,
) -> None:
    """Shrink the recorded outputs of BUNDLE (list items, object members, string
    lengths) while a frozen replay against the entrypoint still reproduces the recorded
    failure, and write the smallest run found as a new bundle."""
    bar = ProgressBar(sys.stderr)
    with bad_input_policy():
        recorded = load_bundle(bundle)
        target = check_before_running(
            recorded,
            entrypoint,
            save=output,
            overwrite=overwrite,
            purpose="write the minimized bundle",
        )
        try:
            result = minimize(
                recorded,
                target,
                output=output,
                overwrite=overwrite,
                expect_output=expect_output,
                expect_trajectory=expect_trajectory,
                max_replays=max_replays,
                progress=bar,
                keep_passing=keep_passing,
            )
        except BaseException:
            bar.finish(done=False)
            raise
        bar.finish(done=True)
    _print_report(result)
    if keep_passing is None:
        echo(
            "tip: the minimized run keeps only what the buggy agent reads; --keep-passing "
            "MODULE:FUNCTION (the fixed agent) keeps what the fix reads too, so its test "
            "can replay this bundle",
            err=True,
        )
    raise click.exceptions.Exit(EXIT_OK if result.verified else EXIT_CHANGED)


class ProgressBar:
    """The progress of a minimization on ``stream``: a bar redrawn in place when it is a
    terminal, else one plain line at the end."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last: MinimizeProgress | None = None

    def __call__(self, progress: MinimizeProgress) -> None:
        self.last = progress
        if self.tty:
            self.stream.write("\r" + self.line(progress, bar=True))
            self.stream.flush()

    def line(self, progress: MinimizeProgress, *, bar: bool) -> str:
        done = BAR_WIDTH * progress.replays // max(progress.max_replays, 1)
        drawn = f"[{'#' * done}{'.' * (BAR_WIDTH - done)}] " if bar else ""
        return (
            f"minimize: {drawn}{progress.replays}/{progress.max_replays} replays, call "
            f"outputs {byte_size(progress.output_bytes_before)} -> "
            f"{byte_size(progress.output_bytes)}"
        )

    def finish(self, *, done: bool) -> None:
        """End the bar's line; when not on a terminal and ``done``, write the plain line."""
        if self.last is None:
            return
        if self.tty:
            self.stream.write("\n")
        elif done:
            self.stream.write(self.line(self.last, bar=False) + "\n")
        self.stream.flush()


def _print_report(result: MinimizeResult) -> None:
    console = human_console()
    original = result.bundle.manifest.derived_from or {}
    console.print(
        Text(
            f"Minimized run {original.get('run_id')}, reproducing {result.reproduces}, in "
            f"{pluralize(result.replays, 'replay')} (max {result.max_replays})"
        )
    )
    width = max((len(label) for label, _, _ in result.sizes), default=0)
    for call, (label, before, after) in zip(result.bundle.calls, result.sizes, strict=False):
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"  {label.ljust(width)}", style="bold")
        if call.error is not None:
            line.append(f"  recorded error {call.error.type}, kept", style="dim")
        else:
            line.append(f"  {byte_size(before)} -> {byte_size(after)}")
        console.print(line)
    console.print(
        Text(
            f"calls {result.calls_before} -> {result.calls_after}, recorded call outputs "
            f"{byte_size(result.output_bytes_before)} -> {byte_size(result.output_bytes_after)}"
        )
    )
    if not result.complete:
        console.print(
            Text(
                f"stopped after --max-replays {result.max_replays}: smaller, maybe not "
                f"minimal; a larger --max-replays shrinks further",
                style="yellow",
            )
        )
    echo(f"wrote {result.path}")
    if result.fixed_passes is False:
        console.print(Text("but the fixed agent (--keep-passing) does not pass on it", "bold red"))
    elif result.verified and result.fixed_passes:
        console.print(
            Text(
                "a strict frozen replay of it reproduces the failure, and the fixed agent "
                "passes on it",
                "bold green",
            )
        )
    elif result.verified:
        console.print(Text("a strict frozen replay of it reproduces the failure", "bold green"))
    if not result.verified and result.fixed_passes is not False:
        console.print(
            Text(
                "but a strict frozen replay of it did not reproduce the failure: does the "
                "agent behave the same on every run?",
                "bold red",
            )
        )
