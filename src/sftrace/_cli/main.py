"""The ``sftrace`` command line. Loaded only when the command runs (click, rich).

Every command lives in a ``_cli/<area>.py`` module exposing ``register(group)``; this
module owns the group, ``--debug`` and the error policy: bad input prints one line on
stderr and exits 2 (``--debug`` shows the traceback), never a bare traceback; so does any
unexpected exception of a command, naming the command and the exception's type.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import click

from sftrace._cli.output import echo
from sftrace._errors import SftraceError
from sftrace._model.text import one_line
from sftrace._version import __version__

# Modules that add commands to the group, in help order.
_COMMAND_MODULES: tuple[str, ...] = (
    "bundle",
    "replay",
    "fork",
    "minimize",
    "regress",
    "view",
    "otlp",
    "migrate",
    "safety",
)

EXIT_OK = 0
EXIT_CHANGED = 1  # invalid bundle, divergence, behaviour changed, a failing case
EXIT_BAD_INPUT = 2
# The reader of the output went away (a pipe into head): what SIGPIPE would give.
EXIT_BROKEN_PIPE = 141


class CliState:
    """Options of the group, shared with subcommands through click's context."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug


# click's own exceptions (Exit and Abort are RuntimeErrors) pass through the policy.
_CLICK_EXCEPTIONS = (
    click.exceptions.ClickException,
    click.exceptions.Exit,
    click.exceptions.Abort,
)


def _debugging() -> bool:
    context = click.get_current_context(silent=True)
    state = None if context is None else context.find_object(CliState)
    return state is not None and state.debug


def _error_line(exc: BaseException) -> str:
    return f"sftrace: error: {one_line(str(exc)) or type(exc).__name__}"


def _unexpected_line(what: str, exc: BaseException) -> str:
    message = one_line(str(exc), 300)
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"sftrace: error: {what} failed: {detail} (run with --debug for the traceback)"


class SftraceGroup(click.Group):
    """The group; applies the error policy to every command, also one that raises outside
    :func:`bad_input_policy` and under ``click.testing.CliRunner``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _CLICK_EXCEPTIONS:
            raise
        except BrokenPipeError:
            _reader_gone()
        except (SftraceError, OSError) as exc:
            _exit_with(_error_line(exc))
        except (Exception, asyncio.CancelledError) as exc:
            command = ctx.invoked_subcommand
            what = f"`sftrace {command}`" if command else "sftrace"
            _exit_with(_unexpected_line(what, exc))


def _reader_gone() -> NoReturn:
    """The output's reader went away (``sftrace inspect B | head``): exit quietly, as a
    process killed by SIGPIPE would (141), with nothing more written to the pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None


def _exit_with(line: str) -> NoReturn:
    """The error policy, while an exception is handled: its traceback with ``--debug``,
    ``line`` on stderr, exit 2."""
    if _debugging():
        traceback.print_exc()
    echo(line, err=True)
    raise click.exceptions.Exit(EXIT_BAD_INPUT) from None


@click.group(cls=SftraceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sftrace")
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Record AI agent runs as OpenTelemetry spans and replay them as offline tests."""
    ctx.obj = CliState(debug)


def _register_commands() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"sftrace._cli.{name}").register(cli)


@contextlib.contextmanager
def bad_input_policy() -> Iterator[None]:
    """Apply ``main``'s error policy inside a command (one line, exit 2), so that it also
    holds when the command runs without ``main`` (e.g. under ``click.testing.CliRunner``)."""
    try:
        yield
    except BrokenPipeError:
        _reader_gone()
    except (SftraceError, OSError) as exc:
        _exit_with(_error_line(exc))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``sftrace`` command."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    _register_commands()
    try:
        code = cli.main(args=args, prog_name="sftrace", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.ClickException as exc:
        exc.show()
        code = EXIT_BAD_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort:
        echo("sftrace: aborted", err=True)
        code = 130
    except (SftraceError, OSError) as exc:
        if debug:
            traceback.print_exc()
        echo(_error_line(exc), err=True)
        code = EXIT_BAD_INPUT
    except Exception as exc:  # raised outside any command (the group's own option parsing)
        if debug:
            traceback.print_exc()
        echo(_unexpected_line("sftrace", exc), err=True)
        code = EXIT_BAD_INPUT
    try:
        sys.stdout.flush()  # what is still buffered, while a broken pipe can be handled
    except BrokenPipeError:
        with contextlib.suppress(click.exceptions.Exit):
            _reader_gone()
        code = EXIT_BROKEN_PIPE
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    # `python -m sftrace._cli.main` runs a second copy of this module; use the package's own,
    # which the command modules share (its CliState carries --debug to them).
    from sftrace._cli.main import main as package_main

    package_main()
