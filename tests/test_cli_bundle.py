"""``sftrace inspect`` and ``sftrace validate``: readable trees, JSON, and exit codes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from sftrace import BundleError, llm_request, load_bundle, record, trace_tool, validate_bundle
from sftrace._cli.bundle import register
from sftrace._cli.main import cli
from sftrace._record.config import get_state

register(cli)

AGENT = "cli-agent"


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "temp": 21}


@trace_tool
def plan(city: str) -> str:
    """A tool calling a tool and an LLM: both are its children."""
    weather = lookup(city)
    reply = llm_request(
        provider="fake",
        model="m-1",
        input={"prompt": f"plan a day in {city}", "weather": weather},
        call=lambda: {"text": "walk", "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
    )
    return str(reply["text"])


@trace_tool
def book(city: str) -> dict[str, Any]:
    raise ValueError(f"no hotel left in {city}")


def good_agent(city: str) -> dict[str, Any]:
    return {"plan": plan(city), "again": lookup(city)}


def failing_agent(city: str) -> dict[str, Any]:
    plan(city)
    return book(city)


def recorded(path: Path, agent: Callable[[str], Any], city: str = "Lisbon") -> Path:
    """Record ``agent(city)`` into ``path``; its exception, if any, is swallowed."""
    try:
        with record(AGENT, output=path, run_input=city) as session:
            session.set_output(agent(city))
    except ValueError:
        pass
    return path


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return recorded(tmp_path / "good.sftrace", good_agent)


@pytest.fixture
def failed(tmp_path: Path) -> Path:
    return recorded(tmp_path / "failed.sftrace", failing_agent)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_bad_input(result: Result) -> None:
    """Exit 2, one line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("sftrace: error: ")
    assert "Traceback" not in result.stderr


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


# --- inspect ------------------------------------------------------------------------


def test_inspect_shows_run_and_calls_nested_under_their_parents(good: Path) -> None:
    """The tree names the run and nests calls made inside a tool under that tool."""
    result = invoke("inspect", good)
    assert result.exit_code == 0, result.output
    bundle = load_bundle(good)
    out = result.stdout
    assert AGENT in out
    assert bundle.run_id in out
    assert "completed" in out
    outer, inner, llm, again = bundle.calls
    assert (outer.name, inner.name, again.name) == ("plan", "lookup", "lookup")
    column = {
        call.seq: line_with(out, f"#{call.seq} {call.kind} ").index(f"#{call.seq}")
        for call in bundle.calls
    }
    assert column[inner.seq] == column[llm.seq] > column[outer.seq] == column[again.seq]
    assert f"#{llm.seq} llm fake/m-1" in out
    assert 'in  {"city":"Lisbon"}' in out  # a one-line input preview
    assert 'out {"city":"Lisbon","temp":21}' in out


def test_inspect_failed_bundle_shows_failure_and_failing_call(failed: Path) -> None:
    """A failed run shows its failure, the step, and the error of the call that raised."""
    result = invoke("inspect", failed)
    assert result.exit_code == 0, result.output
    failing = load_bundle(failed).calls[-1]
    assert "failed" in line_with(result.stdout, AGENT)
    assert f"failure: ValueError: no hotel left in Lisbon (at call #{failing.seq})" in (
        result.stdout
    )
    assert "error ValueError: no hotel left in Lisbon" in result.stdout


def test_inspect_shows_both_the_output_and_the_error_of_a_call_that_has_both(
    tmp_path: Path,
) -> None:
    """A call may end with an output and an error (a stream that raised after some
    chunks): the tree shows both."""
    path = tmp_path / "both.sftrace"
    with (
        record(AGENT, output=path) as session,
        contextlib.suppress(ConnectionError),
        session.llm_call(provider="fake", model="m-1", input={"q": 1}) as handle,
    ):
        handle.set_output({"chunks": ["partial"], "complete": False})
        raise ConnectionError("stream cut")
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert 'out {"chunks":["partial"],"complete":false}' in result.stdout
    assert "error ConnectionError: stream cut" in result.stdout


