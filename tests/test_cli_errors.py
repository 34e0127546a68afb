"""The command line's error policy for what no command expected: one line naming the
command and the exception (exit 2), the traceback only with --debug; and a replay of a
timed-out call, end to end."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any, NoReturn

import pytest
from click.testing import CliRunner, Result

from sftrace import record, trace_tool
from sftrace._cli import replay as replay_cli
from sftrace._cli.main import cli, main

replay_cli.register(cli)


@trace_tool(name="lookup")
def lookup(query: str) -> str:
    return query.upper()


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "run.sftrace"
    with record("agent", output=path, run_input="q") as session:
        session.set_output(lookup("q"))
    return path


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def replay(bundle: Path, *options: str) -> Result:
    # os.path:basename accepts the recorded run_input; the tests replace what runs.
    return invoke(*options, "replay", bundle, "--entrypoint", "os.path:basename")


def raising(error: BaseException) -> Any:
    def fail(*args: Any, **kwargs: Any) -> NoReturn:
        raise error

    return fail


def test_an_unexpected_exception_is_one_line_naming_the_command(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_cli, "run_replay", raising(RuntimeError("boom\nsecond line")))
    result = replay(bundle)
    assert result.exit_code == 2
    assert result.stderr == (
        "sftrace: error: `sftrace replay` failed: RuntimeError: boom | second line "
        "(run with --debug for the traceback)\n"
    )
    assert "Traceback" not in result.output


def test_an_unexpected_exception_after_the_replay_is_one_line_too(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raised outside the command's bad-input block (its report)."""
    monkeypatch.setattr(replay_cli, "print_report", raising(KeyError("missing")))
    result = replay(bundle)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "sftrace: error: `sftrace replay` failed: KeyError: 'missing' (run with --debug for "
        "the traceback)"
    ]


def test_a_cancelled_error_escaping_a_command_is_one_line(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_cli, "run_replay", raising(asyncio.CancelledError()))
    result = replay(bundle)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "sftrace: error: `sftrace replay` failed: CancelledError (run with --debug for the "
        "traceback)"
    ]


def test_debug_shows_the_traceback_of_an_unexpected_exception(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_cli, "run_replay", raising(RuntimeError("boom")))
    result = replay(bundle, "--debug")
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "sftrace: error: `sftrace replay` failed: RuntimeError: boom"
    )


def test_main_exits_2_with_one_line(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The installed command's entry point applies the same policy."""
    monkeypatch.setattr(replay_cli, "run_replay", raising(ValueError("bad")))
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(bundle), "--entrypoint", "os.path:basename"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "sftrace: error: `sftrace replay` failed: ValueError: bad (run with --debug for the "
        "traceback)"
    ]


TIMED_OUT_AGENT = """
import asyncio

from sftrace import trace_tool


@trace_tool(name="slow_search")
async def slow_search(query: str) -> list:
    await asyncio.sleep(5)
    return [query]


async def run(query: str) -> str:
    try:
        return str(await asyncio.wait_for(slow_search(query), timeout=0.05))
    except TimeoutError:
        return "timeout"
"""


def test_replay_command_reproduces_a_timed_out_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sftrace replay` of an agent whose tool timed out: reproduced, no traceback."""
    (tmp_path / "timed_out_agent.py").write_text(textwrap.dedent(TIMED_OUT_AGENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "timed_out_agent", raising=False)
    import timed_out_agent  # type: ignore[import-not-found]

    path = tmp_path / "timeout.sftrace"

    async def run() -> None:
        async with record("agent", output=path, run_input="q") as session:
            session.set_output(await timed_out_agent.run("q"))

    asyncio.run(run())
    result = invoke("replay", path, "--entrypoint", "timed_out_agent:run")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def test_a_reader_that_goes_away_gets_no_error_line(tmp_path: Path) -> None:
    """``sftrace inspect B | head -1``: the pipe closes while sftrace still writes; it
    stops quietly, without "sftrace: error: [Errno 32] Broken pipe" or a traceback."""
    import subprocess

    @trace_tool
    def step(i: int) -> int:
        return i

    with record("long", output=tmp_path / "long.sftrace"):
        for i in range(400):
            step(i)
    command = [
        sys.executable,
        "-m",
        "sftrace._cli.main",
        "inspect",
        "--json",
        str(tmp_path / "long.sftrace"),
    ]
    for _ in range(3):
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
            assert process.stdout is not None
            assert process.stderr is not None
            process.stdout.readline()
            process.stdout.close()  # the reader goes away
            error = process.stderr.read().decode()
            process.wait(timeout=60)
        assert "error" not in error.lower(), error
        assert "Traceback" not in error
