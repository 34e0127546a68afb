"""The pytest plugin: the sftrace_replay fixture and suite files collected as test items."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from regress_helpers import DENIED, record_agent, write_agent

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _only_this_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions load sftrace's plugin alone, not whatever else is installed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "sftrace.pytest_plugin", "-p", "no:cacheprovider", *args)


@pytest.fixture
def agent(pytester: pytest.Pytester) -> str:
    """The agent module and its recorded buggy run (bundles/late.sftrace) in the project."""
    module = write_agent(pytester.path)
    (pytester.path / "bundles").mkdir()
    record_agent(pytester.path, module, pytester.path / "bundles" / "late.sftrace")
    (pytester.path / "denied.json").write_text(json.dumps(DENIED))
    return module


def _suite(module: str, extra: str = "") -> str:
    return f"""
entrypoint = "{module}:fixed"

[[cases]]
name = "late refund is denied"
bundle = "bundles/late.sftrace"
expected_output = "denied.json"
[cases.expect]
not_called = ["refund"]

[[cases]]
name = "still refunds as recorded"
bundle = "bundles/late.sftrace"
{extra}
"""


def test_each_suite_case_is_a_test_item(pytester: pytest.Pytester, agent: str) -> None:
    """A suite file becomes one item per case, run and reported by plain pytest."""
    pytester.makefile(".sftrace-suite.toml", refunds=_suite(agent))
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refunds.sftrace-suite.toml::late refund is denied PASSED*",
            "*refunds.sftrace-suite.toml::still refunds as recorded FAILED*",
        ]
    )
    # The failure report is the findings, not a traceback of the plugin.
    result.stdout.fnmatch_lines(["FAIL: * errors*", "*MISSING_CALL: call 2 (tool refund)*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_failure_report_lists_findings_then_the_divergence(
    pytester: pytest.Pytester, agent: str
) -> None:
    """A case whose replay diverged shows the findings, then the first divergence."""
    pytester.makefile(
        ".sftrace-suite.toml",
        refunds=_suite(agent, extra=f'entrypoint = "{agent}:wrong_order"'),
    )
    result = _run(pytester, "-k", "still")
    result.assert_outcomes(failed=1, deselected=1)
    text = result.stdout.str()
    assert text.index("REPLAY_DIVERGED") < text.index("first divergence:")
    assert "reached tool lookup with a different input than recorded" in text


def test_a_broken_suite_is_a_collection_error_naming_file_and_case(
    pytester: pytest.Pytester, agent: str
) -> None:
    """An invalid suite fails collection with one line naming the file and the case."""
    pytester.makefile(
        ".sftrace-suite.toml",
        refunds=_suite(agent, extra='expected_output = "missing.json"'),
    )
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*refunds.sftrace-suite.toml: case 'still refunds as recorded': expected_output*"]
    )


def test_unrelated_toml_files_are_never_collected(pytester: pytest.Pytester) -> None:
    """Only *.sftrace-suite.toml files are suites; other TOML is left alone."""
    (pytester.path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    for name in ("sftrace_config.toml", "suite.toml", "x.sftrace.toml", ".sftrace-suite.toml"):
        (pytester.path / name).write_text("this is = not [valid")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


FIXTURE_TEST = """
import asyncio

from sftrace.testing import assert_expectations, assert_not_called, assert_output

BUNDLE = "bundles/late.sftrace"  # relative to this file


def test_fixed_agent(sftrace_replay):
    result = sftrace_replay(BUNDLE, "{module}:fixed")
    assert_not_called(result, "refund")
    assert_output(result, {denied})


def test_buggy_agent(sftrace_replay):
    result = sftrace_replay(BUNDLE, "{module}:buggy")
    assert_expectations(result, output={denied})


def test_async_entrypoint_in_a_sync_test(sftrace_replay):
    result = sftrace_replay(BUNDLE, "{module}:afixed")
    assert_output(result, {denied})


def test_inside_a_running_loop(sftrace_replay):
    async def main():
        awaited = await sftrace_replay.arun(BUNDLE, "{module}:afixed")
        # the sync form also works inside a running loop (a worker thread runs it)
        nested = sftrace_replay(BUNDLE, "{module}:afixed")
        return awaited, nested

    for result in asyncio.run(main()):
        assert_output(result, {denied})
"""


def test_the_replay_fixture(pytester: pytest.Pytester, agent: str) -> None:
    """sftrace_replay finds bundles next to the test file, replays sync and async
    entrypoints, and failing assertions read well."""
    tests = pytester.mkdir("tests")
    (tests / "bundles").mkdir()
    (pytester.path / "bundles" / "late.sftrace").rename(tests / "bundles" / "late.sftrace")
    (tests / "test_refunds.py").write_text(FIXTURE_TEST.format(module=agent, denied=DENIED))
    result = _run(pytester, "tests")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_buggy_agent*",
            ">*assert_expectations(result, output=*",
            "E*AssertionError: FAIL: 1 error, 0 warnings, 0 info*",
            "E*error   OUTPUT_VALUE_CHANGED: output value changed at 1 path",
            '*$.decision: expected "denied", replayed "refunded"',
        ]
    )


def test_a_relative_bundle_path_is_the_test_files_first(
    pytester: pytest.Pytester, agent: str
) -> None:
    """A stale bundle of the same name in the working directory (bundles moved, an old
    copy left behind) must not be replayed instead of the one next to the test."""
    tests = pytester.mkdir("tests")
    (tests / "bundles").mkdir()
    shutil.copytree(pytester.path / "bundles" / "late.sftrace", tests / "bundles" / "late.sftrace")
    (pytester.path / "bundles" / "late.sftrace" / "spans.jsonl").write_text("not a bundle\n")
    (tests / "test_here.py").write_text(
        "from pathlib import Path\n\n"
        "def test_it(sftrace_replay):\n"
        f"    result = sftrace_replay('bundles/late.sftrace', '{agent}:buggy')\n"
        "    assert result.bundle.path == Path(__file__).parent / 'bundles' / 'late.sftrace'\n"
    )
    _run(pytester, "tests").assert_outcomes(passed=1)  # from the root: the stale one exists


def test_importing_the_plugin_is_cheap() -> None:
    """Loading the plugin (as pytest does in every session) imports no sftrace machinery,
    OpenTelemetry SDK or pydantic."""
    code = (
        "import sys, sftrace.pytest_plugin\n"
        "heavy = {'opentelemetry.sdk.trace', 'pydantic', 'orjson', 'sftrace._replay.run'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    """The installed package declares the plugin, so pytest loads it with no conftest."""
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="pytest11") if e.name == "sftrace"]
    assert entry.value == "sftrace.pytest_plugin"
    assert Path(entry.load().__file__).name == "pytest_plugin.py"
