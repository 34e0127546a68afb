"""``sftrace view``: write a run, or two runs compared, as one self-contained HTML page.

Exit codes: 0 the page was written; 2 bad input (unreadable bundle, unwritable page).
"""

from __future__ import annotations

import re
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from sftrace._bundle.load import load_bundle
from sftrace._cli.main import bad_input_policy
from sftrace._cli.output import echo
from sftrace._regress.suite import CaseResult
from sftrace._view.render import (
    render_case,
    render_comparison,
    render_index,
    render_run,
    write_html,
)

F = TypeVar("F", bound=Callable[..., Any])


def register(group: click.Group) -> None:
    group.add_command(view_command)


def html_option(help_text: str, *, directory: bool = False) -> Callable[[F], F]:
    """The ``--html`` option of ``diff``, ``replay`` and ``test``."""
    return click.option(
        "--html",
        "html_path",
        type=click.Path(path_type=Path, dir_okay=directory, file_okay=not directory),
        metavar="DIR" if directory else "FILE",
        help=help_text,
    )


def write_suite_pages(directory: Path, results: Sequence[CaseResult], *, err: bool) -> None:
    """One page per case and ``index.html`` linking them, in ``directory``."""
    entries: list[tuple[CaseResult, str]] = []
    with bad_input_policy():
        for number, result in enumerate(results, start=1):
            name = f"{number:03d}-{_slug(result.id)}.html"
            write_html(directory / name, render_case(result))
            entries.append((result, name))
        index = write_html(directory / "index.html", render_index("sftrace test", entries))
    echo(f"wrote {index} ({len(entries)} case pages)", err=err)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "case"


def default_page_path(bundle: Path, other: Path | None = None) -> Path:
    """``NAME.html`` next to the bundle; for two runs ``BASE-vs-NAME.html`` next to the
    candidate."""
    name = bundle.name.removesuffix(".sftrace") or bundle.name
    if other is None:
        return bundle.with_name(f"{name}.html")
    other_name = other.name.removesuffix(".sftrace") or other.name
    return other.with_name(f"{name}-vs-{other_name}.html")


def finish_page(path: Path, page: str, *, open_it: bool = False, err: bool = False) -> None:
    """Write the page, print its path (on stderr with ``err``, when stdout carries a JSON
    document), and open it in a browser when asked."""
    with bad_input_policy():
        written = write_html(path, page)
    echo(f"wrote {written}", err=err)
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
    help="The page to write (default: NAME.html next to BUNDLE; with CANDIDATE, "
    "BUNDLE-vs-CANDIDATE.html next to CANDIDATE).",
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
