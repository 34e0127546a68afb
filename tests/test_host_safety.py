"""Never break the host: sftrace's own failures never change what the agent does.

In production an internal failure (a read-only or full disk, an exporter error) is
logged once per cause and swallowed; under pytest or SFTRACE_STRICT=1 it is raised so it
gets found. KeyboardInterrupt, SystemExit and asyncio.CancelledError pass through
unchanged, and a cancelled tool is recorded as cancelled.

The disks are real: a read-only or tiny tmpfs mounted for the test where that is
allowed (root), a read-only directory otherwise; a file-size limit (RLIMIT_FSIZE) in a
child process makes writes fail at the operating system everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from sftrace import BundleError, load_bundle, record, recover_bundle, trace_tool
from sftrace._bundle.format import PARTIAL_SUFFIX
from sftrace._internal import _seen
from sftrace._record.config import get_state


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    """Production behaviour: internal failures are logged once, never raised."""
    monkeypatch.setenv("SFTRACE_STRICT", "0")
    _seen.clear()


@contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "sftrace-test", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no bundle can be written to (a read-only mount for root)."""
    target = tmp_path / "read-only"
    if os.geteuid() != 0:
        target.mkdir()
        target.chmod(0o555)
        yield target
        target.chmod(0o755)
        return
    with _tmpfs(target, "ro,size=64k") as mounted:
        yield mounted


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB file system: a run with large results fills it part-way."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root; the RLIMIT_FSIZE test covers this")
    with _tmpfs(tmp_path / "tiny", "size=64k") as mounted:
        yield mounted


@trace_tool
def fetch_page(n: int) -> dict[str, Any]:
    return {"n": n, "body": f"page {n} " + "lorem ipsum " * 600}


@trace_tool
def checkout(cart: list[int]) -> str:
    if not cart:
        raise ValueError("empty cart")
    return f"order-{sum(cart)}"


def agent(pages: int) -> dict[str, Any]:
    total = sum(len(fetch_page(n)["body"]) for n in range(pages))
    return {"chars": total, "order": checkout([1, 2, 3])}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sftrace"]


# --- disks ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("production")
def test_read_only_disk_changes_nothing_for_the_agent(
    read_only_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Bundles cannot be written: the agent's results and exceptions are exactly those
    it has without sftrace, and the failure is logged once however many runs hit it."""
    expected = agent(3)
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        for attempt in range(3):
            with record("ro", output=read_only_dir / f"run{attempt}.sftrace"):
                assert agent(3) == expected
        with (
            pytest.raises(ValueError, match="empty cart") as caught,
            record("ro", output=read_only_dir / "failing.sftrace"),
        ):
            checkout([])
    assert caught.value.args == ("empty cart",)
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert "creating a bundle journal failed" in warnings[0]
    assert list(read_only_dir.iterdir()) == []


def test_read_only_disk_raises_under_tests(read_only_dir: Path) -> None:
    """Under pytest (or SFTRACE_STRICT=1) the same failure raises, so it is found."""
    with (
        pytest.raises(BundleError, match=r"cannot write the bundle .*so this run is not") as caught,
        record("ro", output=read_only_dir / "run.sftrace"),
    ):
        agent(1)
    assert isinstance(caught.value.__cause__, OSError)
    assert re.search(r"Read-only file system|Permission denied", str(caught.value))


@pytest.mark.usefixtures("production")
def test_disk_full_mid_run_changes_nothing_and_keeps_what_fit(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills part-way through a run: the agent is untouched, each cause is logged
    once, and what reached the disk is recoverable once there is room."""
    expected = agent(30)
    with (
        caplog.at_level(logging.WARNING, logger="sftrace"),
        record("full", output=tiny_disk / "full.sftrace") as session,
    ):
        assert agent(30) == expected
    warnings = _warnings(caplog)
    assert len(warnings) == 2
    assert "No space left on device" in warnings[0]
    assert "run `sftrace recover" in warnings[1]
    assert not (tiny_disk / "full.sftrace").exists()
    [partial] = tiny_disk.glob(f".*{PARTIAL_SUFFIX}")
    bundle = load_bundle(recover_bundle(partial, output=tiny_disk.parent / "rescued.sftrace"))
    assert bundle.manifest.run_id == session.run_id
    assert 0 < len(bundle.calls) < 31
    assert all(call.name == "fetch_page" for call in bundle.calls)


@pytest.mark.usefixtures("production")
def test_spans_after_the_disk_had_room_again_are_kept(tiny_disk: Path) -> None:
    """The disk fills mid-run and then has room again: the journal stays readable (the
    half-written line is dropped), and every span written after that is recovered."""
    with record("flaky-disk", output=tiny_disk / "flaky.sftrace"):
        fetch_page(0)
        filler = tiny_disk / "filler"
        # Take every byte that is left (unbuffered: nothing is pending at close).
        with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"x" * 4096)
        fetch_page(1)  # cannot be saved
        filler.unlink()
        fetch_page(2)
        fetch_page(3)
    [partial] = tiny_disk.glob(f".*{PARTIAL_SUFFIX}")
    bundle = load_bundle(recover_bundle(partial, output=tiny_disk.parent / "flaky.sftrace"))
    assert bundle.status == "completed"  # the run span itself reached the journal
    assert [c.input["n"] for c in bundle.calls] == [0, 2, 3]
    notes = " ".join(bundle.manifest.notes)
    assert "calls 2 are not in the journal" in notes


