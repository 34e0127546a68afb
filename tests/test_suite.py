"""Regression suites: loading and validation, running cases, JUnit XML and discovery."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import sftrace
from regress_helpers import DENIED, record_agent, write_agent
from sftrace import SuiteError, load_suite
from sftrace._regress.junit import junit_xml, summary_line
from sftrace._regress.suite import discover_suites


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    """A directory with the agent module, its recorded buggy run and an expected output."""
    module = write_agent(tmp_path)
    (tmp_path / "bundles").mkdir()
    record_agent(tmp_path, module, tmp_path / "bundles" / "late.sftrace")
    (tmp_path / "denied.json").write_text(json.dumps(DENIED))
    return tmp_path, module


def _suite(directory: Path, text: str, name: str = "refunds.sftrace-suite.toml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def _valid(module: str, function: str = "fixed") -> str:
    return f"""
name = "refunds"
entrypoint = "{module}:{function}"

[policy]
ignore_paths = ["generated_at"]

[[cases]]
name = "late refund is denied"
bundle = "bundles/late.sftrace"
expected_output = "denied.json"

[cases.expect]
not_called = ["refund"]

[cases.policy]
severity_overrides = {{ OUTPUT_TEXT_CHANGED = "error" }}

[[cases]]
name = "behaves as recorded"
bundle = "bundles/late.sftrace"
"""


def test_a_valid_suite_loads_with_merged_policies_and_expectations(
    project: tuple[Path, str],
) -> None:
    """Cases get the suite entrypoint, a policy extending the suite's, and expectations
    from the expected output file and the inline table."""
    directory, module = project
    suite = load_suite(_suite(directory, _valid(module)))
    assert suite.name == "refunds"
    first, second = suite.cases
    assert first.entrypoint == f"{module}:fixed"
    assert first.policy.ignore_paths == ("$.generated_at",)
    assert first.policy.severity_overrides == {"OUTPUT_TEXT_CHANGED": "error"}
    assert first.expectations is not None
    assert first.expectations.output == DENIED
    assert first.expectations.not_called == ("refund",)
    assert second.expectations is None
    assert first.id == "refunds::late refund is denied"


def test_cases_pass_fail_and_error(project: tuple[Path, str]) -> None:
    """Fixed agent: both cases pass (the pinned one fails: behaviour changed); buggy:
    the expectation case fails; an unimportable entrypoint is an error."""
    directory, module = project
    suite = load_suite(_suite(directory, _valid(module)))
    fixed = {r.case.name: r.outcome for r in suite.run()}
    assert fixed == {"late refund is denied": "passed", "behaves as recorded": "failed"}
    buggy = {r.case.name: r.outcome for r in suite.run(entrypoint=f"{module}:buggy")}
    assert buggy == {"late refund is denied": "failed", "behaves as recorded": "passed"}
    (error, _) = suite.run(entrypoint="no_such_module_xyz:run")
    assert error.outcome == "error"
    assert "no_such_module_xyz" in (error.error or "")


def test_a_failed_case_reports_the_findings(project: tuple[Path, str]) -> None:
    """The failure text lists the error findings of the case."""
    directory, module = project
    suite = load_suite(_suite(directory, _valid(module, "buggy")))
    result = suite.cases[0].run()
    assert result.outcome == "failed"
    text = result.failure_text()
    assert "EXPECTATION_FAILED: expected 'refund' not to be called" in text
    assert '$.decision: expected "denied", replayed "refunded"' in text


def test_an_agent_that_crashes_is_a_failed_case_not_an_error(project: tuple[Path, str]) -> None:
    """The agent raising is a behaviour (a regression), not a case that could not run."""
    directory, module = project
    suite = load_suite(_suite(directory, _valid(module, "explode")))
    result = suite.cases[0].run()
    assert result.outcome == "failed"
    assert "RuntimeError: the agent crashed" in result.failure_text()


LATE = 'bundle = "bundles/late.sftrace"'

CHECKED_AGENT = """
import {module} as base
from sftrace import trace_tool

