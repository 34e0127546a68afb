"""Expectations: the Python assertion helpers and the JSON/TOML expectation documents."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sftrace
from regress_helpers import llm, play, record_steps, tool
from sftrace import Expectations, ReplayResult, load_expectations
from sftrace import testing as t

STEPS = [
    tool("lookup_order", {"id": "A-1"}, order_id="A-1", verbose=False),
    llm("planner-1", {"action": "refund"}, messages=["refund?"]),
    tool("issue_refund", {"ok": True}, order_id="A-1", amount=30),
    tool("issue_refund", {"ok": True}, order_id="A-1", amount=5),
]
OUTPUT = {"decision": "refunded", "total": 35, "reply": "Refunded 35 EUR."}


@pytest.fixture
def result(tmp_path: Path) -> ReplayResult:
    bundle = record_steps(tmp_path / "run.sftrace", STEPS, output=OUTPUT)
    return sftrace.replay_run(bundle, lambda: play(STEPS, OUTPUT))


PASSING: list[tuple[str, Callable[[ReplayResult], Any]]] = [
    ("called", lambda r: t.assert_called(r, "issue_refund")),
    ("called-llm-any", lambda r: t.assert_called(r, "llm")),
    ("called-llm-model", lambda r: t.assert_called(r, "fakellm/planner-1")),
    ("not-called", lambda r: t.assert_not_called(r, "send_email")),
    ("count", lambda r: t.assert_call_count(r, "issue_refund", 2)),
    ("with", lambda r: t.assert_called_with(r, "issue_refund", call=2, amount=5)),
    ("with-normalised", lambda r: t.assert_called_with(r, "issue_refund", amount=30.0)),
    ("arguments", lambda r: t.assert_arguments(r, "lookup_order", {"order_id": "A-1"})),
    ("order", lambda r: t.assert_order(r, "lookup_order", "llm", "issue_refund")),
    ("sequence", lambda r: t.assert_sequence(r, ["lookup_order", "llm", *["issue_refund"] * 2])),
    ("subsequence", lambda r: t.assert_sequence(r, ["lookup_order", "issue_refund"], strict=False)),
    ("max", lambda r: t.assert_max_calls(r, 4)),
    ("max-of", lambda r: t.assert_max_calls(r, 2, name="issue_refund")),
    ("output", lambda r: t.assert_output(r, {**OUTPUT, "total": 35.0})),
    ("output-text", lambda r: t.assert_output(r, {**OUTPUT, "reply": "We refunded you."})),
    (
        "output-ignored",
        lambda r: t.assert_output(r, {**OUTPUT, "total": 1}, ignore_paths=["total"]),
    ),
    ("status", lambda r: t.assert_status(r, "completed")),
    ("no-divergence", t.assert_no_divergence),
    ("same", t.assert_same_as_recorded),
    ("expectations", lambda r: t.assert_expectations(r, output=OUTPUT, max_calls=4)),
]

FAILING: list[tuple[str, Callable[[ReplayResult], Any], str]] = [
    ("called", lambda r: t.assert_called(r, "send_email"), "expected 'send_email' to be called"),
    (
        "not-called",
        lambda r: t.assert_not_called(r, "issue_refund"),
        "called 2 times (first: call 3 (tool issue_refund)",
    ),
    ("count", lambda r: t.assert_call_count(r, "issue_refund", 1), "called once, but it was"),
    (
        "with",
        lambda r: t.assert_called_with(r, "issue_refund", amount=31),
        "the 1st call of 'issue_refund' (call 3 (tool issue_refund)) had amount=30 (expected 31)",
    ),
    (
        "with-nth",
        lambda r: t.assert_called_with(r, "issue_refund", call=3, amount=1),
        "expected a 3rd call of 'issue_refund'",
    ),
    (
        "missing-argument",
        lambda r: t.assert_arguments(r, "lookup_order", {"customer": "x"}),
        "customer=<missing>",
    ),
    ("order", lambda r: t.assert_order(r, "issue_refund", "lookup_order"), "expected 'issue_ref"),
    ("sequence", lambda r: t.assert_sequence(r, ["lookup_order", "llm"]), "4 calls were made"),
    (
        "sequence-wrong",
        lambda r: t.assert_sequence(r, ["llm", "lookup_order"]),
        "call 1 is 'lookup_order' instead of 'llm'",
    ),
    (
        "subsequence",
        lambda r: t.assert_sequence(r, ["issue_refund", "lookup_order"], strict=False),
        "before running out",
    ),
    ("max", lambda r: t.assert_max_calls(r, 3), "expected at most 3 calls in all, but 4"),
    ("output", lambda r: t.assert_output(r, {**OUTPUT, "total": 30}), "$.total: expected 30"),
    ("status", lambda r: t.assert_status(r, "failed"), "expected the run to end failed"),
    (
        "expectations",
        lambda r: t.assert_expectations(r, not_called=["issue_refund"], max_calls=2),
        "EXPECTATION_FAILED",
    ),
]


@pytest.mark.parametrize("check", [c for _, c in PASSING], ids=[n for n, _ in PASSING])
def test_helpers_pass_when_the_run_meets_them(
    result: ReplayResult, check: Callable[[ReplayResult], Any]
) -> None:
    """Each helper accepts a run that does what it states."""
    check(result)


@pytest.mark.parametrize(
    ("check", "message"), [c[1:] for c in FAILING], ids=[c[0] for c in FAILING]
)
def test_helpers_raise_readable_assertion_errors(
    result: ReplayResult, check: Callable[[ReplayResult], Any], message: str
) -> None:
    """Each helper raises AssertionError saying what was expected and what happened."""
    with pytest.raises(AssertionError) as caught:
        check(result)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "check",
    [
        lambda r: t.assert_not_called(r, ["issue_refund"]),
        lambda r: t.assert_call_count(r, ["issue_refund"], 0),
        lambda r: t.assert_called(r, ["issue_refund"]),
        lambda r: t.assert_order(r, ["lookup_order", "issue_refund"]),
        lambda r: t.assert_called_with(r, "", amount=30),
        lambda r: t.assert_call_count(r, "issue_refund", -1),
    ],
    ids=["not-called", "count", "called", "order", "empty", "negative-count"],
)
def test_a_list_for_one_call_name_is_refused_not_passed(
    result: ReplayResult, check: Callable[[ReplayResult], Any]
) -> None:
    """A list where one name is asked for matches no call, so ``assert_not_called(r,
    ["issue_refund"])`` would pass whatever the agent did: it is a ConfigError."""
    with pytest.raises(
        sftrace.ConfigError, match=r"call names must be non-empty strings|integer >= 0"
    ):
        check(result)


def test_assertions_on_calls_fail_on_a_diverged_replay(tmp_path: Path) -> None:
    """A diverged replay stopped the agent where it left the recording: a check of its
    calls cannot pass on it. ``assert_not_called`` passed because the forbidden call,
    after the divergence, was never reached: a reintroduced bug went green."""
    bundle = record_steps(tmp_path / "run.sftrace", STEPS, output=OUTPUT)
    changed = [tool("lookup_order", {"id": "A-1"}, order_id="B-2", verbose=False)]
    diverged = sftrace.replay_run(bundle, lambda: play(changed, OUTPUT))
    for check in (
        lambda: t.assert_called(diverged, "issue_refund"),
        lambda: t.assert_not_called(diverged, "issue_refund"),
        lambda: t.assert_call_count(diverged, "issue_refund", 0),
        lambda: t.assert_max_calls(diverged, 10),
        lambda: t.assert_order(diverged, "lookup_order"),
    ):
        with pytest.raises(AssertionError, match="the replay diverged, so the calls the agent"):
            check()
    with pytest.raises(AssertionError, match="diverged from the recording"):
        t.assert_no_divergence(diverged)


def test_helpers_work_on_recorded_bundles(tmp_path: Path) -> None:
    """A recorded Bundle can be checked with the same helpers."""
    bundle = sftrace.load_bundle(record_steps(tmp_path / "run.sftrace", STEPS, output=OUTPUT))
    t.assert_call_count(bundle, "issue_refund", 2)
    t.assert_output(bundle, OUTPUT)


EXPECTATIONS_TOML = """
status = "completed"
output = { decision = "refunded", total = 35, reply = "Refunded 35 EUR." }
called = ["lookup_order"]
not_called = ["send_email"]
order = ["lookup_order", "issue_refund"]
sequence = ["lookup_order", "issue_refund"]
sequence_mode = "subsequence"
max_calls = 4

