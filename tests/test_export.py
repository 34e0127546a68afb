"""``sftrace export --pytest``: the generated module, and the round trip that matters:
the exported test fails against the buggy agent and passes against the fixed one."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regress_helpers import DENIED, invoke, llm, record_agent, record_steps, tool, write_agent
from sftrace._regress.pytest_export import literal

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _only_this_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions load sftrace's plugin alone, not whatever else is installed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    return pytester.runpytest("-p", "sftrace.pytest_plugin", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester: pytest.Pytester) -> tuple[Path, str]:
    """The agent, its recorded buggy run, the corrected output and a trajectory document."""
    module = write_agent(pytester.path)
    (pytester.path / "bundles").mkdir()
    bundle = record_agent(pytester.path, module, pytester.path / "bundles" / "late.sftrace")
    (pytester.path / "denied.json").write_text(json.dumps(DENIED))
    (pytester.path / "trajectory.toml").write_text('called = ["lookup"]\nnot_called = ["refund"]\n')
    return bundle, module


def _export(bundle: Path, entrypoint: str, *options: str) -> Any:
    return invoke(
        "export",
        bundle,
        "--pytest",
        "--entrypoint",
        entrypoint,
        "--expect-output",
        "denied.json",
        "--expect-trajectory",
        "trajectory.toml",
        "-o",
        "tests/test_late_refund.py",
        *options,
    )


def test_exported_test_fails_on_the_buggy_agent_and_passes_on_the_fixed_one(
    pytester: pytest.Pytester, project: tuple[Path, str]
) -> None:
    """Record a buggy run, export a test with the corrected output: it fails against the
    buggy entrypoint and passes against the fixed one."""
    bundle, module = project
    exported = _export(bundle, f"{module}:buggy")
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.strip() == "wrote tests/test_late_refund.py"
    failing = _run(pytester)
    failing.assert_outcomes(failed=1)
    failing.stdout.fnmatch_lines(
        [
            "*AssertionError: FAIL: 2 errors*",
            '*$.decision: expected "denied", replayed "refunded"',
            "*EXPECTATION_FAILED: expected 'refund' not to be called*",
        ]
    )
    assert _export(bundle, f"{module}:fixed", "--overwrite").exit_code == 0
    _run(pytester).assert_outcomes(passed=1)


def test_the_exported_test_runs_from_any_directory(
    pytester: pytest.Pytester, project: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The exported module puts the agent's directory on sys.path itself: pytest run from
    elsewhere (CI's checkout root, an IDE) still imports the agent."""
    bundle, module = project
    assert _export(bundle, f"{module}:fixed").exit_code == 0
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "sftrace.pytest_plugin", "-p",
         "no:cacheprovider", str(pytester.path / "tests" / "test_late_refund.py")],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_exported_module_is_short_and_readable(
    pytester: pytest.Pytester, project: tuple[Path, str]
) -> None:
    """The module states the bundle, entrypoint and expectations; it uses the plugin's
    API, not a copy of the engine."""
    bundle, module = project
    assert _export(bundle, f"{module}:fixed").exit_code == 0
    text = (pytester.path / "tests" / "test_late_refund.py").read_text()
    ast.parse(text)
    assert len(text.splitlines()) < 35
    assert 'BUNDLE = Path(__file__).parent / "../bundles/late.sftrace"' in text
    assert f'ENTRYPOINT = "{module}:fixed"' in text
    assert 'EXPECTED_OUTPUT = {"decision": "denied", "order_id": "A-1"}' in text
    assert "def test_late_refund(sftrace_replay):" in text
    assert "        output=EXPECTED_OUTPUT,\n" in text
    assert '        not_called=["refund"],\n' in text
    assert "import sftrace._" not in text


def test_without_expectations_a_recorded_failure_must_now_complete(tmp_path: Path) -> None:
    """No expectation given: for a failed recording the test asserts the run completes;
    for a completed one, that it behaves as recorded."""
    entrypoint = f"{write_agent(tmp_path)}:fixed"
    failed = record_steps(tmp_path / "failed.sftrace", [tool("t", 1)], fail="boom")
    result = invoke("export", failed, "--pytest", "-e", entrypoint)
    assert result.exit_code == 0, result.output
    assert "tip: pass --expect-output" in result.stderr
    text = (tmp_path / "test_failed.py").read_text()
    assert 'status="completed",' in text
    assert "failed with RuntimeError: boom" in text
    completed = record_steps(tmp_path / "ok.sftrace", [tool("t", 1)], output={"a": 1})
    assert invoke("export", completed, "--pytest", "-e", entrypoint).exit_code == 0
    assert "assert_same_as_recorded(result)" in (tmp_path / "test_ok.py").read_text()