CHECKS = []


@trace_tool
def policy_check(days):
    CHECKS.append(days)
    return {{"allowed": days <= 30}}


def handle(request):
    order = base.lookup(request["order_id"])
    if not policy_check(order["days"])["allowed"]:
        return {{"decision": "denied", "order_id": order["order_id"]}}
    base.refund(order["order_id"])
    return {{"decision": "refunded", "order_id": order["order_id"]}}
"""


def test_a_suite_with_on_miss_live_passes_a_fix_that_adds_a_call(
    project: tuple[Path, str],
) -> None:
    """The fix adds a policy check; with on_miss = "live" and the check allowed to run, the
    case passes; a case that sets on_miss = "error" diverges."""
    directory, module = project
    (directory / f"{module}_checked.py").write_text(CHECKED_AGENT.format(module=module))
    text = f"""
entrypoint = "{module}_checked:handle"
on_miss = "live"
allow_live_tools = ["policy_check"]

[[cases]]
name = "late refund is denied after the check"
bundle = "bundles/late.sftrace"
expected_output = "denied.json"
expect = {{ not_called = ["refund"], called = ["policy_check"] }}

[[cases]]
name = "frozen only"
bundle = "bundles/late.sftrace"
on_miss = "error"
allow_live_tools = []
expected_output = "denied.json"
"""
    suite = load_suite(_suite(directory, text))
    live, frozen = suite.cases
    assert (live.options.on_miss, live.options.allow_live_tools) == ("live", ("policy_check",))
    assert frozen.options.on_miss == "error"
    results = {r.case.name: r for r in suite.run()}
    passed = results["late refund is denied after the check"]
    assert passed.outcome == "passed", passed.failure_text()
    assert passed.replay is not None
    assert [m.action for m in passed.replay.matched] == ["substituted", "live"]
    assert results["frozen only"].outcome == "failed"


def test_suite_tiers_and_match_ignore_reach_the_replay(project: tuple[Path, str]) -> None:
    """A case may match a changed tool input in the relaxed tier; the suite's tiers apply
    to cases that set none, and a case's own value replaces the suite's."""
    directory, module = project
    text = f"""
entrypoint = "{module}:wrong_order"
tiers = ["exact"]

[[cases]]
name = "strict"
bundle = "bundles/late.sftrace"
expect = {{ not_called = ["refund"] }}

[[cases]]
name = "relaxed"
bundle = "bundles/late.sftrace"
tiers = ["exact", "normalized", "relaxed"]
expect = {{ not_called = ["refund"] }}
[cases.match_ignore]
lookup = ["order_id"]
"""
    suite = load_suite(_suite(directory, text))
    strict, relaxed = suite.cases
    assert strict.options.tiers == ("exact",)
    assert relaxed.options.tiers == ("exact", "normalized", "relaxed")
    assert [str(p) for p in relaxed.options.match_ignore["lookup"]] == ["$.order_id"]
    outcomes = {r.case.name: r for r in suite.run()}
    assert outcomes["strict"].outcome == "failed"
    assert "REPLAY_DIVERGED" in outcomes["strict"].failure_text()
    assert outcomes["relaxed"].outcome == "passed"
    replay = outcomes["relaxed"].replay
    assert replay is not None
    assert [m.tier for m in replay.matched] == ["relaxed"]


def test_a_case_that_passes_with_warnings_says_so_on_its_pass_line(
    project: tuple[Path, str],
) -> None:
    """`sftrace test`: a case passed through a relaxed match is not shown like an exact
    one: its PASS line counts the warnings, and each is listed."""
    from click.testing import CliRunner

    from sftrace._cli.main import cli
    from sftrace._cli.regress import register

    directory, module = project
    (directory / "looks_up_another.py").write_text(
        f"import {module} as base\n\n\ndef handle(request):\n"
        f"    order = base.lookup('B-9')  # the recorded answer is A-1's\n"
        f"    base.refund(order['order_id'])\n"
        f"    return {{'decision': 'refunded', 'order_id': order['order_id']}}\n"
    )
    text = """