[counts]
issue_refund = 2

[[arguments]]
name = "issue_refund"
call = 2
args = { amount = 5 }
"""


def test_a_toml_document_loads_and_is_met(tmp_path: Path, result: ReplayResult) -> None:
    """Every kind of expectation can be written in TOML, and the replay meets them."""
    path = tmp_path / "expect.toml"
    path.write_text(EXPECTATIONS_TOML)
    expect = load_expectations(path)
    assert expect.counts == {"issue_refund": 2}
    assert expect.arguments[0].call == 2
    report = sftrace.compare(result.bundle, result, expect=expect)
    assert report.verdict == "pass", report.format()


def test_a_json_document_round_trips(tmp_path: Path) -> None:
    """to_dict() writes the document form; loading it back gives equal expectations."""
    expect = Expectations(
        output=None,
        not_called=("send_email",),
        counts={"a": 1},
        arguments=({"name": "a", "args": {"x": 1}},),  # type: ignore[arg-type]
        sequence=("a",),
        sequence_mode="subsequence",
    )
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(expect.to_dict()))
    assert load_expectations(path) == expect
    assert expect.has_output
    assert not Expectations().has_output


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param({"not_caled": ["x"]}, "did you mean 'not_called'", id="typo"),
        pytest.param({"called": "x"}, "called must be a list of call names", id="string"),
        pytest.param({"counts": {"x": -1}}, "counts['x'] must be an integer >= 0", id="count"),
        pytest.param({"status": "ok"}, "status must be one of", id="status"),
        pytest.param({"sequence_mode": "loose"}, "sequence_mode must be one of", id="mode"),
        pytest.param({"max_calls": True}, "max_calls must be an integer", id="bool"),
        pytest.param({"arguments": [{"name": "x"}]}, "needs 'name' and 'args'", id="arguments"),
        pytest.param({"arguments": [{"name": "x", "args": {}, "call": 0}]}, ">= 1", id="nth"),
        pytest.param({"order": ["a", "a"]}, "order must name each call once", id="order"),
    ],
)
def test_invalid_documents_name_the_file_and_the_key(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    """A bad expectation document is refused with the file and the offending key."""
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(document))
    with pytest.raises(sftrace.ConfigError) as caught:
        load_expectations(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        pytest.param("bad.toml", "status = ", "invalid TOML", id="toml"),
        pytest.param("bad.json", "{", "invalid JSON", id="json"),
        pytest.param("missing.json", None, "not found", id="missing"),
    ],
)
def test_unreadable_documents_are_config_errors(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    """Syntax errors and missing files are ConfigErrors naming the file."""
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(sftrace.ConfigError, match=message):
        load_expectations(path)


def test_an_expectation_naming_no_call_is_a_warning(tmp_path: Path) -> None:
    """``not_called = ["issue_refnd"]`` (a typo) held whatever the agent did, silently: the
    comparison now says the name matches no call of either run. A tool never called on
    purpose is named too, as a warning, not a failure."""
    bundle = record_steps(tmp_path / "run.sftrace", STEPS, output=OUTPUT)
    result = sftrace.replay_run(bundle, lambda: play(STEPS, OUTPUT))
    report = sftrace.compare(
        bundle,
        result,
        expect=sftrace.Expectations(not_called=["issue_refnd"], counts={"lookup_order": 1}),
    )
    assert report.passed
    (unknown,) = report.by_severity("warning")
    assert unknown.code.value == "EXPECTATION_UNKNOWN_NAME"
    assert "'issue_refnd'" in unknown.message
