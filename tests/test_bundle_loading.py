"""Loading bundles: the span sequence, the parent map, and line-level damage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from sftrace import (
    BundleError,
    load_bundle,
    record,
    render_html,
    replay,
    trace_tool,
    validate_bundle,
)
from sftrace._bundle.format import MAX_LINE_BYTES
from sftrace._cli.bundle import register
from sftrace._cli.main import cli

register(cli)


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "ok": True}


@trace_tool
def trip(city: str) -> list[Any]:
    return [lookup(city), lookup(city + "!")]


@pytest.fixture
def bundle_path(tmp_path: Path) -> Path:
    path = tmp_path / "run.sftrace"
    with record("loader", output=path):
        trip("Lisbon")
        lookup("Porto")
    return path


def file_spans(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (path / "spans.jsonl").read_bytes().splitlines()]


def test_spans_are_the_lines_of_the_file_in_order(bundle_path: Path) -> None:
    """bundle.spans iterates, indexes and slices like the list of parsed span lines."""
    expected = file_spans(bundle_path)
    spans = load_bundle(bundle_path).spans
    assert len(spans) == len(expected) == 5
    assert list(spans) == expected
    assert [spans[i] for i in range(len(spans))] == expected
    assert spans[-1] == expected[-1]
    assert spans[1:3] == expected[1:3]
    assert spans[::-2] == expected[::-2]
    with pytest.raises(IndexError):
        spans[5]


def test_run_span_is_the_first_span_and_kept(bundle_path: Path) -> None:
    """The run span is spans[0], the same object on every access."""
    bundle = load_bundle(bundle_path)
    assert bundle.run_span is bundle.spans[0] is next(iter(bundle.spans))
    assert bundle.run_span["spanId"] == bundle.manifest.root_span_id


def test_span_parents_maps_every_span_to_its_parent(bundle_path: Path) -> None:
    """span_parents holds each span id with its parent span id (None for the run)."""
    bundle = load_bundle(bundle_path)
    expected = {s["spanId"]: s.get("parentSpanId") or None for s in file_spans(bundle_path)}
    assert bundle.span_parents == expected
    outer, inner = bundle.calls[0], bundle.calls[1]  # trip("Lisbon") calls lookup("Lisbon")
    assert (outer.name, inner.name) == ("trip", "lookup")
    assert bundle.span_parents[inner.span_id] == outer.span_id


def _rewrite(path: Path, change: Any) -> None:
    spans_file = path / "spans.jsonl"
    spans_file.write_bytes(change(spans_file.read_bytes()))


def _blank_lines(data: bytes) -> bytes:
    first, rest = data.split(b"\n", 1)
    return first + b"\n\n   \n" + rest


def test_blank_lines_are_refused(bundle_path: Path) -> None:
    """A whitespace-only line is refused (sftrace never writes one), naming the line."""
    _rewrite(bundle_path, _blank_lines)
    with pytest.raises(BundleError, match=r":2: blank line"):
        load_bundle(bundle_path)


def _move_run_span_last(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[1:] + lines[:1])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda data: data[:-1], ":5: truncated line (no newline at the end of the file)"),
        (lambda data: data + b"   ", ":6: truncated line"),
        (lambda data: data.replace(b"}\n", b"\n", 1), ":1: invalid JSON"),
        (_move_run_span_last, "parentSpanId"),
        (lambda data: data + data.split(b"\n", 1)[0] + b"\n", ":6: duplicate spanId"),
        (lambda data: b"", "no run span"),
    ],
    ids=["truncated", "trailing-blank", "bad-json", "parent-after-child", "run-twice", "empty"],
)
def test_damaged_lines_name_the_line(bundle_path: Path, change: Any, expected: str) -> None:
    """Damage to spans.jsonl raises BundleError naming the line and what is wrong."""
    _rewrite(bundle_path, change)
    with pytest.raises(BundleError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_bundle(bundle_path)


def test_run_span_not_first_is_refused(tmp_path: Path) -> None:
    """A run span that is not the first line is refused, even with its parents in order."""
    path = tmp_path / "run.sftrace"
    with record("loader", output=path):
        pass
    run_line = (path / "spans.jsonl").read_bytes()
    run = orjson.loads(run_line)
    other = {"traceId": run["traceId"], "spanId": "00000000000000aa", "name": "app span"}
    (path / "spans.jsonl").write_bytes(orjson.dumps(other) + b"\n" + run_line)
    with pytest.raises(BundleError, match="the first span must be the run span"):
        load_bundle(path)


def test_line_over_the_limit_is_refused(bundle_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than the limit is refused before it is parsed."""
    longest = max(len(line) + 1 for line in (bundle_path / "spans.jsonl").read_bytes().split())
    monkeypatch.setattr("sftrace._bundle.reader.MAX_LINE_BYTES", longest - 1)
    with pytest.raises(BundleError, match=f"line longer than {longest - 1} bytes"):
        load_bundle(bundle_path)
    assert longest < MAX_LINE_BYTES