entrypoint = "looks_up_another:handle"

[[cases]]
name = "relaxed"
bundle = "bundles/late.sftrace"
tiers = ["exact", "normalized", "relaxed"]
[cases.match_ignore]
lookup = ["order_id"]
"""
    register(cli)
    result = CliRunner().invoke(cli, ["test", str(_suite(directory, text))])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("PASS  refunds::relaxed  0 errors, 1 warning (")
    assert lines[1].strip().startswith("CALL_INPUT_RELAXED: ")


BROKEN = [
    pytest.param("cases = 3", None, "no cases", id="no-cases"),
    pytest.param('nme = "x"\n[[cases]]\nname = "a"', None, "did you mean 'name'", id="suite-key"),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"', "a", "no entrypoint", id="entry"
    ),
    pytest.param('entrypoint = "nocolon"\n[[cases]]\nname = "a"', None, "module:function", id="ep"),
    pytest.param('[[cases]]\nbundle = "b"', None, "cases[1] needs a non-empty 'name'", id="name"),
    pytest.param(
        '[[cases]]\nnme = "a"\nbundle = "b"', "cases[1]", "did you mean 'name'", id="name-typo"
    ),
    pytest.param(
        '[[cases]]\nname = "refunds::late"\nbundle = "b"', None, "holds '::'", id="name-colons"
    ),
    pytest.param(
        '[[cases]]\nname = "two\\nlines"\nbundle = "b"', None, "control character", id="name-nl"
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundel = "b"', "a", "did you mean 'bundle'", id="case-key"
    ),
    pytest.param('[[cases]]\nname = "a"', "a", "missing 'bundle'", id="no-bundle"),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "nope.sftrace"', "a", "bundle not found", id="bundle"
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\nexpected_output = "x.json"',
        "a",
        "expected_output: expected output file",
        id="output-file",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\n[cases.expect]\ncaled = ["x"]',
        "a",
        "did you mean 'called'",
        id="expect-key",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\nexpected_output = "denied.json"'
        "\n[cases.expect]\noutput = 1",
        "a",
        "set it in one place",
        id="output-twice",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\n[cases.policy]\n'
        'severity_overrides = { NOPE = "error" }',
        "a",
        "unknown finding code 'NOPE'",
        id="policy-code",
    ),
    pytest.param(
        '[policy]\nignore_paths = ["a..b"]\n[[cases]]\nname = "a"',
        None,
        "invalid ignore path",
        id="policy-path",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\nmatch = "fuzzy"',
        "a",
        "invalid match='fuzzy'",
        id="match",
    ),
    pytest.param(
        'tiers = ["exact", "fuzzy"]\n[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"',
        None,
        "unknown match tier 'fuzzy'",
        id="tiers",
    ),
    pytest.param(
        'on_miss = "retry"\n[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"',
        None,
        "invalid on_miss='retry'",
        id="on-miss",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\nallow_live_tools = ["x"]',
        "a",
        "needs mode='live' or on_miss='live'",
        id="allow-live-tools",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\ntiers = "exact"',
        "a",
        "tiers must be a list",
        id="tiers-type",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\n'
        '[cases.match_ignore]\nlookup = ["a..b"]',
        "a",
        "invalid match_ignore['lookup'] path",
        id="match-ignore",
    ),
    pytest.param(
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"\n'
        '[[cases]]\nname = "a"\nbundle = "bundles/late.sftrace"',
        "a",
        "duplicate case name",
        id="duplicate",
    ),
    pytest.param("entrypoint = ", None, "invalid TOML", id="toml"),
]


@pytest.mark.parametrize(("body", "case", "message"), BROKEN)
def test_a_broken_suite_is_one_error_naming_the_file_and_case(
    project: tuple[Path, str], body: str, case: str | None, message: str
) -> None:
    """Every problem raises one SuiteError whose message names the file and the case."""
    directory, module = project
    if "entrypoint" not in body.split("[[cases]]")[0] and "no entrypoint" not in message:
        body = f'entrypoint = "{module}:fixed"\n{body}'
    path = _suite(directory, body)
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    error = caught.value
    assert message in str(error)
    assert str(error).startswith(str(path))
    assert error.path == str(path)
    assert error.case == case
    if case is not None:
        assert f"case {case!r}" in str(error)


def test_junit_xml_has_a_testcase_per_case_with_failures(project: tuple[Path, str]) -> None:
    """The JUnit document counts tests and failures and carries the failure text."""
    directory, module = project
    results = load_suite(_suite(directory, _valid(module, "buggy"))).run()
    results += load_suite(_suite(directory, _valid("no_such_mod_q"), "b.sftrace-suite.toml")).run()
    path = directory / "junit.xml"
    junit_xml(results).write(path, encoding="utf-8", xml_declaration=True)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "2")
    first = root.find("testsuite")
    assert first is not None
    assert first.get("name") == "refunds"
    failed = first.find("testcase[@name='late refund is denied']/failure")
    assert failed is not None
    assert "EXPECTATION_FAILED" in (failed.text or "")
    assert len(root.findall(".//testcase/error")) == 2
    assert summary_line(results) == "1 passed, 1 failed, 2 errors"


def test_summary_line_form() -> None:
    """The summary line is exactly 'N passed, N failed' when nothing errored."""
    assert summary_line([]) == "0 passed, 0 failed"


def test_discovery_finds_only_suite_files(tmp_path: Path) -> None:
    """Directories are searched for *.sftrace-suite.toml only, skipping hidden dirs and
    virtual environments; explicit files are taken as given."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.sftrace-suite.toml").write_text("")
    (tmp_path / "a" / "pyproject.toml").write_text("")
    (tmp_path / "a" / ".sftrace-suite.toml").write_text("")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.sftrace-suite.toml").write_text("")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("")
    (tmp_path / "env" / "v.sftrace-suite.toml").write_text("")
    explicit = tmp_path / "other.toml"
    assert discover_suites([tmp_path, explicit]) == [
        tmp_path / "a" / "x.sftrace-suite.toml",
        explicit,
    ]


