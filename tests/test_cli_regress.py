"""``sftrace diff`` and ``sftrace test``: output, exit codes 0/1/2, JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from regress_helpers import DENIED, invoke, llm, record_agent, record_steps, tool, write_agent

STEPS = [tool("lookup", {"days": 45}, order_id="A-1"), llm("m-1", {"ok": True}, q="refund?")]


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A recorded run, the same behaviour recorded again, and a run with one more call."""
    same_a = record_steps(tmp_path / "a.sftrace", STEPS, output={"decision": "x"})
    same_b = record_steps(tmp_path / "b.sftrace", STEPS, output={"decision": "x"})
    extra = [*STEPS, tool("refund", {"ok": True}, order_id="A-1")]
    changed = record_steps(tmp_path / "c.sftrace", extra, output={"decision": "x"})
    return same_a, same_b, changed


def test_diff_of_equivalent_runs_exits_0(runs: tuple[Path, Path, Path]) -> None:
    """Two recordings of the same behaviour: PASS, exit 0."""
    result = invoke("diff", runs[0], runs[1])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("PASS: 0 errors")


def test_diff_of_changed_runs_exits_1_naming_the_call(runs: tuple[Path, Path, Path]) -> None:
    """One more call: exit 1, one UNEXPECTED_CALL naming call 3."""
    result = invoke("diff", runs[0], runs[2])
    assert result.exit_code == 1
    assert "UNEXPECTED_CALL: call 3 (tool refund)" in result.stdout


def test_diff_json_is_the_report(runs: tuple[Path, Path, Path]) -> None:
    """--json prints Report.to_dict() and nothing else on stdout."""
    result = invoke("diff", runs[0], runs[2], "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["verdict"] == "fail"
    assert [f["code"] for f in document["findings"]] == ["UNEXPECTED_CALL"]


def test_diff_policy_options(runs: tuple[Path, Path, Path]) -> None:
    """--severity CODE=LEVEL downgrades a finding; the verdict follows."""
    result = invoke("diff", runs[0], runs[2], "--severity", "UNEXPECTED_CALL=warning")
    assert result.exit_code == 0, result.output
    assert "warning UNEXPECTED_CALL" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["missing.sftrace", "{a}"], "bundle not found", id="missing-bundle"),
        pytest.param(["{a}", "{a}", "--severity", "NOPE=error"], "unknown finding code", id="code"),
        pytest.param(["{a}", "{a}", "--severity", "oops"], "CODE=LEVEL", id="severity-form"),
        pytest.param(["{a}", "{a}", "--ignore", "a..b"], "invalid ignore path", id="ignore"),
    ],
)
def test_diff_bad_input_exits_2_with_one_line(
    runs: tuple[Path, Path, Path], args: list[str], message: str
) -> None:
    """Bad input: one line on stderr naming the problem, exit 2, no traceback."""
    result = invoke("diff", *(arg.format(a=runs[0]) for arg in args))
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, str]:
    """A suite file judging the fixed agent against its recorded buggy run."""
    module = write_agent(tmp_path)
    (tmp_path / "bundles").mkdir()
    record_agent(tmp_path, module, tmp_path / "bundles" / "late.sftrace")
    (tmp_path / "denied.json").write_text(json.dumps(DENIED))
    path = tmp_path / "refunds.sftrace-suite.toml"
    path.write_text(
        f"""
name = "refunds"
entrypoint = "{module}:fixed"

[[cases]]
name = "late refund is denied"
bundle = "bundles/late.sftrace"
expected_output = "denied.json"
[cases.expect]
not_called = ["refund"]
"""
    )
    return path, module


def test_all_cases_passing_exits_0(suite: tuple[Path, str]) -> None:
    """Every case passes: a PASS line per case, the summary line last, exit 0."""
    result = invoke("test", suite[0])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("PASS  refunds::late refund is denied (")
    assert lines[-1] == "1 passed, 0 failed"


def test_suites_are_found_in_the_working_directory(suite: tuple[Path, str]) -> None:
    """With no argument, suite files under the working directory are run."""
    result = invoke("test")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"