def _break_value(key: str, index: int = 2) -> Any:
    """A rewrite of spans.jsonl whose line ``index`` (0-based; 2: the first lookup call)
    holds ``key`` as text that is not JSON."""

    def rewrite(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        span = orjson.loads(lines[index])
        for item in span["attributes"]:
            if item["key"] == key:
                item["value"]["stringValue"] = "{not json"
        lines[index] = orjson.dumps(span) + b"\n"
        return b"".join(lines)

    return rewrite


@pytest.mark.parametrize("key", ["sftrace.input", "sftrace.output"])
def test_a_malformed_value_loads_lazily_and_raises_when_first_read(
    bundle_path: Path, key: str
) -> None:
    """A call whose value is not JSON text loads; reading that value raises BundleError
    naming the file, line, span and call; the other calls read as usual."""
    _rewrite(bundle_path, _break_value(key))
    bundle = load_bundle(bundle_path)
    broken = next(call for call in bundle.calls if call.seq == 2)
    assert [call.output for call in bundle.calls if call.seq != 2]
    where = rf"spans.jsonl:3: span {broken.span_id} \(call 2, tool lookup\): {key} is not valid"
    with pytest.raises(BundleError, match=where) as caught:
        getattr(broken, key.removeprefix("sftrace."))
    assert caught.value.line == 3
    assert caught.value.path is not None
    assert caught.value.path.endswith("spans.jsonl")
    with pytest.raises(BundleError, match=where):
        broken.check_values()


@pytest.mark.parametrize("key", ["sftrace.input", "sftrace.output"])
def test_a_malformed_value_is_refused_at_load_when_eager(bundle_path: Path, key: str) -> None:
    """load_bundle(eager=True) and validate check every value up front."""
    _rewrite(bundle_path, _break_value(key))
    with pytest.raises(BundleError, match=rf":3: span [0-9a-f]{{16}}: {key} is not valid"):
        load_bundle(bundle_path, eager=True)
    problems = validate_bundle(bundle_path, verify_integrity=False)
    assert len(problems) == 1
    assert f"{key} is not valid JSON" in problems[0]


def test_replay_raises_a_malformed_recorded_output_when_it_reaches_the_call(
    bundle_path: Path,
) -> None:
    """A replay loads the bundle lazily; the agent's call whose recorded output is
    malformed (lookup Porto, line 5) raises BundleError naming the line, and the calls
    before it are answered."""
    _rewrite(bundle_path, _break_value("sftrace.output", 4))
    answered = []
    with replay(bundle_path):
        answered.append(trip("Lisbon"))
        with pytest.raises(BundleError, match=r"spans.jsonl:5: .*sftrace.output is not valid JSON"):
            lookup("Porto")
    assert answered == [[{"city": "Lisbon", "ok": True}, {"city": "Lisbon!", "ok": True}]]


def test_unordered_replay_parses_recorded_inputs_only_when_a_call_misses_exactly(
    bundle_path: Path,
) -> None:
    """Unordered replay matches by input text first: it parses the recorded inputs (to
    match at the next tiers) only when a reached input matches none exactly, so a
    malformed one (lookup Porto, line 5) raises at that call, not when the replay starts."""
    _rewrite(bundle_path, _break_value("sftrace.input", 4))
    with replay(bundle_path, match="unordered"):
        assert trip("Lisbon") == [{"city": "Lisbon", "ok": True}, {"city": "Lisbon!", "ok": True}]
        with pytest.raises(BundleError, match=r"spans.jsonl:5: .*sftrace.input is not valid JSON"):
            lookup("Porto")


def test_readers_that_copy_values_as_json_refuse_a_malformed_one(bundle_path: Path) -> None:
    """inspect --json and the HTML report never write a malformed value into their JSON."""
    _rewrite(bundle_path, _break_value("sftrace.output"))
    with pytest.raises(BundleError, match=r"sftrace\.output is not valid JSON"):
        render_html(bundle_path)
    result = CliRunner().invoke(cli, ["inspect", "--json", str(bundle_path)])
    assert result.exit_code == 2
    assert "sftrace.output is not valid JSON" in result.output