def test_inspect_does_not_interpret_recorded_text_as_markup(tmp_path: Path) -> None:
    """Recorded values are shown literally, never as rich markup."""
    bundle = recorded(tmp_path / "markup.sftrace", good_agent, city="[bold]Oz[/bold]")
    result = invoke("inspect", bundle)
    assert result.exit_code == 0, result.output
    assert '{"city":"[bold]Oz[/bold]"}' in result.stdout


@pytest.mark.parametrize("fixture", ["good", "failed"])
def test_inspect_json_lists_every_fact(fixture: str, request: pytest.FixtureRequest) -> None:
    """--json is one document: the manifest, run input and output, and every call."""
    path: Path = request.getfixturevalue(fixture)
    result = invoke("inspect", path, "--json")
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    bundle = load_bundle(path)
    assert list(document) == [
        "path",
        "manifest",
        "run_input",
        "has_run_input",
        "metadata",
        "output",
        "has_output",
        "state_changes",
        "calls",
    ]
    assert document["manifest"] == orjson.loads((path / "manifest.json").read_bytes())
    assert document["run_input"] == bundle.run_input == "Lisbon"
    assert (document["output"], document["has_output"]) == (bundle.output, bundle.has_output)
    calls = document["calls"]
    assert [call["seq"] for call in calls] == [call.seq for call in bundle.calls]
    for shown, call in zip(calls, bundle.calls, strict=True):
        assert list(shown) == [
            "seq",
            "kind",
            "name",
            "provider",
            "policy",
            "parent",
            "input",
            "output",
            "error",
            "duration_ms",
            "span_id",
            "parent_span_id",
        ]
        assert (shown["kind"], shown["name"], shown["provider"]) == (
            call.kind,
            call.name,
            call.provider,
        )
        assert (shown["input"], shown["output"]) == (call.input, call.output)
        assert shown["duration_ms"] == pytest.approx(call.duration_ms, abs=1e-3)
    plan_seq = calls[0]["seq"]
    assert [call["parent"] for call in calls[:3]] == [None, plan_seq, plan_seq]
    if fixture == "failed":
        assert calls[-1]["error"] == {"type": "ValueError", "message": "no hotel left in Lisbon"}
    else:
        assert all(call["error"] is None for call in calls)


def test_metadata_is_shown_redacted_in_inspect_its_json_and_the_page(tmp_path: Path) -> None:
    """record(metadata=...) was stored and shown nowhere (the page listed a redaction of
    a field one could not see)."""
    from sftrace import record, render_html

    path = tmp_path / "meta.sftrace"
    with record("meta", output=path, metadata={"team": "billing", "password": "hunter2x"}):
        pass
    bundle = load_bundle(path)
    assert bundle.metadata == {"team": "billing", "password": "[REDACTED:sensitive_key]"}
    text = invoke("inspect", path)
    assert '  metadata: {"password":"[REDACTED:sensitive_key]","team":"billing"}' in text.output
    assert orjson.loads(invoke("inspect", path, "--json").stdout)["metadata"] == bundle.metadata
    page = render_html(bundle)
    assert '\\"team\\":\\"billing\\"' in page  # the header's metadata fact, as JSON text
    assert "hunter2x" not in page


def test_inspect_parents_skip_non_call_spans_and_nest_deeply(tmp_path: Path) -> None:
    """A call inside an application span inside a tool still nests under the tool."""
    tracer = get_state().tracer  # the test's provider

    @trace_tool
    def outer(depth: int) -> int:
        with tracer.start_as_current_span("app step"):
            return inner(depth - 1) if depth > 0 else 0

    @trace_tool
    def inner(depth: int) -> int:
        return outer(depth)

    with record(AGENT, output=tmp_path / "deep.sftrace") as session:
        session.set_output(outer(20))
    document = orjson.loads(invoke("inspect", tmp_path / "deep.sftrace", "--json").stdout)
    parents = [call["parent"] for call in document["calls"]]
    assert parents == [None, *[call["seq"] for call in document["calls"][:-1]]]