def test_disk_full_raises_under_tests(tiny_disk: Path) -> None:
    """Under pytest the full disk surfaces as a BundleError saying how to recover."""
    with (
        pytest.raises(BundleError, match=r"No space left on device.*sftrace recover"),
        record("full", output=tiny_disk / "full.sftrace"),
    ):
        agent(30)


_CHILD = """
import json, resource, signal, sys
from sftrace import record, trace_tool

# Writes past 64 KiB fail with EFBIG at the operating system (the signal is ignored).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))

@trace_tool
def fetch_page(n: int) -> dict:
    return {"n": n, "body": "lorem ipsum " * 600}

def agent() -> int:
    return sum(len(fetch_page(n)["body"]) for n in range(40))

with record("limited", output=sys.argv[1]):
    result = agent()
print(json.dumps({"result": result}))
"""


def test_file_size_limit_in_a_real_process_is_swallowed_and_logged_once(tmp_path: Path) -> None:
    """A process whose files cannot grow (RLIMIT_FSIZE, any user): the agent finishes with
    its normal result, exit status 0, and sftrace logs each cause once."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(_CHILD))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["SFTRACE_STRICT"] = "0"
    child = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "limited.sftrace")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == f'{{"result": {40 * len("lorem ipsum ") * 600}}}'
    lines = [line for line in child.stderr.splitlines() if line.startswith("sftrace:")]
    assert len(lines) == 2, child.stderr
    assert "File too large" in lines[0]
    assert "sftrace recover" in lines[1]


# --- exporters ------------------------------------------------------------------------------


class BrokenExporter(SpanExporter):
    """An application's exporter that fails on every span (a collector gone bad)."""

    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector exploded")

    def shutdown(self) -> None:
        return None


def test_a_failing_exporter_next_to_sftrace_changes_nothing(tmp_path: Path) -> None:
    """Another exporter on the same provider raising on every span: the agent's result is
    unchanged and the bundle is complete."""
    broken = BrokenExporter()
    get_state().provider.add_span_processor(SimpleSpanProcessor(broken))
    expected = agent(2)
    with record("both", output=tmp_path / "both.sftrace"):
        assert agent(2) == expected
    assert broken.calls > 0
    assert len(load_bundle(tmp_path / "both.sftrace", verify_integrity=True).calls) == 3


# --- what passes through unchanged ----------------------------------------------------------


class Stop(BaseException):
    """A BaseException of the application's own."""


@pytest.mark.parametrize(
    "exc",
    [KeyboardInterrupt(), SystemExit(3), Stop("halt"), GeneratorExit()],
    ids=lambda e: type(e).__name__,
)
def test_base_exceptions_pass_through_unchanged(tmp_path: Path, exc: BaseException) -> None:
    """KeyboardInterrupt, SystemExit and other BaseExceptions raised in a tool reach the
    caller as the same object, and the call and run are recorded as failed."""

    @trace_tool
    def interrupted() -> None:
        raise exc

    with pytest.raises(type(exc)) as caught, record("base", output=tmp_path / "b.sftrace"):
        interrupted()
    assert caught.value is exc
    bundle = load_bundle(tmp_path / "b.sftrace")
    [call] = bundle.calls
    assert call.error is not None
    assert call.error.type.endswith(type(exc).__name__)
    assert bundle.failure is not None
    assert bundle.failure.step == 1


