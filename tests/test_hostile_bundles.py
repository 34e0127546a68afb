"""Hostile and broken bundles: every one is refused with a BundleError naming the file,
the line and the problem; nothing outside the bundle is followed; sizes are bounded.

The fuzz tests at the end mutate and truncate bundles at random: the only exception
that may escape the loader is BundleError.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sftrace import BundleError, load_bundle, record, recover_bundle, trace_tool, validate_bundle
from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    FORMAT_VERSION,
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_LINE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    PARTIAL_SUFFIX,
    SPANS_FILE,
)
from sftrace._bundle.integrity import integrity_problems
from sftrace.testing import isolated_tracing


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city}


@trace_tool
def trip(city: str) -> list[Any]:
    return [lookup(city), lookup(city + " 2")]


def _record(path: Path) -> Path:
    with record("hostile", output=path, run_input={"city": "Lisbon"}) as session:
        trip("Lisbon")
        session.record_state_change(key="k", before=1, after=2)
        session.set_output({"ok": True})
    return path


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return _record(tmp_path / "b.sftrace")


def spans_of(root: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (root / SPANS_FILE).read_bytes().splitlines()]


def write_spans(root: Path, spans: list[Any]) -> None:
    (root / SPANS_FILE).write_bytes(b"".join(orjson.dumps(span) + b"\n" for span in spans))


def edit_manifest(root: Path, **changes: Any) -> None:
    manifest = orjson.loads((root / MANIFEST_FILE).read_bytes())
    manifest.update(changes)
    (root / MANIFEST_FILE).write_bytes(orjson.dumps(manifest))


def edit_span(index: int, change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        spans = spans_of(root)
        change(spans[index])
        write_spans(root, spans)

    return apply


def set_attribute(key: str, value: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(span: dict[str, Any]) -> None:
        span["attributes"] = [item for item in span["attributes"] if item["key"] != key]
        span["attributes"].append({"key": key, "value": value})

    return apply


def edit_spans(change: Callable[[list[dict[str, Any]]], list[Any]]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        write_spans(root, change(spans_of(root)))

    return apply


def _cycle(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    a, b = spans[1], spans[2]
    a["parentSpanId"], b["parentSpanId"] = b["spanId"], a["spanId"]
    return spans


# (damage, file the message names, line or None, fragment of the message)
CASES: list[Any] = [
    pytest.param(
        lambda r: (r / MANIFEST_FILE).unlink(),
        MANIFEST_FILE,
        None,
        "missing file 'manifest.json'",
        id="no-manifest",
    ),
    pytest.param(
        lambda r: (r / SPANS_FILE).unlink(), SPANS_FILE, None, "missing file", id="no-spans"
    ),
    pytest.param(
        lambda r: (r / MANIFEST_FILE).write_text("{"),
        MANIFEST_FILE,
        None,
        "invalid JSON",
        id="manifest-json",
    ),
    pytest.param(
        lambda r: (r / MANIFEST_FILE).write_text("[]"),
        MANIFEST_FILE,
        None,
        "expected a JSON object",
        id="manifest-list",
    ),
    pytest.param(
        lambda r: edit_manifest(r, format="zip"),
        MANIFEST_FILE,
        None,
        "not an sftrace bundle manifest",
        id="format",
    ),
    pytest.param(
        lambda r: edit_manifest(r, format_version=99),
        MANIFEST_FILE,
        None,
        "upgrade sftrace",
        id="version-new",
    ),
    pytest.param(
        lambda r: edit_manifest(r, format_version=0),
        MANIFEST_FILE,
        None,
        "never released",
        id="version-0",
    ),
    pytest.param(
        lambda r: edit_manifest(r, format_version="1"),
        MANIFEST_FILE,
        None,
        "must be an integer",
        id="version-type",
    ),
    pytest.param(
        lambda r: edit_manifest(r, status="exploded"),
        MANIFEST_FILE,
        None,
        "field 'status'",
        id="status",
    ),
    pytest.param(
        lambda r: edit_manifest(r, totals=[1]),
        MANIFEST_FILE,
        None,
        "field 'totals'",
        id="totals-type",
    ),
    pytest.param(
        lambda r: edit_manifest(r, trace_id="xyz"),
        MANIFEST_FILE,
        None,
        "trace_id must be",
        id="trace-id",
    ),
    pytest.param(
        lambda r: edit_manifest(r, root_span_id="ab" * 8),
        SPANS_FILE,
        1,
        "root_span_id",
        id="root-span-id",
    ),
    pytest.param(
        lambda r: (r / SPANS_FILE).write_bytes((r / SPANS_FILE).read_bytes()[:-5]),
        SPANS_FILE,
        4,
        "truncated line",
        id="truncated",
    ),
    pytest.param(
        lambda r: (r / SPANS_FILE).write_bytes(b""),
        SPANS_FILE,
        None,
        "no run span",
        id="empty-spans",
    ),
    pytest.param(
        edit_spans(lambda s: [s[0], "not json at all", *s[1:]]),
        SPANS_FILE,
        2,
        "expected a span object",
        id="string-line",
    ),
    pytest.param(
        lambda r: (r / SPANS_FILE).write_bytes(
            (r / SPANS_FILE).read_bytes().replace(b"}\n", b"\n", 1)
        ),
        SPANS_FILE,
        1,
        "invalid JSON",
        id="bad-json",
    ),
    pytest.param(
        edit_spans(lambda s: [s[0], [1, 2], *s[1:]]),
        SPANS_FILE,
        2,
        "expected a span object",
        id="list-line",
    ),
    pytest.param(
        edit_spans(lambda s: [*s, s[1]]), SPANS_FILE, 5, "duplicate spanId", id="duplicate-id"
    ),
    pytest.param(
        edit_span(2, lambda s: s.update(parentSpanId="00000000000000ff")),
        SPANS_FILE,
        3,
        "does not come before",
        id="missing-parent",
    ),
    pytest.param(
        edit_spans(lambda s: [s[0], s[2], s[1], *s[3:]]),
        SPANS_FILE,
        2,
        "does not come before",
        id="parent-later",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(parentSpanId=s["spanId"])),
        SPANS_FILE,
        2,
        "does not come before",
        id="self-parent",
    ),
    pytest.param(edit_spans(_cycle), SPANS_FILE, 2, "does not come before", id="cycle"),
    pytest.param(
        edit_span(1, lambda s: s.update(spanId="XYZ")),
        SPANS_FILE,
        2,
        "spanId must be",
        id="span-id",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(spanId="0x000000000000ab")),
        SPANS_FILE,
        2,
        "spanId must be",
        id="span-id-0x",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(traceId="ab" * 16)),
        SPANS_FILE,
        2,
        "traceId",
        id="trace-mismatch",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(name=None)), SPANS_FILE, 2, "has no name", id="no-name"
    ),
    pytest.param(
        edit_span(1, set_attribute("sftrace.kind", {"stringValue": "rocket"})),
        SPANS_FILE,
        2,
        "unknown sftrace.kind",
        id="kind",
    ),
    pytest.param(
        edit_span(1, set_attribute("sftrace.seq", {"stringValue": "1"})),
        SPANS_FILE,
        2,
        "sftrace.seq must be",
        id="seq-type",
    ),
    pytest.param(
        edit_span(2, set_attribute("sftrace.seq", {"intValue": "1"})),
        SPANS_FILE,
        3,
        "duplicate sftrace.seq",
        id="seq-duplicate",
    ),
    pytest.param(
        edit_span(1, set_attribute("sftrace.input", {"stringValue": "{nope"})),
        SPANS_FILE,
        2,
        "not valid JSON",
        id="input-json",
    ),
    pytest.param(
        edit_span(1, set_attribute("sftrace.input", {"intValue": "3"})),
        SPANS_FILE,
        2,
        "must be a JSON string",
        id="input-type",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(attributes={"a": 1})),
        SPANS_FILE,
        2,
        "attributes must be a list",
        id="attributes-type",
    ),
    pytest.param(
        edit_span(1, lambda s: s["attributes"].append({"key": "x", "value": 5})),
        SPANS_FILE,
        2,
        "no value object",
        id="attribute-value",
    ),
    pytest.param(
        edit_span(1, lambda s: s["attributes"].append({"key": 7})),
        SPANS_FILE,
        2,
        "string key",
        id="attribute-key",
    ),
    pytest.param(
        edit_span(1, set_attribute("x", {"intValue": "nine"})),
        SPANS_FILE,
        2,
        "malformed value",
        id="int-value",
    ),
    pytest.param(
        edit_span(1, set_attribute("x", {"intValue": "9" * 5000})),
        SPANS_FILE,
        2,
        "malformed value",
        id="huge-int",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(startTimeUnixNano="soon")),
        SPANS_FILE,
        2,
        "startTimeUnixNano",
        id="time",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(kind="INTERNAL")),
        SPANS_FILE,
        2,
        "kind must be",
        id="span-kind",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(events={"x": 1})),
        SPANS_FILE,
        2,
        "events must be a list",
        id="events",
    ),
    pytest.param(
        edit_span(1, lambda s: s.update(links="none")), SPANS_FILE, 2, "links must be", id="links"
    ),
    pytest.param(
        edit_span(0, lambda s: s.update(parentSpanId="ab" * 8)),
        SPANS_FILE,
        1,
        "does not come before",
        id="run-parent",
    ),
    pytest.param(
        edit_spans(lambda s: [*s[1:2], s[0], *s[2:]]),
        SPANS_FILE,
        1,
        "does not come before",
        id="run-not-first",
    ),
    pytest.param(
        edit_spans(lambda s: s[1:]), SPANS_FILE, 1, "does not come before", id="no-run-span"
    ),
    pytest.param(
        edit_span(0, set_attribute("sftrace.run.input", {"stringValue": "{x"})),
        SPANS_FILE,
        1,
        "run span: sftrace.run.input is not valid JSON",
        id="run-input",
    ),
    pytest.param(
        edit_span(0, set_attribute("sftrace.redactions", {"stringValue": "{}"})),
        SPANS_FILE,
        1,
        "sftrace.redactions must be a JSON list",
        id="redactions",
    ),
    pytest.param(
        edit_span(
            0,
            lambda s: s["events"][0]["attributes"].append(
                {"key": "sftrace.state.after", "value": {"stringValue": "{"}}
            ),
        ),
        SPANS_FILE,
        1,
        "state change event 0",
        id="state-change",
    ),
    pytest.param(
        edit_span(0, lambda s: s["events"].append({"name": "x", "timeUnixNano": -1})),
        SPANS_FILE,
        1,
        "timeUnixNano",
        id="event-time",
    ),
]


def _load_and_read_values(bundle: Path) -> None:
    for call in load_bundle(bundle).calls:
        call.check_values()


@pytest.mark.parametrize(("damage", "file", "line", "fragment"), CASES)
def test_malformed_bundle_names_file_line_and_problem(
    bundle: Path, damage: Callable[[Path], None], file: str, line: int | None, fragment: str
) -> None:
    """Each kind of damage raises BundleError naming the file, the line and the problem:
    when loading, or (a value that is not JSON) when the value is first read."""
    damage(bundle)
    with pytest.raises(BundleError) as caught:
        _load_and_read_values(bundle)
    message = str(caught.value)
    assert fragment in message
    assert file in message
    if line is not None:
        assert f"{SPANS_FILE}:{line}:" in message
        assert caught.value.line == line
    assert "\n" not in message
    assert len(message) < 600


def test_unknown_version_is_refused_before_anything_else_is_read(bundle: Path) -> None:
    """A newer format version is refused with advice, even when the spans would not parse."""
    newer = FORMAT_VERSION + 1
    edit_manifest(bundle, format_version=newer)
    (bundle / SPANS_FILE).write_bytes(b"\x00\x01garbage")
    with pytest.raises(BundleError, match=rf"unsupported bundle format version {newer}.*upgrade"):
        load_bundle(bundle)


# --- nothing outside the bundle ---------------------------------------------------------


@pytest.mark.parametrize("name", [MANIFEST_FILE, SPANS_FILE])
def test_symbolic_links_inside_a_bundle_are_refused(
    bundle: Path, tmp_path: Path, name: str
) -> None:
    """A bundle file that is a symbolic link (to a file outside, or to a device) is
    refused, not followed."""
    outside = tmp_path / "outside"
    outside.write_bytes((bundle / name).read_bytes())
    for target in (outside, Path("/dev/zero")):
        (bundle / name).unlink()
        (bundle / name).symlink_to(target)
        with pytest.raises(BundleError, match="symbolic link"):
            load_bundle(bundle)


def test_a_fifo_is_refused_without_blocking(bundle: Path) -> None:
    """A named pipe in place of a file is refused at once (opening it does not wait)."""
    (bundle / SPANS_FILE).unlink()
    os.mkfifo(bundle / SPANS_FILE)
    with pytest.raises(BundleError, match="not a regular file"):
        load_bundle(bundle)


@pytest.mark.parametrize(
    "name", ["../outside", "..", ".", "sub/file", "a\x00b", "/etc/passwd", "x y"]
)
def test_digest_lines_never_name_a_path_outside_the_bundle(bundle: Path, name: str) -> None:
    """checksums.sha256 naming anything but a plain file name is a malformed line; no
    path it names is opened."""
    digests = (bundle / CHECKSUMS_FILE).read_bytes()
    (bundle / CHECKSUMS_FILE).write_bytes(digests + f"{'0' * 64}  {name}\n".encode())
    problems = integrity_problems(bundle)
    assert any("malformed line" in problem for problem in problems), problems


@pytest.mark.parametrize("path", ["bad\x00path", b"bundle\x00.sftrace", 42])
def test_impossible_paths_are_refused(path: Any) -> None:
    """A path with a NUL byte, or no path at all, is a BundleError, not a ValueError."""
    with pytest.raises(BundleError):
        load_bundle(path)


# --- bounded reading ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "limit"), [(MANIFEST_FILE, MAX_MANIFEST_BYTES), (SPANS_FILE, MAX_SPANS_BYTES)]
)
def test_files_over_the_limit_are_refused_unread(bundle: Path, name: str, limit: int) -> None:
    """A file far beyond any sane size is refused from its size alone (a sparse file: no
    byte of it is read)."""
    with open(bundle / name, "r+b") as handle:
        handle.truncate(limit + 1)
    with pytest.raises(BundleError, match=f"over the limit of {limit} bytes"):
        load_bundle(bundle)


def test_a_line_over_the_limit_is_refused(bundle: Path) -> None:
    """One span line longer than the limit is refused before it is parsed."""
    with open(bundle / SPANS_FILE, "ab") as handle:
        handle.truncate(handle.tell() + MAX_LINE_BYTES + 10)  # zeros, no newline
    with pytest.raises(BundleError, match=f"line longer than {MAX_LINE_BYTES} bytes"):
        load_bundle(bundle)


# --- the command line -----------------------------------------------------------------------


def _sftrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sftrace._cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_prints_one_line_and_exits_2_and_debug_shows_the_traceback(bundle: Path) -> None:
    """A malformed bundle: one line on stderr and exit status 2; --debug adds the
    traceback."""
    edit_span(1, lambda s: s.update(spanId="XYZ"))(bundle)
    plain = _sftrace("inspect", str(bundle), cwd=bundle.parent)
    assert plain.returncode == 2
    assert plain.stderr.count("\n") == 1
    assert plain.stderr.startswith("sftrace: error: ")
    assert f"{SPANS_FILE}:2: spanId must be" in plain.stderr
    debug = _sftrace("--debug", "inspect", str(bundle), cwd=bundle.parent)
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert "BundleError" in debug.stderr


# --- fuzzing --------------------------------------------------------------------------------

_FUZZ_FILES = (MANIFEST_FILE, SPANS_FILE, CHECKSUMS_FILE)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _mutated_file(draw: st.DrawFn, original: dict[str, bytes]) -> tuple[str, bytes]:
    """One file of the bundle, damaged: bytes flipped, cut, inserted or duplicated, or one
    JSON value somewhere in it replaced, deleted or retyped."""
    name = draw(st.sampled_from(_FUZZ_FILES))
    data = original[name]
    if not data:  # emptied by an earlier mutation
        return name, draw(st.binary(max_size=40))
    how = draw(st.sampled_from(["flip", "truncate", "insert", "splice", "json"]))
    if how == "flip":
        changed = bytearray(data)
        for at in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=8)):
            changed[at] = draw(st.integers(0, 255))
        return name, bytes(changed)
    if how == "truncate":
        return name, data[: draw(st.integers(0, len(data)))]
    if how == "insert":
        at = draw(st.integers(0, len(data)))
        return name, data[:at] + draw(st.binary(min_size=1, max_size=40)) + data[at:]
    if how == "splice":
        a, b = sorted(draw(st.tuples(st.integers(0, len(data)), st.integers(0, len(data)))))
        return name, data[:b] + data[a:b] + data[b:]
    lines = data.split(b"\n")
    index = draw(st.integers(0, max(0, len(lines) - 2)))
    try:
        document = orjson.loads(lines[index])
    except orjson.JSONDecodeError:
        return name, data
    lines[index] = orjson.dumps(_mutate_json(draw, document))
    return name, b"\n".join(lines)


def _mutate_json(draw: st.DrawFn, node: Any) -> Any:
    if isinstance(node, dict) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node)))
        action = draw(st.sampled_from(["replace", "delete", "descend"]))
        if action == "delete":
            return {k: v for k, v in node.items() if k != key}
        value = draw(_json_values) if action == "replace" else _mutate_json(draw, node[key])
        return {**node, key: value}
    if isinstance(node, list) and node and draw(st.booleans()):
        at = draw(st.integers(0, len(node) - 1))
        return [*node[:at], _mutate_json(draw, node[at]), *node[at + 1 :]]
    return draw(_json_values)


def _exercise(root: Path) -> None:
    """Everything a reader does with a bundle: only BundleError may come out."""
    for verify in (False, True):
        try:
            loaded = load_bundle(root, verify_integrity=verify)
        except BundleError:
            continue
        # values are decoded when first read: a damaged one raises BundleError then
        with contextlib.suppress(BundleError):
            for span in loaded.spans:
                assert isinstance(span, dict)
            for call in loaded.calls:
                call.describe()
                _ = call.output, call.label, call.duration_ms
            _ = loaded.run_input, loaded.output, loaded.state_changes, repr(loaded)
    try:
        problems = validate_bundle(root, verify_integrity=True)
        assert isinstance(problems, list)
    except BundleError:
        pass
    with contextlib.suppress(BundleError):
        integrity_problems(root)


@pytest.fixture(scope="module")
def pristine() -> Iterator[dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as directory, isolated_tracing():
        root = _record(Path(directory) / "pristine.sftrace")
        yield {name: (root / name).read_bytes() for name in _FUZZ_FILES}


def _fuzz_bundles(examples: int) -> Callable[..., None]:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def fuzz(pristine: dict[str, bytes], data: st.DataObject) -> None:
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory) / "fuzzed.sftrace"
            root.mkdir()
            files = dict(pristine)
            for _ in range(data.draw(st.integers(1, 3))):
                name, content = data.draw(_mutated_file(files))
                files[name] = content
            for name, content in files.items():
                (root / name).write_bytes(content)
            _exercise(root)

    return fuzz


test_fuzz_loader_raises_only_bundle_errors = _fuzz_bundles(150)
test_fuzz_loader_raises_only_bundle_errors.__doc__ = (
    "Random damage to a bundle's files: loading, validating and checking it raise "
    "BundleError or succeed, nothing else."
)
test_fuzz_loader_raises_only_bundle_errors_many = pytest.mark.slow(_fuzz_bundles(3000))
test_fuzz_loader_raises_only_bundle_errors_many.__doc__ = (
    "The same, with thousands of examples (CI)."
)


@pytest.fixture(scope="module")
def crashed_journal() -> Iterator[dict[str, bytes]]:
    """The header and journal a run killed after three calls leaves."""
    with tempfile.TemporaryDirectory() as directory, isolated_tracing():
        out = Path(directory) / "live.sftrace"
        with record("victim", output=out, run_input={"city": "Lisbon"}):
            trip("Lisbon")
            [live] = list(Path(directory).glob(f".*{PARTIAL_SUFFIX}"))
            files = {name: (live / name).read_bytes() for name in (HEADER_FILE, JOURNAL_FILE)}
        yield files


@settings(max_examples=150, deadline=None, database=None)
@given(data=st.data())
def test_fuzz_recovery_raises_only_bundle_errors(
    crashed_journal: dict[str, bytes], data: st.DataObject
) -> None:
    """Random damage to a crashed run's header and journal: recovery (in memory and on
    disk) succeeds with a valid bundle or raises BundleError, nothing else."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    with tempfile.TemporaryDirectory() as directory:
        partial = Path(directory) / f".victim.sftrace.run{PARTIAL_SUFFIX}"
        partial.mkdir()
        for name, content in crashed_journal.items():
            if data.draw(st.integers(0, 3)) == 0:
                content = bytes(
                    rng.randrange(256) if rng.random() < 0.02 else byte for byte in content
                )
            elif data.draw(st.booleans()):
                content = content[: data.draw(st.integers(0, len(content)))]
            (partial / name).write_bytes(content)
        with contextlib.suppress(BundleError):
            load_bundle(partial, allow_partial=True)
        try:
            written = recover_bundle(partial)
        except BundleError:
            return
        load_bundle(written, verify_integrity=True)
        shutil.rmtree(written)


