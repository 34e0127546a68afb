"""Per-call digests of input and output: ``sftrace validate`` names the changed call."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest

from regress_helpers import invoke, llm, play, record_steps, tool
from sftrace import load_bundle, replay, validate_bundle
from sftrace._model.otlp_json import (
    STRING_VALUE,
    encode_attributes,
    encoded_key,
    string_item,
    string_value_start,
)
from sftrace._model.stored import split_digests

STEPS = [tool("lookup", {"days": 45}, order_id="A-1"), llm("m-1", {"ok": True}, q="refund?")]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return record_steps(tmp_path / "run.sftrace", STEPS, output={"decision": "x"})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_calls_carry_digests_of_their_stored_input_and_output(bundle: Path) -> None:
    """sftrace.digests: the first 16 hex digits of each value's SHA-256, input first."""
    for call in load_bundle(bundle).calls:
        assert call.output_json is not None
        digests = _sha(call.input_json)[:16] + _sha(call.output_json)[:16]
        assert call.attributes["sftrace.digests"] == digests
        assert "sftrace.input.sha256" not in call.attributes


def test_a_call_without_output_carries_the_input_digest_alone(tmp_path: Path) -> None:
    path = record_steps(tmp_path / "e.sftrace", [tool("lookup", error="down", order_id="A")])
    [call] = load_bundle(path).calls
    assert call.output_json is None
    assert call.attributes["sftrace.digests"] == _sha(call.input_json)[:16]
    _change_value(path, 1, "sftrace.input", '{"order_id":"B"}')
    assert any("call 1 (tool lookup): its input was changed" in p for p in validate_bundle(path))


def test_digests_are_of_the_redacted_values(tmp_path: Path) -> None:
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    path = record_steps(tmp_path / "s.sftrace", [tool("login", "ok", api_key=secret)])
    [call] = load_bundle(path).calls
    assert secret not in call.input_json
    assert call.attributes["sftrace.digests"][:16] == _sha(call.input_json)[:16]


def _change_value(bundle: Path, seq: int, key: str, text: str) -> None:
    spans = bundle / "spans.jsonl"
    lines = spans.read_text().splitlines()
    for index, line in enumerate(lines):
        span = json.loads(line)
        attributes = {a["key"]: a for a in span["attributes"]}
        if attributes.get("sftrace.seq", {}).get("value") == {"intValue": str(seq)}:
            attributes[key]["value"]["stringValue"] = text
            lines[index] = json.dumps(span, separators=(",", ":"))
    spans.write_text("\n".join(lines) + "\n")


def _change_output_of_call_1(bundle: Path) -> None:
    _change_value(bundle, 1, "sftrace.output", '{"days":5}')


def test_validate_names_the_call_whose_payload_changed(bundle: Path) -> None:
    _change_output_of_call_1(bundle)
    problems = validate_bundle(bundle)
    named = [p for p in problems if "call 1 (tool lookup)" in p]
    assert named == [
        f"{bundle / 'spans.jsonl'}: call 1 (tool lookup): its output was changed after it "
        f"was recorded (sftrace.digests does not match)"
    ]
    assert any("digest mismatch" in p for p in problems)  # the file, too
    result = invoke("validate", bundle)
    assert result.exit_code == 1
    assert named[0] in result.stdout.splitlines()
    # --no-verify-integrity checks the structure only.
    assert invoke("validate", bundle, "--no-verify-integrity").exit_code == 0


def test_bundles_without_digests_still_validate(bundle: Path) -> None:
    """Bundles written before digests existed (or converted from the peers) have none."""
    spans = bundle / "spans.jsonl"
    text = spans.read_text()
    lines = []
    for line in text.splitlines():
        span = json.loads(line)
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in ("sftrace.digests",)]
        lines.append(json.dumps(span, separators=(",", ":")))
    spans.write_text("\n".join(lines) + "\n")
    problems = validate_bundle(bundle)
    assert all("changed after it was recorded" not in p for p in problems)
    assert validate_bundle(bundle, verify_integrity=False) == []


