"""Command-line options that several commands share, each written once."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from sftrace._errors import ConfigError
from sftrace._model.policy import MatchMode

F = TypeVar("F", bound=Callable[..., object])

# The agent's entrypoint, as replay, fork and minimize take it.
ENTRYPOINT_OPTION = click.option(
    "--entrypoint",
    "-e",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The agent's entrypoint, importable from the working directory.",
)


# --json of the commands that run the agent (replay, fork): see agent_stdout().
JSON_OPTION = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON document (the agent's own prints go to stderr).",
)


def agent_stdout(as_json: bool) -> contextlib.AbstractContextManager[object]:
    """Where the agent's prints go while it runs: with ``--json`` stdout carries only the
    document, so they go to stderr; else they stay on stdout."""
    return contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()


# How reached calls are paired with recorded ones, as replay and export take it.
MATCH_OPTION = click.option(
    "--match",
    type=click.Choice([match.value for match in MatchMode]),
    default=MatchMode.STRICT.value,
    show_default=True,
    help="strict: the Nth call must match the Nth recorded call, except that calls the "
    "recording shows were concurrent may come in any order; unordered: any unused "
    "recorded call with the same kind, name and input (any order).",
)


# What a replay may run for real, and how tolerant its matching is: replay and export.
LIVE_LLM_OPTION = click.option(
    "--live-llm",
    "live_llms",
    multiple=True,
    metavar="PROVIDER/MODEL",
    help="Call this model for real: in hybrid mode, and with --on-miss live the only "
    "models that may run (repeatable).",
)
ALLOW_LIVE_TOOL_OPTION = click.option(
    "--allow-live-tool",
    "allow_live_tools",
    multiple=True,
    metavar="NAME",
    help="Let this tool run for real: in live mode, and with --on-miss live; '*' for all "
    "(repeatable).",
)
TIERS_OPTION = click.option(
    "--tiers",
    metavar="TIER,...",
    help="Match tiers tried in order, from exact, normalized, relaxed (default "
    "exact,normalized, plus relaxed with --match-ignore); 'exact' turns tolerance off.",
)
MATCH_IGNORE_OPTION = click.option(
    "--match-ignore",
    "match_ignore",
    multiple=True,
    metavar="NAME=PATH",
    help="In the relaxed tier, ignore this input path for the tool NAME, for LLM calls "
    "('llm' or PROVIDER/MODEL) or for every call ('*'); repeatable.",
)
ON_MISS_OPTION = click.option(
    "--on-miss",
    "on_miss",
    type=click.Choice(["error", "live"]),
    default="error",
    show_default=True,
    help="live: a call no recorded call matches runs for real (LLM calls, or only the "
    "--live-llm models; tools only if named by --allow-live-tool, '*' for all) instead of "
    "diverging.",
)


def expectation_file_options(*, output_help: str, trajectory_help: str) -> Callable[[F], F]:
    """``--expect-output FILE`` and ``--expect-trajectory FILE`` (the files
    ``expectations_from_files`` reads), with what each means to the command."""
    expect_output = click.option(
        "--expect-output",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE",
        help=output_help,
    )
    expect_trajectory = click.option(
        "--expect-trajectory",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE",
        help=trajectory_help,
    )

    def decorate(command: F) -> F:
        return expect_output(expect_trajectory(command))

    return decorate


def parse_tiers_option(text: str | None) -> list[str] | None:
    """``--tiers exact,normalized`` as a list (checked by ``ReplayOptions.build``)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_match_ignore_option(items: tuple[str, ...]) -> dict[str, list[str]] | None:
    """``--match-ignore NAME=PATH`` options as the ``match_ignore`` mapping."""
    if not items:
        return None
    ignore: dict[str, list[str]] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(
                f"--match-ignore takes NAME=PATH (a tool name, 'llm', 'provider/model' or "
                f"'*', then a JSON path), got {item!r}; e.g. --match-ignore 'llm=$.messages'"
            )
        ignore.setdefault(name.strip(), []).append(path.strip())
    return ignore


def check_output_location(path: Path | None, option: str, *, directory: bool = False) -> None:
    """Before any agent runs: ``path`` (a report file, or with ``directory`` a directory
    of them) can be written, else ``ConfigError`` naming ``option`` (a suite must not run
    to the end only to fail writing its report)."""
    if path is None:
        return
    folder = path if directory else path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"{option} {str(path)!r}: cannot create {str(folder)!r} "
            f"({type(exc).__name__}: {exc.strerror or exc}); give a writable location"
        ) from None
    if not os.access(folder, os.W_OK) or (path.exists() and path.is_dir() != directory):
        raise ConfigError(
            f"{option} {str(path)!r}: cannot write there; give a writable "
            f"{'directory' if directory else 'file path'}"
        )
