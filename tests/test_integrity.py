"""Integrity: any change to any byte of a bundle is detected by its digests.

Digests show that a bundle changed after it was written; they are not a signature (a
test below pins that a consistent rewrite of the digests is accepted, as documented).
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sftrace import BundleError, llm_request, load_bundle, record, trace_tool
from sftrace._bundle.format import CHECKSUMS_FILE, MANIFEST_FILE, SPANS_FILE
from sftrace._bundle.integrity import integrity_problems
from sftrace._cli.bundle import register
from sftrace._cli.main import cli

register(cli)

FILES = (MANIFEST_FILE, SPANS_FILE, CHECKSUMS_FILE)
TRIALS_PER_FILE = 150


@trace_tool
def search(query: str) -> list[dict[str, object]]:
    return [{"id": i, "title": f"{query} {i}", "score": 1 / (i + 1)} for i in range(3)]


@trace_tool
def fetch(item: int) -> str:
    if item == 2:
        raise LookupError(f"item {item} is gone")
    return f"body of {item}"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "original.sftrace"
    with record("integrity", output=path, run_input="find things") as session:
        results = search("things")
        llm_request(
            provider="fake",
            model="m-1",
            input={"results": results},
            call=lambda: {"text": "fetch 1 and 2", "usage": {"input_tokens": 9}},
        )
        for item in (1, 2):
            try:
                fetch(item)
            except LookupError:
                session.record_state_change(key="missing", before=[], after=[item])
        session.set_output({"found": 1})
    assert integrity_problems(path) == []
    return path


Mutation = Callable[[bytes, random.Random], bytes]


def _flip_bits(data: bytes, rng: random.Random) -> bytes:
    changed = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(changed))
        changed[at] ^= 1 << rng.randrange(8)
    return bytes(changed)


def _replace_byte(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    new = rng.choice([b for b in range(256) if b != data[at]])
    return data[:at] + bytes([new]) + data[at + 1 :]


def _delete_byte(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at + 1 :]


def _insert_byte(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + bytes([rng.randrange(256)]) + data[at:]


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 3:
        return _flip_bits(data, rng)
    i, j = rng.sample(range(len(lines) - 1), 2)
    if lines[i] == lines[j]:
        return _flip_bits(data, rng)
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


MUTATIONS: tuple[Mutation, ...] = (
    _flip_bits,
    _replace_byte,
    _delete_byte,
    _insert_byte,
    _truncate,
    _swap_lines,
)


def _detected(root: Path) -> str:
    """How the change was caught: 'mismatch' or 'parse error'; fail if it was accepted."""
    try:
        problems = integrity_problems(root)
    except BundleError:
        problems = ["parse error"]
    with pytest.raises(BundleError):
        load_bundle(root, verify_integrity=True)
    assert problems, "a changed bundle passed the integrity check"
    return "mismatch" if any("mismatch" in p for p in problems) else "parse error"


@pytest.mark.parametrize("name", FILES)
def test_every_random_byte_change_is_detected(bundle: Path, name: str) -> None:
    """Hundreds of random byte changes (flips, replacements, insertions, deletions,
    truncations, swapped lines) in each file: every one is reported, none accepted."""
    rng = random.Random(f"integrity-{name}")
    target = bundle / name
    original = target.read_bytes()
    outcomes: dict[str, int] = {}
    for trial in range(TRIALS_PER_FILE):
        mutation = MUTATIONS[trial % len(MUTATIONS)]
        changed = mutation(original, rng)
        if changed == original:
            continue
        target.write_bytes(changed)
        how = _detected(bundle)
        outcomes[how] = outcomes.get(how, 0) + 1
        target.write_bytes(original)
    assert sum(outcomes.values()) >= TRIALS_PER_FILE - 5
    assert integrity_problems(bundle) == []  # restored: the check itself is not noisy


def test_validate_command_reports_a_changed_byte(bundle: Path) -> None:
    """`sftrace validate --verify-integrity` exits non-zero on a changed byte, 0 without."""
    runner = CliRunner()
    assert runner.invoke(cli, ["validate", "--verify-integrity", str(bundle)]).exit_code == 0
    spans = bundle / SPANS_FILE
    data = bytearray(spans.read_bytes())
    data[len(data) // 2] ^= 0x01
    spans.write_bytes(bytes(data))
    result = runner.invoke(cli, ["validate", "--verify-integrity", str(bundle)])
    assert result.exit_code in (1, 2)
    assert "digest mismatch" in result.output or "invalid JSON" in result.output


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda root: (root / "extra.txt").write_text("hello"), "not listed"),
        (lambda root: (root / SPANS_FILE).unlink(), "missing file"),
        (lambda root: (root / CHECKSUMS_FILE).unlink(), "missing file"),
        (
            lambda root: (root / SPANS_FILE).rename(root / "spans.jsonl.bak"),
            "missing file",
        ),
    ],
    ids=["file-added", "file-removed", "digests-removed", "file-renamed"],
)
def test_added_removed_or_renamed_files_are_detected(
    bundle: Path, change: Callable[[Path], object], fragment: str
) -> None:
    """Files added, removed or renamed after writing are reported too."""
    change(bundle)
    try:
        problems = integrity_problems(bundle)
    except BundleError as exc:
        problems = [str(exc)]
    assert any(fragment in problem for problem in problems), problems


def test_digests_are_not_a_signature(bundle: Path, tmp_path: Path) -> None:
    """Whoever can change the files can recompute the digests: the check then passes.
    (Documented in SECURITY.md: digests detect accidental or naive changes, not forgery.)"""
    forged = tmp_path / "forged.sftrace"
    shutil.copytree(bundle, forged)
    manifest = forged / MANIFEST_FILE
    manifest.write_bytes(manifest.read_bytes().replace(b'"integrity"', b'"forged!!!"'))
    assert integrity_problems(forged) != []
    digests = {
        name: hashlib.sha256((forged / name).read_bytes()).hexdigest()
        for name in (MANIFEST_FILE, SPANS_FILE)
    }
    (forged / CHECKSUMS_FILE).write_text(
        "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    )
    assert integrity_problems(forged) == []
    assert load_bundle(forged, verify_integrity=True).agent_name == "forged!!!"
