"""``sftrace import --from phoenix``: runs stored in a Phoenix server, as bundles; and
the report every OTLP import prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sftrace._cli.main import EXIT_BAD_INPUT, EXIT_CHANGED, bad_input_policy
from sftrace._cli.output import echo
from sftrace._export.collector_import import ImportResult
from sftrace._export.phoenix_import import import_from_phoenix
from sftrace._model.text import pluralize

F = TypeVar("F", bound=Callable[..., Any])
# The options only --from phoenix takes, with the value each has when not given.
_PHOENIX_DEFAULTS: dict[str, Any] = {
    "url": None,
    "project": "default",
    "trace_ids": (),
    "status": "error",
    "since": None,
    "limit": 20,
    "api_key": None,
}


def phoenix_options(command: F) -> F:
    """The ``--from phoenix`` options of ``sftrace import``."""
    options = [
        click.option(
            "--url",
            metavar="URL",
            help="With --from phoenix: Phoenix's address, e.g. http://127.0.0.1:6006.",
        ),
        click.option(
            "--project",
            default="default",
            show_default=True,
            help="With --from phoenix: the project's name or id.",
        ),
        click.option(
            "--trace-id",
            "trace_ids",
            multiple=True,
            metavar="ID",
            help="With --from phoenix: import this trace (repeatable). Without it, the "
            "latest --limit runs with --status are imported.",
        ),
        click.option(
            "--status",
            type=click.Choice(("error", "ok", "any")),
            default="error",
            show_default=True,
            help="With --from phoenix: the status of the run span of the runs to import.",
        ),
        click.option(
            "--since",
            metavar="WHEN",
            help="With --from phoenix: only runs started since then: 24h, 30m, 7d, or an "
            "ISO 8601 time.",
        ),
        click.option(
            "--limit",
            type=int,
            default=20,
            show_default=True,
            help="With --from phoenix: import at most this many runs (the latest).",
        ),
        click.option(
            "--api-key",
            envvar="PHOENIX_API_KEY",
            show_envvar=True,
            help="With --from phoenix: Phoenix's API key (sent as a bearer token).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def reject_phoenix_options(source: str, given: dict[str, Any]) -> None:
    """Exit 2 when a --from phoenix option is given for another source."""
    for name, default in _PHOENIX_DEFAULTS.items():
        if name == "api_key":
            continue  # may come from the environment
        if given.get(name, default) != default:
            flag = "--trace-id" if name == "trace_ids" else f"--{name.replace('_', '-')}"
            echo(
                f"sftrace: error: {flag} only applies to --from phoenix (this import reads "
                f"{source} files)",
                err=True,
            )
            raise click.exceptions.Exit(EXIT_BAD_INPUT)


def import_phoenix(files: tuple[Path, ...], output: Path, overwrite: bool, **options: Any) -> None:
    """The ``import --from phoenix`` half of ``sftrace import``."""
    if files:
        echo(
            f"sftrace: error: sftrace import --from phoenix reads no FILES (got {files[0]}); "
            f"it reads the server given by --url",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    if not options.get("url"):
        echo(
            "sftrace: error: sftrace import --from phoenix needs --url, Phoenix's address "
            "(e.g. http://127.0.0.1:6006)",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    with bad_input_policy():
        result = import_from_phoenix(output=output, overwrite=overwrite, **options)
    for trace_id in result.missing_traces:
        echo(f"skipped trace {trace_id}: Phoenix holds no span of it", err=True)
    asked = (
        pluralize(len(options["trace_ids"]), "trace")
        if options["trace_ids"]
        else f"runs with status {options['status']}"
    )
    report_imported(result, f"Phoenix project {options['project']!r} ({asked})")
    if result.missing_traces:
        raise click.exceptions.Exit(EXIT_CHANGED)


def report_imported(result: ImportResult, searched: str) -> None:
    """Print each run imported or skipped and a summary; exit 2 when no run was found,
    1 when some were skipped."""
    for run in result.runs:
        if run.path is not None:
            echo(f"imported {run.path} (run {run.run_id}, {pluralize(run.spans, 'span')})")
        else:
            echo(f"skipped run {run.run_id} (trace {run.trace_id}): {run.problem}", err=True)
    summary = (
        f"{len(result.written)} bundle(s) written, {len(result.skipped)} run(s) skipped, "
        f"{result.other_traces} trace(s) without an sftrace run ignored, "
        f"{result.spans_read} span(s) read"
    )
    if not result.runs:
        echo(
            f"sftrace: error: no sftrace run found in {searched} ({summary}); the run span is "
            f"exported when the run ends: was the run finished and flushed?",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    echo(summary)
    if result.skipped:
        raise click.exceptions.Exit(EXIT_CHANGED)
