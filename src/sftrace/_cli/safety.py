"""``sftrace recover``: turn what a crashed run left into a valid bundle."""

from __future__ import annotations

from pathlib import Path

import click

from sftrace._bundle.format import MANIFEST_FILE
from sftrace._bundle.load import load_bundle
from sftrace._bundle.partial import is_partial, unfinished_recordings
from sftrace._bundle.recover import recover_bundle
from sftrace._cli.main import EXIT_BAD_INPUT, bad_input_policy
from sftrace._cli.output import echo
from sftrace._errors import BundleError
from sftrace._model.text import one_line, pluralize


def register(group: click.Group) -> None:
    group.add_command(recover_command)


@click.command("recover")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Where to write the bundle. Default: the path the run was recording to.",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing bundle at that path.")
def recover_command(path: Path, output: Path | None, overwrite: bool) -> None:
    """Recover a run whose process died (SIGKILL, out of memory, power cut).

    PATH is the hidden `.<name>.<run_id>.partial` directory the run left, the bundle
    path it was recording to, or a directory of bundles (every unfinished recording in
    it is recovered). The bundle gets status `interrupted`, every call that had finished,
    and notes saying what was lost.
    """
    with bad_input_policy():
        if path.is_dir() and not is_partial(path) and not (path / MANIFEST_FILE).exists():
            targets = unfinished_recordings(path)
            if not targets:
                raise BundleError(
                    f"no unfinished recording in {str(path)!r}: nothing to recover",
                    path=str(path),
                )
            if output is not None and len(targets) > 1:
                raise BundleError(
                    f"{str(path)!r} holds {len(targets)} unfinished recordings; --output "
                    f"needs one: pass its .partial directory"
                )
        else:
            targets = [path]
    failed = 0
    for target in targets:
        try:
            written = recover_bundle(target, output=output, overwrite=overwrite)
            bundle = load_bundle(written)
        except (BundleError, OSError) as exc:
            if len(targets) == 1:
                with bad_input_policy():
                    raise
            failed += 1
            echo(f"sftrace: error: {one_line(str(exc))}", err=True)
            continue
        calls = pluralize(len(bundle.calls), "call")
        echo(f"recovered {written}: status {bundle.status}, {calls}")
        for note in bundle.manifest.notes:
            echo(f"  - {note}")
    if failed:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
