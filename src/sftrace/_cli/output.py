"""Human-readable output of the CLI: every printer escapes what it did not write itself.

Bundles are untrusted input: an agent name, a tool name or an error message may hold
terminal escape sequences (``\\x1b[2J`` clears the screen, OSC 8 makes links, a carriage
return overwrites what was printed) or bidirectional overrides that reorder text. Human
output goes through :func:`echo` (plain lines) or a :func:`human_console` (rich), which write
such characters as visible escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay. JSON
output (``--json``) is escaped by JSON itself and does not come through here.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from sftrace._model.text import printable

__all__ = ["SafeConsole", "echo", "human_console"]


def echo(message: Any = "", *, err: bool = False) -> None:
    """``click.echo`` of one human-readable line (or several), escaped."""
    click.echo(printable(str(message)), err=err)


def _safe(renderable: Any, console: Console) -> Any:
    if isinstance(renderable, str):
        return Text(printable(renderable))
    if isinstance(renderable, Text):
        segments = renderable.render(console)
        return Text.assemble(
            *((printable(segment.text), segment.style or "") for segment in segments),
            no_wrap=renderable.no_wrap,
            overflow=renderable.overflow,
            end=renderable.end,
        )
    if isinstance(renderable, Tree):
        renderable.label = _safe(renderable.label, console)
        renderable.children = [_safe(child, console) for child in renderable.children]
    return renderable


class SafeConsole(Console):
    """A rich ``Console`` that escapes every string and ``Text`` (also in a ``Tree``) it
    prints, and never reads markup from them (a recorded ``[red]`` stays as it is)."""

    def print(self, *objects: Any, **options: Any) -> None:
        options.setdefault("markup", False)
        super().print(*(_safe(item, self) for item in objects), **options)

    def on_broken_pipe(self) -> None:
        """The output's reader went away (``sftrace inspect B | head``): the command's
        handler ends it quietly, with the exit status every command gives then (rich's
        own exits 1, which means "invalid or diverged" here)."""
        self.quiet = True
        raise BrokenPipeError


def human_console(*, stderr: bool = False) -> SafeConsole:
    """The console for human output: no highlighting, long lines wrap at the terminal."""
    return SafeConsole(stderr=stderr, highlight=False, soft_wrap=True)
