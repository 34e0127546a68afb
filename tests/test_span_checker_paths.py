"""The span checker's fast path for plain lines accepts only what its full check accepts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sftrace import record, trace_tool
from sftrace._bundle.checks import SpanChecker


@trace_tool
def fetch(item: str) -> dict[str, Any]:
    return {"item": item, "price": 12, "tags": ["a", "b"]}


@pytest.fixture(scope="module")
def recorded_lines(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path: Path = tmp_path_factory.mktemp("checker") / "run.sftrace"
    with record("checker", output=path):
        fetch("x")
        fetch("y")
    return [orjson.loads(line) for line in (path / "spans.jsonl").read_bytes().splitlines()]


def _checkers(lines: list[dict[str, Any]]) -> SpanChecker:
    """A checker that has accepted the run span and the first call, as a loader has."""
    checker = SpanChecker(lines[0]["traceId"])
    for span in lines[:2]:
        problems, attributes = checker.check(span)
        assert problems == []
        checker.accept(span, attributes)
    return checker


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=24),
    st.sampled_from(
        [
            "",
            "0",
            "9223372036854775807",
            "9223372036854775808",
            "-1",
            "\uff11\uff12",
            "00000000000000001",
            "abcdef0123456789",
            "ABCDEF0123456789",
            "run",
            "tool",
            "{}",
            "{not json",
        ]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["stringValue", "intValue", "boolValue"]), st.text()),
)
_FIELDS = [
    "traceId",
    "spanId",
    "parentSpanId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "status",
    "attributes",
    "events",
    "links",
]


@st.composite
def _mutations(draw: st.DrawFn) -> list[tuple[str, Any, Any]]:
    """Changes to a span: a field set to junk or removed, an attribute's key or value
    set to junk, an attribute value wrapper set to junk or removed."""
    changes = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(["field", "drop", "key", "value", "wrapper", "item"]))
        target = (
            draw(st.sampled_from(_FIELDS))
            if where in ("field", "drop")
            else draw(st.integers(min_value=0, max_value=9))
        )
        changes.append((where, target, draw(_JUNK)))
    return changes


def _apply(span: dict[str, Any], changes: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    span = copy.deepcopy(span)
    for where, target, junk in changes:
        items = span.get("attributes")
        if where == "field":
            span[target] = junk
        elif where == "drop":
            span.pop(target, None)
        elif isinstance(items, list) and items:
            item = items[target % len(items)]
            if not isinstance(item, dict):
                continue
            if where == "item":
                items[target % len(items)] = junk
            elif where == "key":
                item["key"] = junk
            elif where == "wrapper":
                item["value"] = junk
            elif isinstance(item.get("value"), dict):
                value = item["value"]
                value[next(iter(value), "stringValue")] = junk
    return span


@pytest.mark.parametrize("values", [True, False])
def test_plain_lines_take_the_fast_path(recorded_lines: list[dict[str, Any]], values: bool) -> None:
    """The lines sftrace writes are checked by the fast path, with the full check's result."""
    checker = _checkers(recorded_lines)
    span = recorded_lines[2]
    problems, full = checker.check(span, values=values)
    fast = checker.take_plain(span, values)
    assert problems == []
    assert fast is not None
    assert fast == full
    span_id = span["spanId"]  # accepted: its span id and sequence number are remembered
    assert checker.check(span, values=values)[0] == [
        f"duplicate spanId {span_id}",
        f"span {span_id}: duplicate sftrace.seq 2",
    ]


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=_mutations(), values=st.booleans())
def test_the_fast_path_accepts_only_what_the_full_check_accepts(
    recorded_lines: list[dict[str, Any]], changes: list[tuple[str, Any, Any]], values: bool
) -> None:
    """Whatever the damage, a span the fast path accepts has no problem for the full
    check, and the same decoded attributes."""
    checker = _checkers(recorded_lines)
    span = _apply(recorded_lines[2], changes)
    before = (dict(checker.parents), set(checker.seqs))
    problems, full = checker.check(span, values=values)  # check() remembers nothing
    fast = checker.take_plain(span, values)
    if fast is None:
        assert (checker.parents, checker.seqs) == before  # refused: nothing remembered
        return
    assert problems == []
    assert fast == full


@pytest.mark.parametrize("junk", [float("inf"), float("-inf"), float("nan")])
def test_a_value_no_integer_can_hold_is_a_problem_not_a_crash(
    recorded_lines: list[dict[str, Any]], junk: float
) -> None:
    """An ``intValue`` of infinity (a span built in memory; JSON has none) raised
    OverflowError out of the full check, where the fast path refused it."""
    checker = _checkers(recorded_lines)
    span = copy.deepcopy(recorded_lines[2])
    span["attributes"].append({"key": "extra", "value": {"intValue": junk}})
    problems, _ = checker.check(span)
    assert any("malformed value" in problem for problem in problems), problems
    assert checker.take_plain(span, False) is None