def test_inspect_limit_truncates_the_tree_with_a_summary(tmp_path: Path) -> None:
    """--limit bounds the tree and says how many calls were left out; --json has them all."""
    with record(AGENT, output=tmp_path / "many.sftrace"):
        for number in range(30):
            lookup(f"city-{number}")
    path = tmp_path / "many.sftrace"
    result = invoke("inspect", path, "--limit", "5")
    assert result.exit_code == 0, result.output
    shown = [line for line in result.stdout.splitlines() if " tool lookup" in line]
    assert len(shown) == 5
    assert "25 more calls not shown (of 30)" in result.stdout
    every = invoke("inspect", path, "--limit", "0").stdout
    assert len([line for line in every.splitlines() if " tool lookup" in line]) == 30
    assert len(orjson.loads(invoke("inspect", path, "--json").stdout)["calls"]) == 30


@pytest.mark.parametrize("make", ["missing", "file", "empty-dir"])
def test_inspect_unreadable_bundle_is_bad_input(make: str, tmp_path: Path) -> None:
    """inspect on something that is not a bundle: one line on stderr, exit 2."""
    result = invoke("inspect", not_a_bundle(tmp_path, make))
    assert_bad_input(result)


# --- validate -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "verify"),
    [([], True), (["--verify-integrity"], True), (["--no-verify-integrity"], False)],
)
def test_validate_good_bundle(flags: list[str], verify: bool, good: Path) -> None:
    """A fresh bundle is valid: exit 0 and one line with its counts; digests are
    verified unless --no-verify-integrity."""
    result = invoke("validate", good, *flags)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"valid: {good}")
    assert "4 calls (3 tool, 1 llm), 5 spans" in lines[0]
    assert ("digests verified" in lines[0]) is verify
    assert validate_bundle(good, verify_integrity=verify) == []


def test_validate_takes_several_bundles_and_exits_with_the_worst(
    good: Path, failed: Path, tmp_path: Path
) -> None:
    """`sftrace validate runs/*.sftrace`: each is checked and named; 0 all valid, 1 one
    invalid, 2 one unreadable (the others are still checked)."""
    both = invoke("validate", good, failed)
    assert both.exit_code == 0, both.output
    assert [line.split(":")[0] for line in both.stdout.splitlines()] == ["valid", "valid"]
    damaged = tmp_path / "damaged.sftrace"
    shutil.copytree(good, damaged)
    (damaged / "spans.jsonl").write_bytes((damaged / "spans.jsonl").read_bytes() + b"x")
    mixed = invoke("validate", good, damaged)
    assert mixed.exit_code == 1
    missing = invoke("validate", tmp_path / "missing.sftrace", damaged, good)
    assert missing.exit_code == 2
    assert "bundle not found" in missing.stderr
    assert missing.stdout.splitlines()[-1].startswith(f"valid: {good}")


def _rewrite(path: Path, change: Callable[[bytes], bytes]) -> None:
    path.write_bytes(change(path.read_bytes()))


