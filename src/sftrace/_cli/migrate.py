"""``sftrace import --from stepfork|agenttrace`` and ``sftrace migrate-suite``: coming
from the peers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from sftrace._cli.main import EXIT_BAD_INPUT, EXIT_CHANGED, bad_input_policy
from sftrace._cli.output import echo
from sftrace._regress.migrate_suite import migrate_suite
from sftrace._regress.peers import import_peer_runs

PEER_SOURCES = ("stepfork", "agenttrace")


def register(group: click.Group) -> None:
    group.add_command(migrate_suite_command)


def _display(path: Path) -> str:
    """``path`` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def case_snippet(name: str, bundle: Path) -> str:
    """The ``[[cases]]`` entry of a suite for one bundle."""
    return "\n".join(
        [
            "[[cases]]",
            f"name = {json.dumps(name, ensure_ascii=False)}",
            f"bundle = {json.dumps(_display(bundle), ensure_ascii=False)}",
        ]
    )


def import_peers(source: str, files: tuple[Path, ...], output: Path, overwrite: bool) -> None:
    """The ``import --from stepfork|agenttrace`` half of ``sftrace import``."""
    with bad_input_policy():
        result = import_peer_runs(files, source=source, output=output, overwrite=overwrite)
    snippets = []
    for run, file in zip(result.runs, files, strict=True):
        if run.path is not None:
            echo(f"imported {run.path} (run {run.run_id}, {run.spans} spans)")
            snippets.append(case_snippet(Path(file).stem, run.path))
        else:
            echo(f"skipped {file} (run {run.run_id}): {run.problem}", err=True)
    echo(
        f"{len(result.written)} bundle(s) written, {len(result.skipped)} run(s) skipped "
        f"from {len(files)} {source} recording(s)"
    )
    if snippets:
        echo(
            "\nAdd them to a suite (*.sftrace-suite.toml; bundle paths are relative to the "
            "suite file, adjust them if it is elsewhere):\n"
        )
        echo("\n\n".join(snippets))
    if not result.written:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    if result.skipped:
        raise click.exceptions.Exit(EXIT_CHANGED)


@click.command("migrate-suite")
@click.argument("suite", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The sftrace suite to write (name it *.sftrace-suite.toml for pytest); its "
    "bundles go to a bundles/ folder beside it.",
)
@click.option("--overwrite", is_flag=True, help="Replace the suite and bundles if they exist.")
def migrate_suite_command(suite: Path, output: Path, overwrite: bool) -> None:
    """Convert an agenttrace-vcr suite (and its recordings) into an sftrace suite.

    Run it from the directory agenttrace-vcr ran the suite from (its `agent` is imported
    from there). Exit status: 0 when written, 2 when the suite or a recording cannot
    be converted (nothing is written then).
    """
    with bad_input_policy():
        migrated = migrate_suite(suite, output, overwrite=overwrite)
    for note in migrated.notes:
        echo(f"note: {note}", err=True)
    for bundle in migrated.bundles:
        echo(f"converted {_display(bundle)}")
    echo(f"wrote {_display(migrated.path)} ({len(migrated.bundles)} case(s))")
    if not migrated.path.name.endswith(".sftrace-suite.toml"):
        echo(
            "note: pytest collects only files named *.sftrace-suite.toml; `sftrace test "
            f"{os.fspath(migrated.path)}` runs this one",
            err=True,
        )