# --- crafted values whose work must stay bounded, and what validate must catch ---------


@pytest.mark.timeout(60)
def test_crafted_markers_are_matched_in_bounded_time() -> None:
    """Known-secret markers matched as holes backtracked exponentially (8 markers and a
    120-character reply hung a replay), and '[REDACTED:' never closed made unmarked()
    quadratic (a 1 MB value hung replay and diff)."""
    from sftrace._model.markers import KNOWN_SECRET_MARKER, secrets_at_markers, unmarked

    recorded = '{"q":"' + ("x" + KNOWN_SECRET_MARKER) * 12 + 'end"}'
    reached = '{"q":"' + "x" * 300 + 'nope"}'
    assert secrets_at_markers(recorded, reached) is None
    assert unmarked("[REDACTED:" * 200_000) == "[REDACTED:" * 200_000
    assert unmarked("a [REDACTED:rule] b") == "a [REDACTED:] b"


def test_a_dotted_class_name_no_class_has_is_not_looked_up() -> None:
    from sftrace._record.run import imported_object

    assert imported_object("a." * 300_000 + "Reply") is None
    assert imported_object("collections.OrderedDict") is __import__("collections").OrderedDict


def test_validate_refuses_a_manifest_status_the_run_span_does_not_say(bundle: Path) -> None:
    """'interrupted' makes a replay accept an agent going past the recording: a manifest
    saying it of a run that ended is refused, not believed."""
    edit_manifest(bundle, status="interrupted")
    problems = validate_bundle(bundle, verify_integrity=False)
    assert any("status is 'interrupted', but the run span" in p for p in problems), problems