def _truncate_last_line(data: bytes) -> bytes:
    return data[: -len(data.splitlines()[-1]) // 2 - 1]


def _duplicate_last_line(data: bytes) -> bytes:
    return data + data.splitlines(keepends=True)[-1]


def _drop_last_line(data: bytes) -> bytes:
    return b"".join(data.splitlines(keepends=True)[:-1])


def _version_99(data: bytes) -> bytes:
    return re.sub(rb'"format_version": \d+', b'"format_version": 99', data)


def _bad_json(data: bytes) -> bytes:
    return data[: len(data) // 2]


# (file to damage, how, what the problem line says)
DAMAGE: list[tuple[str, Callable[[bytes], bytes] | None, str]] = [
    ("spans.jsonl", _truncate_last_line, "spans.jsonl:5: truncated line"),
    ("spans.jsonl", _duplicate_last_line, "spans.jsonl:6: duplicate spanId"),
    ("spans.jsonl", _drop_last_line, "totals.spans is 5, but spans.jsonl holds 4"),
    ("manifest.json", _bad_json, "manifest.json: invalid JSON"),
    ("manifest.json", _version_99, "unsupported bundle format version 99"),
    ("spans.jsonl", None, "missing file 'spans.jsonl'"),
    ("checksums.sha256", None, "missing file 'checksums.sha256'"),
]


@pytest.mark.parametrize(("name", "change", "expected"), DAMAGE)
def test_validate_damaged_bundle_is_invalid(
    name: str, change: Callable[[bytes], bytes] | None, expected: str, good: Path
) -> None:
    """A damaged bundle: exit 1, each problem on its own stdout line naming the file."""
    target = good / name
    if change is None:
        target.unlink()
    else:
        _rewrite(target, change)
    result = invoke("validate", good)
    assert result.exit_code == 1, result.output
    problems = result.stdout.splitlines()
    assert problems
    assert any(expected in line for line in problems), problems
    assert "Traceback" not in result.output
    assert validate_bundle(good) == problems


@pytest.mark.parametrize("flags", [[], ["--verify-integrity"]])
def test_validate_verifies_digests_by_default(flags: list[str], good: Path) -> None:
    """A changed byte that keeps the JSON valid is caught by the digests, which validate
    checks unless told not to."""
    spans = good / "spans.jsonl"
    data = bytearray(spans.read_bytes())
    position = data.index(f"invoke_agent {AGENT}".encode()) + len("invoke_agent ")
    data[position] ^= 0x20  # 'c' -> 'C': still valid JSON, still a valid span
    spans.write_bytes(bytes(data))
    assert invoke("validate", good, "--no-verify-integrity").exit_code == 0
    assert validate_bundle(good, verify_integrity=False) == []
    result = invoke("validate", good, *flags)
    assert result.exit_code == 1, result.output
    (problem,) = result.stdout.splitlines()
    assert str(spans) in problem
    assert "digest mismatch" in problem
    assert validate_bundle(good) == [problem]


def not_a_bundle(tmp_path: Path, make: str) -> Path:
    path = tmp_path / f"{make}.sftrace"
    if make == "file":
        path.write_text("hello")
    elif make == "empty-dir":
        path.mkdir()
    elif make == "spans-only":
        path.mkdir()
        (path / "spans.jsonl").write_text("{}\n")
    return path


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        ("missing", "does not exist"),
        ("file", "is not a bundle"),
        ("empty-dir", "has no manifest.json"),
        ("spans-only", "has no manifest.json"),
    ],
)
def test_validate_unreadable_bundle_exits_2(make: str, expected: str, tmp_path: Path) -> None:
    """Not a bundle at all (missing, a file, no manifest): one stderr line, exit 2."""
    path = not_a_bundle(tmp_path, make)
    result = invoke("validate", path)
    assert_bad_input(result)
    assert expected in result.stderr
    with pytest.raises(BundleError, match=expected):
        validate_bundle(path)


def test_validate_unfinished_recording_points_to_recover(tmp_path: Path) -> None:
    """A journal left by a crashed run is unreadable as a bundle, with the fix named."""
    path = tmp_path / "crashed.sftrace"
    path.mkdir()
    (path / "journal.jsonl").write_text("")
    result = invoke("validate", path)
    assert_bad_input(result)
    assert "sftrace recover" in result.stderr


def test_inspect_says_a_bundle_cut_at_a_line_boundary_is_incomplete(good: Path) -> None:
    """Lines dropped from the end of spans.jsonl still parse: inspect shows what is left,
    says on stderr that the run is incomplete, and exits 1 (as validate does)."""
    _rewrite(good / "spans.jsonl", _drop_last_line)
    for args in (["inspect", good], ["inspect", good, "--json"]):
        result = invoke(*args)
        assert result.exit_code == 1, result.output
        assert "is incomplete" in result.stderr
        assert "totals.spans is 5, but spans.jsonl holds 4" in result.stderr