def test_cancelled_tool_is_recorded_as_cancelled(tmp_path: Path) -> None:
    """Cancelling a task inside an async tool: CancelledError reaches the awaiter
    unchanged, and the call is recorded as cancelled."""

    started = asyncio.Event()

    @trace_tool
    async def wait_forever() -> None:
        started.set()
        await asyncio.Event().wait()

    @trace_tool
    async def quick() -> str:
        return "done"

    async def main() -> None:
        async with record("cancel", output=tmp_path / "c.sftrace"):
            task = asyncio.create_task(wait_forever())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await quick() == "done"

    asyncio.run(main())
    bundle = load_bundle(tmp_path / "c.sftrace")
    assert bundle.status == "completed"
    cancelled, finished = bundle.calls
    assert cancelled.error is not None
    assert cancelled.error.cancelled
    assert cancelled.error.type.endswith("CancelledError")
    assert finished.error is None


def test_cancelling_the_whole_recorded_run_still_writes_its_bundle(tmp_path: Path) -> None:
    """The task running `async with record()` is cancelled: the cancellation propagates
    unchanged and the bundle is written, marked failed at the cancelled call."""

    started = asyncio.Event()

    @trace_tool
    async def slow() -> None:
        started.set()
        await asyncio.Event().wait()

    async def run() -> None:
        async with record("cancelled-run", output=tmp_path / "r.sftrace"):
            await slow()

    async def main() -> None:
        task = asyncio.create_task(run())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    bundle = load_bundle(tmp_path / "r.sftrace")
    assert bundle.status == "failed"
    assert bundle.failure is not None
    assert bundle.failure.type is not None
    assert bundle.failure.type.endswith("CancelledError")
    assert bundle.calls[0].error is not None
    assert bundle.calls[0].error.cancelled


def test_exceptions_keep_their_identity_and_traceback_in_and_out_of_recordings(
    tmp_path: Path,
) -> None:
    """The exception a tool body raises reaches the caller as the same object, with the
    body's frame in its traceback, whether or not a run is being recorded."""
    raised: list[ValueError] = []

    @trace_tool
    def explode(reason: str) -> None:
        error = ValueError(reason)
        raised.append(error)
        raise error

    def recorded(reason: str) -> None:
        with record("ids", output=tmp_path / "ids.sftrace"):
            explode(reason)

    for call in (explode, recorded):
        with pytest.raises(ValueError, match="boom") as caught:
            call("boom")
        assert caught.value is raised[-1]
        frames = [frame.name for frame in caught.traceback]
        assert frames[-1] == "explode"
    assert len(raised) == 2
    assert [c.error.type for c in load_bundle(tmp_path / "ids.sftrace").calls if c.error] == [
        "ValueError"
    ]


@pytest.mark.usefixtures("production")
def test_a_bundle_directory_that_is_a_file_is_one_line_and_the_host_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bundle path under a file: the run is not recorded, said in one line naming the
    path and what to do (no traceback), and the agent's own code runs on."""
    afile = tmp_path / "afile"
    afile.write_text("")
    with (
        caplog.at_level(logging.WARNING, logger="sftrace"),
        record("x", output=afile / "x.sftrace") as session,
    ):
        session.set_output(1)
    [line] = [r for r in caplog.records if "bundle journal" in r.getMessage()]
    assert f"cannot write the bundle '{afile}/" in line.getMessage()
    assert "so this run is not recorded" in line.getMessage()
    assert line.exc_info is None


def test_an_unknown_strict_value_is_said_once_and_ignored(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from sftrace._internal import _unknown_strict, strict_mode

    _unknown_strict.discard("maybe")
    monkeypatch.setenv("SFTRACE_STRICT", "maybe")
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        assert strict_mode()  # under pytest, as if unset
        assert strict_mode()
    said = [r.getMessage() for r in caplog.records if "SFTRACE_STRICT" in r.getMessage()]
    assert said == [
        "sftrace: SFTRACE_STRICT='maybe' is neither true (1, true, yes, on) nor false (0, "
        "false, no, off); it is ignored (strict only under pytest)"
    ]
