"""The shrinker behind ``minimize``: chunks of items and members, then strings, in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sftrace._regress.shrink import Shrinker


def shrink(
    values: list[Any], keep: Callable[[list[Any]], bool], used: set[int] | None = None
) -> tuple[list[Any], list[list[Any]]]:
    """Drive a shrinker with ``keep`` as the judge; the result and every proposal."""
    shrinker = Shrinker(values, range(len(values)) if used is None else used)
    proposals = shrinker.proposals()
    tried: list[list[Any]] = []
    try:
        candidate = next(proposals)
        while True:
            tried.append(candidate)
            candidate = proposals.send(keep(candidate))
    except StopIteration:
        return shrinker.values, tried


def test_a_list_loses_everything_but_the_needed_item_in_a_few_proposals() -> None:
    result, tried = shrink([list(range(200))], lambda values: 137 in values[0])
    assert result == [[137]]
    assert len(tried) <= 20  # halves, quarters...: about 2 log2(200), not 200
    assert tried[0] == [[]]  # everything first
    assert tried[1] == [list(range(100, 200))]  # then the first half


def test_object_members_go_and_numbers_stay() -> None:
    value = {"id": "TP1", "price": 0.0, "currency": "XXX", "notes": "long " * 20}
    result, _ = shrink([value], lambda values: values[0].get("currency") == "XXX")
    assert result == [{"currency": "XXX"}]
    result, _ = shrink([{"price": 12.5, "n": [1, 2]}], lambda values: "price" in values[0])
    assert result == [{"price": 12.5}]


def test_strings_shrink_to_the_shortest_prefix_then_suffix_that_is_kept() -> None:
    text = "a" * 500 + "needle" + "b" * 500
    result, tried = shrink([{"reply": text}], lambda values: "needle" in values[0].get("reply", ""))
    assert result == [{"reply": "needle"}]
    assert len(tried) <= 30  # bisection, not one character at a time


def test_values_reported_unused_are_left_alone() -> None:
    result, tried = shrink([[1, 2, 3], [4, 5, 6]], lambda values: True, used={1})
    assert result == [[1, 2, 3], []]
    assert all(candidate[0] == [1, 2, 3] for candidate in tried)


def test_the_same_values_and_judge_give_the_same_proposals() -> None:
    values = [{"flights": [{"id": str(n), "price": n} for n in range(40)]}, "text " * 30]

    def keep(candidate: list[Any]) -> bool:
        return any(f.get("price") == 23 for f in candidate[0].get("flights", []))

    assert shrink(values, keep) == shrink(values, keep)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=5), children, max_size=6)
    ),
    max_leaves=30,
)


def leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]


def size(value: Any) -> int:
    if isinstance(value, list | dict):
        items = value.values() if isinstance(value, dict) else value
        return 1 + sum(size(item) for item in items)
    return 1 + (len(value) if isinstance(value, str) else 0)


@settings(deadline=None)  # no timing assertion: a busy machine must not fail it
@given(json_values, st.data())
def test_the_result_is_accepted_and_no_proposal_is_larger(value: Any, data: st.DataObject) -> None:
    """Whatever the value and the leaf the judge wants kept: the result keeps it, and
    every proposal is smaller than the value it was made from."""
    found = leaves(value)
    needle = data.draw(st.sampled_from(found)) if found else None

    def keep(values: list[Any]) -> bool:
        return needle in leaves(values[0])

    result, tried = shrink([value], keep)
    assert keep(result) == keep([value])
    assert size(result[0]) <= size(value)
    assert all(size(candidate[0]) < size(value) for candidate in tried)