# Terminal escapes a hostile bundle may carry: clear screen, an OSC 8 link, a carriage
# return that overwrites the line, a C1 control sequence introducer, a right-to-left override.
ESCAPES = "\x1b[2J\x1b]8;;http://x\x07link\x1b]8;;\x07\r\x9b31m\u202e!"
RAW = frozenset("\x1b\x07\r\x9b\u202e")


def test_human_output_escapes_control_characters_from_the_bundle(tmp_path: Path) -> None:
    """Agent and tool names, error messages and values from a bundle are printed with their
    control characters escaped (visible as \\x1b...), never sent to the terminal."""

    @trace_tool(name=f"tool{ESCAPES}")
    def evil(x: str) -> str:
        raise ValueError(f"bad{ESCAPES}")

    path = tmp_path / "evil.sftrace"
    with (
        pytest.raises(ValueError, match="bad"),
        record(f"agent{ESCAPES}", output=path, run_input=ESCAPES),
    ):
        evil(ESCAPES)
    for args in (["inspect", path], ["validate", path]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        printed = result.stdout + result.stderr
        assert not RAW & set(printed), (args, printed)
    shown = invoke("inspect", path).stdout
    assert "\\x1b[2J" in shown
    assert "\\u202e" in shown
    assert "tool\\x1b" in shown


# --- the installed command ----------------------------------------------------------


def sftrace_command() -> str:
    """The ``sftrace`` console script of the environment running the tests."""
    beside = Path(sys.executable).parent / "sftrace"
    found = str(beside) if beside.exists() else shutil.which("sftrace")
    assert found, "the sftrace console script is not installed (pip install -e .)"
    return found


def test_python_dash_m_sftrace_runs_the_command(good: Path) -> None:
    """`python -m sftrace` is the sftrace command: same output, same exit codes."""
    done = subprocess.run(
        [sys.executable, "-m", "sftrace", "validate", str(good)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == invoke("validate", good).stdout
    missing = subprocess.run(
        [sys.executable, "-m", "sftrace", "inspect", str(good.parent / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("sftrace: error:"), missing.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "sftrace", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0
    assert "Usage: sftrace" in help_text.stdout


@pytest.mark.slow
def test_installed_command_exit_codes_without_tracebacks(good: Path, tmp_path: Path) -> None:
    """The real `sftrace` script: validate exits 0/1/2 and inspect 0/2, never a traceback."""
    broken = recorded(tmp_path / "broken.sftrace", good_agent)
    _rewrite(broken / "spans.jsonl", _truncate_last_line)
    cases = [
        (["validate", str(good), "--verify-integrity"], 0),
        (["validate", str(broken)], 1),
        (["validate", str(tmp_path / "nowhere")], 2),
        (["inspect", str(good)], 0),
        (["inspect", str(broken)], 2),
    ]
    env = {**os.environ, "COLUMNS": "200"}
    for args, expected in cases:
        done = subprocess.run(
            [sftrace_command(), *args], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == expected, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout
        if expected == 2:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_a_directory_that_is_no_bundle_is_named_so_by_every_command(
    tmp_path: Path, command: str
) -> None:
    """An empty directory is "not an sftrace bundle"; one holding a journal is an
    unfinished recording, with the command that recovers it: the same words whichever
    command reads it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke(command, empty)
    assert result.exit_code == 2, result.output
    assert f"{str(empty)!r} is not an sftrace bundle: it has no manifest.json" in result.stderr
    unfinished = tmp_path / "unfinished.sftrace"
    unfinished.mkdir()
    (unfinished / "journal.jsonl").write_text("")
    result = invoke(command, unfinished)
    assert result.exit_code == 2, result.output
    assert f"run `sftrace recover {unfinished}`" in result.stderr