# Text a bundle may hold that breaks generated code pasted in unescaped: quotes that end a
# docstring or a literal, backslashes, control characters, terminal escapes, separators.
HOSTILE = 'x """ \'\'\' " \\ \\" \x00 \x1b[2J \x7f \u2028 \u0085 \\N{BEL} {braces} \\'


def test_exported_module_compiles_whatever_the_bundle_holds(tmp_path: Path) -> None:
    """Recorded text (failure type and message, bundle name, expected values) goes into
    the generated module as escaped literals: it compiles and reads back the same text."""
    module = write_agent(tmp_path)
    error_type = type(f"Bad{HOSTILE.replace(chr(0), '')}Error", (Exception,), {})
    bundle_dir = tmp_path / 'bun"""dle \\ x'
    bundle_dir.mkdir()
    failed = record_steps(bundle_dir / "run.sftrace", [tool("t", 1)], fail=error_type(HOSTILE))
    expected = {HOSTILE: [HOSTILE, "\u2029"]}
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    target = tmp_path / "test_hostile.py"
    result = invoke(
        "export", failed, "--pytest", "-e", f"{module}:fixed", "-o", target,
        "--expect-output", "expected.json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = target.read_text(encoding="utf-8")
    compile(text, str(target), "exec")
    assert all(c.isprintable() or c == "\n" for c in text)
    constants = {
        node.targets[0].id: node.value
        for node in ast.parse(text).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    recorded = ast.literal_eval(constants["RECORDED"])
    assert f"{error_type.__name__}: {HOSTILE}".splitlines()[0] in recorded
    assert ast.literal_eval(constants["EXPECTED_OUTPUT"]) == expected
    assert ast.literal_eval(constants["BUNDLE"].right) == 'bun"""dle \\ x/run.sftrace'


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--entrypoint", "agent"], "must be 'module:function'", id="entrypoint"),
        pytest.param(["-e", "no_such_agent:run"], "cannot import", id="unresolved"),
        pytest.param(["-e", "json:no_such_function"], "has no attribute", id="no-attribute"),
        pytest.param(["-e", "a:b", "-o", "exists.py"], "already exists", id="overwrite"),
        pytest.param(["-e", "a:b", "-o", "notes.txt"], "must be a .py file", id="suffix"),
        pytest.param(["-e", "a:b", "--expect-output", "nope.json"], "not found", id="output"),
        pytest.param(
            ["-e", "a:b", "--expect-output", "o.json", "--expect-trajectory", "t.json"],
            "already sets 'output'",
            id="output-twice",
        ),
    ],
)
def test_export_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    """Bad input: one line on stderr, exit 2, nothing written."""
    bundle = record_steps(tmp_path / "run.sftrace", [tool("t", 1)], output=1)
    (tmp_path / "exists.py").write_text("# mine\n")
    (tmp_path / "o.json").write_text("1")
    (tmp_path / "t.json").write_text('{"output": 2}')
    result = invoke("export", bundle, "--pytest", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert (tmp_path / "exists.py").read_text() == "# mine\n"
    assert not (tmp_path / "test_run.py").exists()


def test_export_needs_a_format(tmp_path: Path) -> None:
    """Without --pytest the command says what to choose and exits 2."""
    bundle = record_steps(tmp_path / "run.sftrace", [tool("t", 1)], output=1)
    result = invoke("export", bundle, "-e", "a:b")
    assert result.exit_code == 2
    assert "--pytest" in result.output


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(JSON)
def test_literals_evaluate_back_to_the_value(value: Any) -> None:
    """Any JSON value written as a Python literal evaluates back to itself."""
    assert ast.literal_eval(literal(value, 0)) == value


@pytest.mark.parametrize("text", ["\ud800", "\x7f", "\u2028", "\x1b[31m", 'a"""b', "\\"])
def test_string_literals_are_printable_and_exact(text: str) -> None:
    """Lone surrogates and non-printable characters are escaped, never written raw."""
    written = literal(text, 0)
    assert written.isprintable()
    assert ast.literal_eval(written) == text


def test_long_literals_are_one_item_a_line() -> None:
    """A value too long for one line is split, one item a line with trailing commas."""
    text = literal({"reply": "x" * 90, "items": [1, 2]}, 0)
    assert text.splitlines() == [
        "{",
        '    "reply": "' + "x" * 90 + '",',
        '    "items": [1, 2],',
        "}",
    ]


QUOTA_AGENT = """\
from sftrace import trace_tool


class QuotaExceeded(Exception):
    pass


@trace_tool
def search(query):
    raise QuotaExceeded("monthly quota used")


def buggy(query):
    return search(query)


def fixed(query):
    try:
        return search(query)
    except QuotaExceeded:
        return "try again tomorrow"
"""


def test_exported_test_of_a_custom_failure_judges_the_agent_not_a_divergence(
    pytester: pytest.Pytester,
) -> None:
    """A recorded failure with the agent's own exception class: the exported test fails
    on the buggy agent with the status finding (not REPLAY_DIVERGED) and passes once the
    agent's `except QuotaExceeded:` handles the replayed failure."""
    import importlib
    import sys

    import sftrace

    name = f"quota_agent_{id(pytester) % 100_000}"
    (pytester.path / f"{name}.py").write_text(QUOTA_AGENT)
    sys.path.insert(0, str(pytester.path))
    try:
        agent = importlib.import_module(name)
    finally:
        sys.path.remove(str(pytester.path))
    bundle = pytester.path / "quota.sftrace"
    with (
        pytest.raises(agent.QuotaExceeded),
        sftrace.record("quota-agent", output=bundle, run_input="flights") as session,
    ):
        session.set_output(agent.buggy("flights"))
    (pytester.path / "expected.json").write_text(json.dumps("try again tomorrow"))
    export = ["export", bundle, "--pytest", "--expect-output", "expected.json"]
    exported = invoke(*export, "-e", f"{name}:buggy", "-o", "tests/test_quota.py")
    assert exported.exit_code == 0, exported.output
    failing = _run(pytester)
    failing.assert_outcomes(failed=1)
    assert "REPLAY_DIVERGED" not in failing.stdout.str()
    failing.stdout.fnmatch_lines(
        ["*STATUS_CHANGED: run status changed: expected completed, replayed failed*"]
    )
    fixed = invoke(*export, "-e", f"{name}:fixed", "-o", "tests/test_quota.py", "--overwrite")
    assert fixed.exit_code == 0, fixed.output
    _run(pytester).assert_outcomes(passed=1)


def test_export_match_unordered_for_an_agent_whose_concurrent_calls_vary(
    pytester: pytest.Pytester,
) -> None:
    """--match unordered: the exported test replays unordered, so an agent making the
    recorded calls in another order (concurrent calls) passes; a strict test fails."""
    steps = [tool("lookup", {"days": 45}, order_id="A-1"), tool("notify", {"ok": True}, to="ops")]
    bundle = record_steps(pytester.path / "run.sftrace", steps, output={"done": True})
    (pytester.path / "racy_agent.py").write_text(
        "from regress_helpers import play, tool\n\n"
        "def swapped():\n"
        '    steps = [tool("notify", {"ok": True}, to="ops"),\n'
        '             tool("lookup", {"days": 45}, order_id="A-1")]\n'
        '    return play(steps, {"done": True})\n'
    )
    for match, outcome in (("unordered", {"passed": 1}), ("strict", {"failed": 1})):
        exported = invoke(
            "export", bundle, "--pytest", "-e", "racy_agent:swapped", "--match", match,
            "-o", "test_racy.py", "--overwrite",
        )  # fmt: skip
        assert exported.exit_code == 0, exported.output
        text = (pytester.path / "test_racy.py").read_text()
        assert ('match="unordered"' in text) == (match == "unordered")
        _run(pytester).assert_outcomes(**outcome)


def test_export_replay_options_let_the_test_follow_a_fix(pytester: pytest.Pytester) -> None:
    """A fix that rewords the prompt and adds a policy check: exported with --match-ignore
    and --on-miss live --allow-live-tool, the test replays with those options and passes;
    exported without them it diverges. Bad options are refused before anything is
    written."""
    steps = [tool("lookup", {"days": 45}, order_id="A-1"), llm("m-1", {"ok": True}, q="refund?")]
    bundle = record_steps(pytester.path / "run.sftrace", steps, output={"done": True})
    (pytester.path / "fixed_agent.py").write_text(
        "from regress_helpers import llm, play, tool\n\n"
        "def fixed():\n"
        '    steps = [tool("lookup", {"days": 45}, order_id="A-1"),\n'
        '             tool("policy", {"allowed": False}, days=45),\n'
        '             llm("m-1", {"ok": True}, q="may I refund order A-1?")]\n'
        '    return play(steps, {"done": True})\n'
    )
    base = ["export", bundle, "--pytest", "-e", "fixed_agent:fixed", "-o", "test_fix.py"]
    tolerant = ["--match-ignore", "llm=$.q", "--on-miss", "live", "--allow-live-tool", "policy"]
    exported = invoke(*base, *tolerant)
    assert exported.exit_code == 0, exported.output
    text = (pytester.path / "test_fix.py").read_text()
    assert 'match_ignore={"llm": ["$.q"]}' in text
    assert 'on_miss="live"' in text
    assert 'allow_live_tools=["policy"]' in text
    ast.parse(text)
    _run(pytester).assert_outcomes(passed=1)
    exported = invoke(*base, "--overwrite")
    assert exported.exit_code == 0, exported.output
    _run(pytester).assert_outcomes(failed=1)
    refused = invoke(*base, "--overwrite", "--tiers", "exact", "--match-ignore", "llm=$.q")
    assert refused.exit_code == 2
    assert "match_ignore is given but tiers" in refused.output
