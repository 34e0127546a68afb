"""``sftrace view``: write a run, or two runs compared, as one self-contained HTML page.

Exit codes: 0 the page was written; 2 bad input (unreadable bundle, unwritable page).
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from sftrace._bundle.load import load_bundle
from sftrace._cli.main import bad_input_policy
from sftrace._view.render import render_comparison, render_run, write_html


def register(group: click.Group) -> None:
    group.add_command(view_command)


def default_page_path(bundle: Path, other: Path | None = None) -> Path:
    """``NAME.html`` next to the bundle; for two runs ``BASE-vs-NAME.html`` next to the
    candidate."""
    name = bundle.name.removesuffix(".sftrace") or bundle.name
    if other is None:
        return bundle.with_name(f"{name}.html")
    other_name = other.name.removesuffix(".sftrace") or other.name
    return other.with_name(f"{name}-vs-{other_name}.html")


def finish_page(path: Path, page: str, *, open_it: bool = False) -> None:
    """Write the page, print its path, and open it in a browser when asked."""
    with bad_input_policy():
        written = write_html(path, page)
    click.echo(f"wrote {written}")
    if open_it:
        webbrowser.open(written.resolve().as_uri())


@click.command("view")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.argument("candidate", required=False, type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="The page to write (default: NAME.html next to the bundle).",
)
@click.option("--open", "open_it", is_flag=True, help="Open the page in a web browser.")
def view_command(bundle: Path, candidate: Path | None, output: Path | None, open_it: bool) -> None:
    """Write a recorded run (BUNDLE) as a self-contained HTML page: its header, a
    timeline of its spans, and each call's input, output, error and redactions.

    With a second bundle (CANDIDATE), the page compares the two runs as `sftrace diff`
    does: calls side by side, findings highlighted at their JSON paths.
    """
    with bad_input_policy():
        if candidate is None:
            page = render_run(load_bundle(bundle))
        else:
            page = render_comparison(bundle, candidate)
    target = output if output is not None else default_page_path(bundle, candidate)
    finish_page(target, page, open_it=open_it)
