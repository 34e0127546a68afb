"""The one JSON-path grammar: parsing every form in use, the canonical form, matching,
walking and stripping."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sftrace import ConfigError, Redactor
from sftrace._model.jsondiff import differences
from sftrace._model.jsonpath import (
    MAX_INDEX,
    WILDCARD,
    JsonPath,
    format_path,
    parse_paths,
    strip,
)


@pytest.mark.parametrize(
    ("text", "segments", "canonical"),
    [
        pytest.param("reply.generated_at", ("reply", "generated_at"), "$.reply.generated_at"),
        pytest.param("items.*.id", ("items", WILDCARD, "id"), "$.items[*].id"),
        pytest.param("items[*].id", ("items", WILDCARD, "id"), "$.items[*].id"),
        pytest.param("$.messages[0].content", ("messages", 0, "content"), "$.messages[0].content"),
        pytest.param("messages.0.content", ("messages", 0, "content"), "$.messages[0].content"),
        pytest.param("$['a b']", ("a b",), '$["a b"]', id="python-repr-key"),
        pytest.param('$["x-api-key"]', ("x-api-key",), '$["x-api-key"]', id="redaction-record"),
        pytest.param('$["it\'s"]', ("it's",), '$["it\'s"]', id="repr-with-quote"),
        pytest.param("$['a\\'b']", ("a'b",), '$["a\'b"]', id="escaped-quote"),
        pytest.param('$["a\\"b"]', ('a"b',), '$["a\\"b"]', id="json-escape"),
        pytest.param('$["a.b"].c', ("a.b", "c"), '$["a.b"].c', id="dot-in-key"),
        pytest.param("$.café", ("café",), '$["café"]', id="unicode"),
        pytest.param('$["*"]', ("*",), '$["*"]', id="star-key"),
        pytest.param('$["0"]', ("0",), '$["0"]', id="digit-key"),
        pytest.param("['a b'].c", ("a b", "c"), '$["a b"].c', id="bracket-first"),
        pytest.param(" $.a ", ("a",), "$.a", id="surrounding-space"),
        pytest.param("$", (), "$", id="root"),
    ],
)
def test_every_form_in_use_parses_to_one_canonical_form(
    text: str, segments: tuple[Any, ...], canonical: str
) -> None:
    """Policy paths, ignore_fields, old mismatch diffs and bundles' redaction records all parse."""
    path = JsonPath.parse(text)
    assert path.segments == segments
    assert str(path) == canonical
    assert JsonPath.parse(canonical) == path


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a[-1]", "negative list index -1"),
        ("a.-3", "negative list index -3"),
        (f"a[{MAX_INDEX + 1}]", f"larger than {MAX_INDEX}"),
        ("a.99999999999999999999", "larger than"),
        ("a[01]", "leading zero"),
        ("a..b", "empty key"),
        (".a", "leading '.'"),
        ("a[", "unexpected"),
        ("a]b", "unexpected"),
        ("a.[0]", "empty key"),
        ("a[0]b", "unexpected"),
        ("a['b]", "unexpected"),
        ("a. .b", "empty key"),
    ],
)
def test_malformed_paths_are_config_errors_naming_path_and_grammar(text: str, reason: str) -> None:
    """A bad path is refused with the path, the reason and the grammar to follow."""
    with pytest.raises(ConfigError) as raised:
        JsonPath.parse(text, what="ignore path")
    message = str(raised.value)
    assert f"invalid ignore path {text!r}" in message
    assert reason in message
    assert "'items.*.id'" in message
    assert "docs/regression-tests.md" in message


@pytest.mark.parametrize("texts", [[""], ["$"], [3], 3])
def test_paths_naming_nothing_or_not_strings_are_refused(texts: Any) -> None:
    """A list of paths to ignore must name parts of a value, as strings."""
    with pytest.raises(ConfigError, match="ignore_fields"):
        parse_paths(texts, what="ignore_fields entry")


