"""Reporting suite results: the one-line summary and the JUnit XML document."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path

from sftrace._model.text import pluralize
from sftrace._regress.findings import Severity
from sftrace._regress.suite import CaseResult

__all__ = ["junit_xml", "summary_line"]


def summary_line(results: Iterable[CaseResult]) -> str:
    """``3 passed, 1 failed`` (and ``, 1 error`` when cases could not run)."""
    counted = list(results)
    passed = sum(1 for result in counted if result.outcome == "passed")
    failed = sum(1 for result in counted if result.outcome == "failed")
    errors = sum(1 for result in counted if result.outcome == "error")
    line = f"{passed} passed, {failed} failed"
    if errors:
        line += f", {pluralize(errors, 'error')}"
    return line


def junit_xml(
    results: Iterable[CaseResult], invalid: Mapping[Path, str] | None = None
) -> ET.ElementTree:
    """A JUnit XML document: one ``testsuite`` per suite file, one ``testcase`` per case;
    a suite file that could not be loaded (``invalid``: its path -> why) is a
    ``testsuite`` of one ``testcase`` with an ``error``, so CI shows it rather than a
    missing or stale report."""
    by_suite: dict[Path, list[CaseResult]] = {}
    for result in results:
        by_suite.setdefault(result.case.suite_path, []).append(result)
    root = ET.Element("testsuites", name="sftrace")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for suite_path, suite_results in by_suite.items():
        failures = sum(1 for r in suite_results if r.outcome == "failed")
        errors = sum(1 for r in suite_results if r.outcome == "error")
        elapsed = sum(r.duration_s for r in suite_results)
        suite_element = ET.SubElement(
            root,
            "testsuite",
            name=suite_results[0].case.suite_name,
            tests=str(len(suite_results)),
            failures=str(failures),
            errors=str(errors),
            skipped="0",
            time=f"{elapsed:.3f}",
            file=str(suite_path),
        )
        for result in suite_results:
            _testcase(suite_element, result, suite_path)
        totals["tests"] += len(suite_results)
        totals["failures"] += failures
        totals["errors"] += errors
        totals["time"] += elapsed
    for suite_path, reason in (invalid or {}).items():
        suite_element = ET.SubElement(
            root,
            "testsuite",
            name=suite_path.name,
            tests="1",
            failures="0",
            errors="1",
            skipped="0",
            time="0.000",
            file=str(suite_path),
        )
        case_element = ET.SubElement(
            suite_element,
            "testcase",
            classname=suite_path.name,
            name="load suite",
            file=str(suite_path),
            time="0.000",
        )
        error = ET.SubElement(case_element, "error", message=reason, type="invalid-suite")
        error.text = reason
        totals["tests"] += 1
        totals["errors"] += 1
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    return ET.ElementTree(root)


def _testcase(parent: ET.Element, result: CaseResult, suite_path: Path) -> None:
    """One ``testcase`` element, with its ``failure`` or ``error`` child."""
    case_element = ET.SubElement(
        parent,
        "testcase",
        classname=result.case.suite_name,
        name=result.case.name,
        file=str(suite_path),
        time=f"{result.duration_s:.3f}",
    )
    if result.outcome == "failed":
        assert result.report is not None
        errors_found = result.report.by_severity(Severity.ERROR)
        first = errors_found[0].message if errors_found else "behaviour changed"
        failure = ET.SubElement(
            case_element,
            "failure",
            message=f"{pluralize(len(errors_found), 'error finding')}; first: {first}",
            type="regression",
        )
        failure.text = result.failure_text()
    elif result.outcome == "error":
        error = ET.SubElement(case_element, "error", message=result.error or "", type="case-error")
        error.text = result.failure_text()