def test_agents_whose_modules_share_a_name_are_not_confused(tmp_path: Path) -> None:
    """Two suites, each with its own ``agent.py``, run in one process: the second case
    got the first directory's module from Python's cache and judged that agent (the
    canary's regression passed). It is now an error naming both files (a copy with the
    same text is the same agent, and runs)."""
    import uuid

    module = f"same_name_agent_{uuid.uuid4().hex[:8]}"
    source = (
        "from sftrace import trace_tool\n\n"
        "@trace_tool\n"
        "def lookup(order_id: str) -> dict:\n"
        "    return {'status': 'shipped'}\n\n"
        "def handle(request):\n"
        "    return {'answer': lookup(request['id'])['status']}\n"
    )
    suites = []
    for name in ("stable", "canary"):
        directory = tmp_path / name
        directory.mkdir()
        regression = source.replace("['status']", "['status'] and 'lost'")
        (directory / f"{module}.py").write_text(source if name == "stable" else regression)
        with sftrace.record("a", output=directory / "run.sftrace", run_input={"id": "A1"}) as s:
            s.set_output({"answer": "shipped"})
            s.record_tool_call("lookup", {"order_id": "A1"}, result={"status": "shipped"})
        suites.append(
            _suite(
                directory,
                f'entrypoint = "{module}:handle"\n'
                '[[cases]]\nname = "run"\nbundle = "run.sftrace"\n',
                name=f"{name}.sftrace-suite.toml",
            )
        )
    try:
        (stable,) = load_suite(suites[0]).run()
        (canary,) = load_suite(suites[1]).run()
    finally:
        sys.modules.pop(module, None)
    assert stable.outcome == "passed", stable.failure_text()
    assert canary.outcome == "error"
    assert canary.error is not None
    assert f"the entrypoint module '{module}' was already imported from" in canary.error
    assert str(tmp_path / "stable") in canary.error
    assert str(tmp_path / "canary") in canary.error