@pytest.mark.parametrize(
    ("pattern", "path", "matched"),
    [
        pytest.param("reply.generated_at", ("reply", "generated_at"), True, id="exact"),
        pytest.param("reply", ("reply", "generated_at"), True, id="below"),
        pytest.param("items.*.id", ("items", 3, "id"), True, id="wildcard-index"),
        pytest.param("*.id", ("items", "id"), True, id="wildcard-key"),
        pytest.param("items[*].id", ("items", 0, "id"), True, id="bracket-wildcard"),
        pytest.param("$.items[2].id", ("items", 2, "id"), True, id="rooted-index"),
        pytest.param("$.items[2].id", ("items", 1, "id"), False, id="other-index"),
        pytest.param("items.2", ("items", "2"), False, id="index-is-not-a-key"),
        pytest.param('items["2"]', ("items", 2), False, id="key-is-not-an-index"),
        pytest.param('$["*"]', ("x",), False, id="quoted-star-is-a-key"),
        pytest.param("['a b'].c", ("a b", "c"), True, id="quoted-key"),
        pytest.param("items.*.id", ("items", 3, "name"), False, id="other-key"),
        pytest.param("reply.generated_at", ("reply",), False, id="above"),
    ],
)
def test_paths_match_what_they_name_and_below(
    pattern: str, path: tuple[Any, ...], matched: bool
) -> None:
    """* is any one key or index; a path covers what lies below it."""
    assert JsonPath.parse(pattern).matches(path) is matched


def test_walk_yields_every_named_location() -> None:
    value = {"items": [{"id": 1}, {"n": 2}, {"id": 3}], "id": 0}
    assert list(JsonPath.parse("items.*.id").walk(value)) == [
        (("items", 0, "id"), 1),
        (("items", 2, "id"), 3),
    ]
    assert list(JsonPath.parse("items[5]").walk(value)) == []


def test_strip_removes_members_and_nulls_list_items() -> None:
    """An ignored object member is removed; an ignored list item becomes null."""
    patterns = parse_paths(["meta", "items.*.id", "tags[1]"], what="ignore path")
    value = {"meta": {"t": 1}, "items": [{"id": 1, "n": 2}], "tags": ["a", "b", "c"], "k": 1}
    assert strip(value, patterns) == {"items": [{"n": 2}], "tags": ["a", None, "c"], "k": 1}
    assert value["meta"] == {"t": 1}  # the value itself is not changed


def test_paths_written_by_sftrace_are_canonical() -> None:
    """Mismatch diffs and redaction records write the same form for the same key."""
    (diff,) = differences({"a b": [{"x-y": 1}]}, {"a b": [{"x-y": 2}]})
    assert diff[0] == '$["a b"][0]["x-y"]'
    _, found = Redactor().redact({"headers": {"x-api-key": "k-123456"}})
    assert [r.path for r in found] == ['$.headers["x-api-key"]']
    assert JsonPath.parse(diff[0]).segments == ("a b", 0, "x-y")


# --- properties ------------------------------------------------------------------------

_segments = st.lists(st.one_of(st.text(), st.integers(0, MAX_INDEX), st.just(WILDCARD)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_segments)
def test_format_then_parse_round_trips(segments: list[Any]) -> None:
    """Any keys (dots, quotes, spaces, unicode, digits, '*') and indices survive."""
    text = format_path(segments)
    assert JsonPath.parse(text).segments == tuple(segments)
    assert str(JsonPath.parse(text)) == text


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["a", "b"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c d", "0"]), inner, max_size=4)
    ),
    max_leaves=20,
)
_pattern = st.lists(
    st.one_of(st.sampled_from(["a", "b", "c d", "0"]), st.integers(0, 3), st.just(WILDCARD)),
    min_size=1,
    max_size=4,
).map(lambda segments: JsonPath(tuple(segments)))


def _leaves(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*at, key))]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*at, i))]
    return [(at, value)]


@settings(max_examples=300, deadline=None)
@given(_json, _pattern)
def test_strip_agrees_with_walk(value: Any, pattern: JsonPath) -> None:
    """After stripping, the path names only nulled list items; what it doesn't name stays."""
    stripped = strip(value, [pattern])
    for path, item in pattern.walk(stripped):
        assert isinstance(path[-1], int)
        assert item is None
    for path, leaf in _leaves(value):
        if not pattern.matches(path):
            assert list(JsonPath(path).walk(stripped)) == [(path, leaf)]
    named = {path for path, _ in pattern.walk(value)}
    assert {path for path, _ in pattern.walk(stripped)} == {
        p for p in named if isinstance(p[-1], int)
    }