@pytest.mark.parametrize("key", ["sftrace.output.nonfinite", "sftrace.output.unset"])
@pytest.mark.parametrize("value", ["not json[", '{"a": 1}', '[["a", [1]]]'])
def test_validate_checks_the_path_lists_a_replay_applies(
    bundle: Path, key: str, value: str
) -> None:
    edit_span(1, set_attribute(key, {"stringValue": value}))(bundle)
    problems = validate_bundle(bundle, verify_integrity=False)
    assert any(key in p for p in problems), problems


def test_a_known_secret_marker_typed_into_a_bundle_is_no_wildcard(tmp_path: Path) -> None:
    """A replay learns a secret where the recording's input has [REDACTED:known_secret],
    matching whatever the agent passes there: only where the recording says it redacted
    one (its sftrace.redactions). A marker put there by hand matches nothing else."""
    from sftrace import replay_run

    path = tmp_path / "w.sftrace"
    with record("wild", output=path, run_input="Lisbon") as session:
        session.set_output(lookup("Lisbon"))

    def wildcard(span: dict[str, Any]) -> None:
        set_attribute("sftrace.input", {"stringValue": '{"city":"[REDACTED:known_secret]"}'})(span)

    edit_span(1, wildcard)(path)
    result = replay_run(path, lambda task: lookup("Wire 1,000,000 to Eve"))
    assert result.status == "diverged"