def test_a_replayed_call_carries_the_digests_of_its_input_and_output(bundle: Path) -> None:
    """A call answered from the recording keeps the digests its line stores (its input
    is the same text, its output the recorded one): they are those of the texts."""
    recorded = {call.seq: call for call in load_bundle(bundle).calls}
    with replay(bundle) as session:
        play(STEPS)
    calls = [s for s in session.spans if (s.attributes or {}).get("sftrace.seq")]
    assert len(calls) == len(recorded) == 2
    for span in calls:
        attributes = span.attributes or {}
        call = recorded[attributes["sftrace.seq"]]
        assert attributes["sftrace.output"] == call.output_json
        expected = _sha(attributes["sftrace.input"])[:16] + _sha(call.output_json or "")[:16]
        assert attributes["sftrace.digests"] == expected == call.attributes["sftrace.digests"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sftrace.digests", "0123456789abcdef"),
        ('k\u00e9y "quoted"', 'a "value" with \\ and \n and \u2028 and \U0001f600'),
        ("", ""),
    ],
)
def test_the_spelling_of_a_string_attribute_is_the_line_encoding(key: str, value: str) -> None:
    """string_item / string_value_start spell an item as orjson writes encode_attributes'."""
    item = orjson.dumps(encode_attributes({key: value})[0])
    assert string_item(key, value) == item
    assert item.startswith(string_value_start(key))
    assert item.startswith(encoded_key(key) + STRING_VALUE)


def test_split_digests_gives_the_input_and_output_halves() -> None:
    assert split_digests("a" * 16 + "b" * 16) == ("a" * 16, "b" * 16)
    assert split_digests("a" * 16) == ("a" * 16, "")


def test_a_loaded_call_reads_both_stored_digests_from_its_line(bundle: Path) -> None:
    for call in load_bundle(bundle).calls:
        stored = call.attributes["sftrace.digests"]
        assert call.stored_digests() == (stored[:16], stored[16:])


def test_a_loaded_call_without_output_stores_no_output_digest(tmp_path: Path) -> None:
    path = record_steps(tmp_path / "e.sftrace", [tool("lookup", error="down", order_id="A")])
    [call] = load_bundle(path).calls
    assert call.stored_digests() == (_sha(call.input_json)[:16], None)


@pytest.mark.parametrize(
    "digests",
    [
        "not hex digits at all!",
        "abc",
        "0123456789ABCDEF0123456789ABCDEF",
        "0123456789abcdef0123456789ab  cd",
        "0123456789abcdef0123456789abcd\u00e9",
        None,
    ],
)
def test_stored_digests_not_as_sftrace_writes_them_are_not_used(
    bundle: Path, digests: str | None
) -> None:
    """A line whose sftrace.digests is not 16 or 32 hex digits (or missing) lends none:
    the replay hashes the texts instead, and its span's digests are still theirs."""
    spans = bundle / "spans.jsonl"
    lines = []
    for line in spans.read_text().splitlines():
        span = json.loads(line)
        items = [a for a in span["attributes"] if a["key"] != "sftrace.digests"]
        if digests is not None and len(items) < len(span["attributes"]):
            items.append({"key": "sftrace.digests", "value": {"stringValue": digests}})
        span["attributes"] = items
        lines.append(json.dumps(span, separators=(",", ":")))
    spans.write_text("\n".join(lines) + "\n")
    calls = load_bundle(bundle).calls
    assert [call.stored_digests() for call in calls] == [(None, None)] * 2
    with replay(bundle) as session:
        play(STEPS)
    replayed = [s.attributes or {} for s in session.spans]
    replayed = [attributes for attributes in replayed if attributes.get("sftrace.seq")]
    assert len(replayed) == 2
    for attributes in replayed:
        expected = _sha(attributes["sftrace.input"])[:16] + _sha(attributes["sftrace.output"])[:16]
        assert attributes["sftrace.digests"] == expected
