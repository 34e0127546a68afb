"""Bounded time and memory on any input (issue 13 items 13, 14, 16): blank lines are
refused at the first one, an over-long line is refused before it is read whole, and
validation accepts only the integers every output can write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from sftrace import BundleError, load_bundle, record, trace_tool, validate_bundle
from sftrace._bundle.format import MANIFEST_FILE, SPANS_FILE


@trace_tool
def lookup(city: str) -> dict[str, Any]:
    return {"city": city}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "b.sftrace"
    with record("bounds", output=path) as session:
        lookup("Lisbon")
        session.set_output({"ok": True})
    return path


def _spans(root: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (root / SPANS_FILE).read_bytes().splitlines()]


def _write(root: Path, spans: list[dict[str, Any]]) -> None:
    (root / SPANS_FILE).write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in spans))


def _sftrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sftrace._cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_blank_lines_are_refused_at_the_first(bundle: Path) -> None:
    """A megabyte of blank lines after the run span is refused at line 2, not skipped."""
    data = (bundle / SPANS_FILE).read_bytes()
    first, rest = data.split(b"\n", 1)
    (bundle / SPANS_FILE).write_bytes(first + b"\n" + b"\n" * (1 << 20) + rest)
    with pytest.raises(BundleError, match=r"spans\.jsonl:2: blank line") as caught:
        load_bundle(bundle)
    assert caught.value.line == 2


def test_an_over_long_line_is_refused_before_it_is_read_whole(bundle: Path) -> None:
    """A 400 MB line (a sparse file of zeros after the spans) is refused having read
    little more than the line limit: the loading process never holds the whole line."""
    spans = bundle / SPANS_FILE
    with open(spans, "ab") as handle:
        handle.truncate(handle.tell() + 400 * 1024 * 1024)
    code = _PEAK.format(
        setup="from sftrace import BundleError, load_bundle",
        work=(
            "try:\n"
            f"    load_bundle({str(bundle)!r})\n"
            "except BundleError as exc:\n"
            "    assert 'line longer than' in str(exc), exc\n"
            "else:\n"
            "    sys.exit('loaded')"
        ),
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    grown_mib = int(result.stderr.strip().splitlines()[-1]) // (1024 * 1024)
    assert grown_mib < 200, f"loading grew by {grown_mib} MiB"


@pytest.mark.parametrize("value", [2**64, 2**63, -(2**63) - 1])
def test_integers_outside_64_bits_are_invalid(bundle: Path, value: int) -> None:
    """An sftrace.seq (or any attribute) outside the signed 64-bit range is invalid for
    validate and load, so --json output never meets an integer it cannot write."""
    spans = _spans(bundle)
    for item in spans[1]["attributes"]:
        if item["key"] == "sftrace.seq":
            item["value"] = {"intValue": str(value)}
    _write(bundle, spans)
    with pytest.raises(BundleError, match="64-bit"):
        load_bundle(bundle)
    problems = validate_bundle(bundle)
    assert any("64-bit" in problem for problem in problems)
    result = _sftrace("inspect", "--json", str(bundle))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "64-bit" in result.stderr


def test_manifest_integers_outside_64_bits_are_invalid(bundle: Path) -> None:
    """A manifest total too large for JSON output is invalid, and inspect --json says so."""
    manifest = orjson.loads((bundle / MANIFEST_FILE).read_bytes())
    manifest["totals"]["spans"] = 2**64 - 1
    (bundle / MANIFEST_FILE).write_bytes(orjson.dumps(manifest))
    with pytest.raises(BundleError, match=r"totals\.spans.*64-bit"):
        load_bundle(bundle)
    result = _sftrace("inspect", "--json", str(bundle))
    assert result.returncode == 2
    assert "totals.spans" in result.stderr


def _large_bundle(root: Path, calls: int) -> int:
    """``root`` made into a bundle of ``calls`` small tool calls (copies of one recorded
    call); returns the size of its spans.jsonl."""
    lines = (root / SPANS_FILE).read_bytes().splitlines()
    call = orjson.loads(lines[1])
    out = [lines[0]]
    for number in range(1, calls + 1):
        attributes = [
            {"key": "sftrace.seq", "value": {"intValue": str(number)}}
            if item["key"] == "sftrace.seq"
            else item
            for item in call["attributes"]
        ]
        out.append(orjson.dumps({**call, "spanId": f"f{number:015x}", "attributes": attributes}))
    data = b"\n".join(out) + b"\n"
    (root / SPANS_FILE).write_bytes(data)
    manifest = orjson.loads((root / MANIFEST_FILE).read_bytes())
    manifest["totals"].update(spans=calls + 1, tool_calls=calls)
    (root / MANIFEST_FILE).write_bytes(orjson.dumps(manifest))
    return len(data)


# The process's own peak resident memory (VmHWM): ru_maxrss would carry the pytest
# process's peak over the exec of the child.
_PEAK = """
import sys
def peak():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) * 1024
{setup}
before = peak()
{work}
print(peak() - before, file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("setup", "work"),
    [
        ("from sftrace import load_bundle", "bundle = load_bundle(sys.argv[1])"),
        (
            "import sftrace._cli.main as m, sftrace._cli.bundle as b\n"
            "b.register(m.cli)\n"
            "sys.stdout = open('/dev/null', 'w')",
            "m.cli.main(['inspect', '--json', sys.argv[1]], standalone_mode=False)",
        ),
    ],
    ids=["load_bundle", "inspect-json"],
)
def test_loading_a_large_bundle_takes_at_most_three_times_its_size(
    bundle: Path, setup: str, work: str
) -> None:
    """Loading (and inspect --json) a bundle of 40,000 small calls grows the process by
    less than three times the size of its spans: decoded attributes are not kept, and
    the JSON document is written a call at a time."""
    size = _large_bundle(bundle, 40_000)
    code = _PEAK.format(setup=setup, work=work)
    result = subprocess.run(
        [sys.executable, "-c", code, str(bundle)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "rror" not in result.stderr, result.stderr
    grown = int(result.stderr.strip().splitlines()[-1])
    assert grown < 3 * size, f"grew by {grown / size:.2f} times the size of spans.jsonl"
