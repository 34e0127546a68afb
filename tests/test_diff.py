"""The diff machinery: call alignment, JSON normalisation, and differences."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sftrace._model.jsonpath import JsonPath
from sftrace._regress.diff import MISSING, align, normalize, value_differences


def _lcs_length(a: list[int], b: list[int]) -> int:
    previous = [0] * (len(b) + 1)
    for item in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if item == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _check_pairs(a: list[Any], b: list[Any], pairs: list[tuple[int, int]]) -> None:
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(pairs))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 4), max_size=30),
    st.lists(st.integers(0, 4), max_size=30),
)
def test_alignment_is_a_longest_common_subsequence(a: list[int], b: list[int]) -> None:
    """The alignment matches equal items in order, as many as the longest common one."""
    alignment = align(a, b)
    _check_pairs(a, b, alignment.pairs)
    assert len(alignment.pairs) == _lcs_length(a, b)
    assert not alignment.approximate


@pytest.mark.parametrize(
    ("left", "right", "unmatched_left", "unmatched_right"),
    [
        pytest.param("abcdef", "abcXdef", "", "X", id="insertion"),
        pytest.param("abcdef", "abdef", "c", "", id="deletion"),
        pytest.param("abcdef", "abdcef", "c", "c", id="swap"),
        pytest.param("abc", "abc", "", "", id="equal"),
        pytest.param("", "ab", "", "ab", id="from-empty"),
        pytest.param("ab", "", "ab", "", id="to-empty"),
        pytest.param("xabc", "abc", "x", "", id="prefix-removed"),
        pytest.param("abc", "abcx", "", "x", id="suffix-added"),
    ],
)
def test_alignment_marks_only_the_changed_items(
    left: str, right: str, unmatched_left: str, unmatched_right: str
) -> None:
    """An insertion, deletion or swap leaves only the changed items unmatched."""
    pairs = align(list(left), list(right)).pairs
    matched_left = {i for i, _ in pairs}
    matched_right = {j for _, j in pairs}
    assert "".join(c for i, c in enumerate(left) if i not in matched_left) == unmatched_left
    assert "".join(c for j, c in enumerate(right) if j not in matched_right) == unmatched_right


def test_alignment_of_long_runs_trims_the_common_ends() -> None:
    """Two 20 000-call runs differing by one inserted call align exactly, one unmatched."""
    a = [f"call-{i}" for i in range(20_000)]
    b = [*a[:12_345], "inserted", *a[12_345:]]
    alignment = align(a, b)
    assert len(alignment.pairs) == 20_000
    assert not alignment.approximate


def test_alignment_beyond_the_edit_distance_cap_is_greedy_and_flagged() -> None:
    """Past the cap the alignment is still a valid common subsequence, marked approximate."""
    a = [i % 7 for i in range(200)]
    b = [i % 5 for i in range(200)]
    alignment = align(a, b, max_edit_distance=10)
    assert alignment.approximate
    _check_pairs(a, b, alignment.pairs)
    assert alignment.pairs


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param(2, 2.0, id="int-float"),
        pytest.param({"a": " hi "}, {"a": "hi"}, id="surrounding-whitespace"),
        pytest.param({"a": 1, "b": None}, {"a": 1}, id="none-key-vs-missing"),
        pytest.param([{"x": 1.0}], [{"x": 1, "y": None}], id="nested"),
    ],
)
def test_normalisation_makes_equivalent_values_equal(left: Any, right: Any) -> None:
    """2 == 2.0, surrounding whitespace and None-valued keys do not count as differences."""
    assert normalize(left) == normalize(right)
    assert value_differences(left, right)[0] == []


def test_normalisation_keeps_booleans_apart_from_numbers() -> None:
    """true is not 1 in JSON, so it is a difference (of type: a structure change)."""
    (difference,), _ = value_differences({"a": True}, {"a": 1})
    assert difference.path == "$.a"
    assert difference.kind == "structure"


@pytest.mark.parametrize(
    ("left", "right", "kind"),
    [
        pytest.param({"a": 1}, {"a": 2}, "value", id="number"),
        pytest.param({"a": "denied"}, {"a": "refunded"}, "value", id="token"),
        pytest.param({"a": "Sorry, no."}, {"a": "We cannot."}, "text", id="prose"),
        pytest.param({"a": 1}, {"a": "1"}, "structure", id="type"),
        pytest.param({"a": 1}, {}, "structure", id="removed-key"),
        pytest.param([1], [1, 2], "structure", id="added-item"),
    ],
)
def test_differences_are_classified(left: Any, right: Any, kind: str) -> None:
    """Each differing path is a structure, value or free-text change."""
    (difference,), _ = value_differences(left, right)
    assert difference.kind == kind


def test_differences_name_paths_with_both_values_and_stop_at_the_limit() -> None:
    """Paths read like $.items[1].id; the walk stops at the limit and says so."""
    (difference,), truncated = value_differences(
        {"items": [{"id": 1}, {"id": 2}]}, {"items": [{"id": 1}, {"id": 3}]}
    )
    assert (difference.path, difference.baseline, difference.candidate) == ("$.items[1].id", 2, 3)
    assert not truncated
    many, truncated = value_differences(list(range(10)), list(range(10, 20)), limit=4)
    assert len(many) == 4
    assert truncated


def test_a_missing_side_is_marked_missing() -> None:
    """A key present on one side only shows MISSING on the other."""
    (difference,), _ = value_differences({}, {"new": 1})
    assert difference.baseline is MISSING
    assert difference.to_dict()["missing"] == "baseline"


def test_ignored_differences_are_kept_and_marked() -> None:
    """A difference under an ignore pattern is still listed, with the pattern that matched."""
    found, _ = value_differences(
        {"id": 1, "at": "x"}, {"id": 2, "at": "y"}, ignore=[JsonPath.parse("at")]
    )
    assert [(d.path, d.ignored_by) for d in found] == [("$.at", "$.at"), ("$.id", None)]