def test_a_regression_exits_1_with_the_error_findings(suite: tuple[Path, str]) -> None:
    """Against the buggy agent: FAIL with the error findings, exit 1."""
    result = invoke("test", suite[0], "--entrypoint", f"{suite[1]}:buggy")
    assert result.exit_code == 1
    assert "FAIL  refunds::late refund is denied" in result.stdout
    assert "EXPECTATION_FAILED: expected 'refund' not to be called" in result.stdout
    assert '$.decision: expected "denied", replayed "refunded"' in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_a_case_that_cannot_run_exits_2(suite: tuple[Path, str]) -> None:
    """An unimportable entrypoint: ERROR with the reason, exit 2."""
    result = invoke("test", suite[0], "--entrypoint", "no_such_agent_module:run")
    assert result.exit_code == 2
    assert "ERROR refunds::late refund is denied" in result.stdout
    assert "no_such_agent_module" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "0 passed, 0 failed, 1 error"


def test_a_broken_suite_exits_2_before_any_case_runs(suite: tuple[Path, str]) -> None:
    """One invalid suite: its error (file and case) on stderr, no case run, exit 2."""
    broken = suite[0].with_name("broken.sftrace-suite.toml")
    broken.write_text('entrypoint = "m:f"\n[[cases]]\nname = "x"\nbundle = "nope.sftrace"\n')
    result = invoke("test", suite[0], broken)
    assert result.exit_code == 2
    assert f"{broken}: case 'x': bundle" in result.stderr
    assert "PASS" not in result.stdout
    assert "passed" not in result.stdout


def test_no_suites_found_exits_2(tmp_path: Path) -> None:
    """Nothing to run is bad input, not a pass."""
    result = invoke("test", tmp_path)
    assert result.exit_code == 2
    assert "no suite files found" in result.stderr


def test_junit_xml_is_written(suite: tuple[Path, str], tmp_path: Path) -> None:
    """--junit-xml writes valid JUnit XML with the failure's findings."""
    target = tmp_path / "reports" / "junit.xml"
    result = invoke("test", suite[0], "-e", f"{suite[1]}:buggy", "--junit-xml", target)
    assert result.exit_code == 1
    root = ET.parse(target).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "1", "1")
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert "EXPECTATION_FAILED" in (failure.text or "")


def test_junit_xml_names_a_suite_that_could_not_be_loaded(
    suite: tuple[Path, str], tmp_path: Path
) -> None:
    """An invalid suite stops the run (exit 2), and the JUnit report says why instead of
    being missing (or left stale from an earlier run) where CI looks for it."""
    broken = suite[0].with_name("broken.sftrace-suite.toml")
    broken.write_text('entrypoint = "x:y"\n[[cases]]\nnme = "typo"\n')
    target = tmp_path / "junit.xml"
    target.write_text("<stale/>")
    result = invoke("test", suite[0], broken, "--junit-xml", target)
    assert result.exit_code == 2
    root = ET.parse(target).getroot()
    assert (root.tag, root.get("tests"), root.get("errors")) == ("testsuites", "1", "1")
    error = root.find("testsuite/testcase/error")
    assert error is not None
    assert error.get("type") == "invalid-suite"
    assert "broken.sftrace-suite.toml" in (error.get("message") or "")


def test_json_results(suite: tuple[Path, str]) -> None:
    """--json prints the results document on stdout and the summary on stderr."""
    result = invoke("test", suite[0], "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["summary"] == {"passed": 1, "failed": 0, "errors": 0, "total": 1}
    (case,) = document["cases"]
    assert (case["case"], case["outcome"], case["report"]["verdict"]) == (
        "late refund is denied",
        "passed",
        "pass",
    )
    assert result.stderr.strip() == "1 passed, 0 failed"


def test_a_report_that_cannot_be_written_is_refused_before_any_case_runs(
    suite: tuple[Path, str], tmp_path: Path
) -> None:
    """--junit-xml or --html where nothing can be written: one line naming the option,
    exit 2, before the suite runs (it ran to the end, then failed writing)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for option, target in (("--junit-xml", blocker / "j.xml"), ("--html", blocker / "pages")):
        result = invoke("test", suite[0], option, target)
        assert result.exit_code == 2, result.output
        assert f"sftrace: error: {option} " in result.stderr
        assert "PASS" not in result.stdout
