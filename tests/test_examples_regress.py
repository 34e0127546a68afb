"""The refund and booking examples: their suites catch the recorded bug, pass on the fix,
and their record scripts regenerate the committed bundles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import sftrace
from sftrace import load_suite

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CASES = {
    # example: (suite file, buggy entrypoint, the case that catches the bug)
    "refund_agent": (
        "refunds.sftrace-suite.toml",
        "refund_agent:handle",
        "refund outside the 30-day window is denied",
    ),
    "booking_agent": (
        "booking.sftrace-suite.toml",
        "booking_agent:handle",
        "a sold-out fare is not retried and alternatives are offered",
    ),
}


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.mark.parametrize("example", sorted(CASES))
def test_the_suite_passes_on_the_fixed_agent(example: str) -> None:
    """Every case of the example's suite passes against the fixed agent (its default)."""
    suite = load_suite(EXAMPLES / example / CASES[example][0])
    results = suite.run()
    assert [r.outcome for r in results] == ["passed"] * len(results), [
        r.failure_text() for r in results if r.outcome != "passed"
    ]


@pytest.mark.parametrize("example", sorted(CASES))
def test_the_suite_catches_the_recorded_bug(example: str) -> None:
    """Against the buggy agent the bug's case fails (with error findings); the case
    pinning correct behaviour still passes."""
    suite_file, buggy, bug_case = CASES[example]
    results = load_suite(EXAMPLES / example / suite_file).run(entrypoint=buggy)
    outcomes = {r.case.name: r.outcome for r in results}
    assert outcomes.pop(bug_case) == "failed"
    assert set(outcomes.values()) == {"passed"}
    (failed,) = [r for r in results if r.case.name == bug_case]
    assert failed.report is not None
    assert failed.report.by_severity("error")


def _record_script(example: str) -> object:
    path = EXAMPLES / example / "record.py"
    spec = importlib.util.spec_from_file_location(f"_record_{example}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", sorted(CASES))
def test_record_script_regenerates_the_committed_bundles(
    example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Re-recording gives bundles that behave exactly as the committed ones."""
    script = _record_script(example)
    assert script.main(["--out", str(tmp_path)]) == 0  # type: ignore[attr-defined]
    committed = sorted((EXAMPLES / example / "bundles").glob("*.sftrace"))
    assert [p.name for p in committed] == sorted(p.name for p in tmp_path.glob("*.sftrace"))
    for bundle in committed:
        assert sftrace.validate_bundle(bundle, verify_integrity=True) == []
        report = sftrace.diff(bundle, tmp_path / bundle.name)
        assert report.findings == (), report.format()
    assert "recorded" in capsys.readouterr().out


def test_the_booking_failure_minimizes_to_the_retry_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/regression-tests.md, "Minimize a failing run": neither the search results nor
    the model's reasons are needed to crash the buggy booking agent; the retries are."""
    monkeypatch.chdir(EXAMPLES / "booking_agent")
    result = sftrace.minimize(
        "bundles/sold_out_fare.sftrace", "booking_agent:handle", output=tmp_path / "min.sftrace"
    )
    assert result.verified
    assert result.reproduces == (
        "RuntimeError: booking failed after 3 attempts: fare TP204 is no longer available"
    )
    search, planner, *bookings = result.bundle.calls
    assert search.output == []
    assert planner.input == {"flights": [], "task": "Book a flight to Lisbon"}
    assert planner.output == {"flight_id": ""}
    assert [call.error.type for call in bookings if call.error] == ["ValueError"] * 3
    assert (result.output_bytes_before, result.output_bytes_after) == (310, 18)
