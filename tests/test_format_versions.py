"""Bundle format version 2 (compact call lines) and reading version 1 bundles."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from regress_helpers import llm, play, record_steps, tool
from sftrace import load_bundle, replay, validate_bundle
from sftrace._export.push import spans_of_bundle
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes
from sftrace._model.stored import restored_attributes, stored_attributes

V1 = Path(__file__).parent / "data" / "v1" / "refund.sftrace"
# The run tests/data/v1/refund.sftrace holds, recorded by sftrace with format version 1.
STEPS = [
    tool("lookup", {"days": 45}, order_id="A-1"),
    tool("refund", error="declined", order_id="A-1"),
    llm("m-1", {"ok": True}, q="refund?"),
]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (path / "spans.jsonl").read_bytes().splitlines()]


def test_a_version_1_bundle_loads_validates_and_replays(tmp_path: Path) -> None:
    """Version 1 lines hold what version 2 leaves out: they load, their full-length
    digests are checked, and the run replays."""
    bundle_path = tmp_path / "refund.sftrace"
    shutil.copytree(V1, bundle_path)
    assert orjson.loads((V1 / "manifest.json").read_bytes())["format_version"] == 1
    bundle = load_bundle(bundle_path, eager=True)
    assert [call.name for call in bundle.calls] == ["lookup", "refund", "m-1"]
    assert bundle.calls[0].attributes[A.INPUT_SHA256]
    assert validate_bundle(bundle_path) == []
    with replay(bundle_path) as session:
        play(STEPS, output={"decision": "x"})
    assert session.divergence is None
    assert session.unused == []


def test_a_changed_value_of_a_version_1_bundle_is_named(tmp_path: Path) -> None:
    bundle_path = tmp_path / "refund.sftrace"
    shutil.copytree(V1, bundle_path)
    spans = _lines(bundle_path)
    for item in spans[1]["attributes"]:
        if item["key"] == A.OUTPUT:
            item["value"]["stringValue"] = '{"days":5}'
    (bundle_path / "spans.jsonl").write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in spans))
    problems = validate_bundle(bundle_path)
    assert any(
        "call 1 (tool lookup): its output was changed after it was recorded "
        "(sftrace.output.sha256 does not match)" in problem
        for problem in problems
    )


@pytest.fixture
def v2_bundle(tmp_path: Path) -> Path:
    return record_steps(tmp_path / "refund.sftrace", STEPS, output={"decision": "x"})


def test_version_2_lines_leave_out_what_they_can_derive(v2_bundle: Path) -> None:
    """Tool and LLM lines keep neither the values their kind implies, nor the default
    policy, nor an unset status; the digests are sftrace.digests."""
    assert orjson.loads((v2_bundle / "manifest.json").read_bytes())["format_version"] == 2
    for span in _lines(v2_bundle)[1:]:
        keys = {item["key"] for item in span["attributes"]}
        assert not keys & {
            A.GEN_AI_OPERATION_NAME,
            A.GEN_AI_TOOL_TYPE,
            A.REPLAY_POLICY,
            A.INPUT_SHA256,
            A.OUTPUT_SHA256,
            *A.INPUT_ALIASES,
            *A.OUTPUT_ALIASES,
        }
        assert A.DIGESTS in keys
        if span["name"] != "execute_tool refund":  # the failed call has an error status
            assert "status" not in span


def test_push_restores_what_recording_set(v2_bundle: Path) -> None:
    """The spans push sends carry the GenAI values and aliases a live span carries."""
    spans = {
        span.name: dict(span.attributes or {}) for span in spans_of_bundle(load_bundle(v2_bundle))
    }
    lookup = spans["execute_tool lookup"]
    assert lookup[A.GEN_AI_OPERATION_NAME] == A.OPERATION_EXECUTE_TOOL
    assert lookup[A.GEN_AI_TOOL_TYPE] == "function"
    assert lookup[A.REPLAY_POLICY] == "frozen"
    assert lookup[A.GEN_AI_TOOL_CALL_RESULT] == lookup[A.OUTPUT]
    assert spans["chat m-1"][A.GEN_AI_OPERATION_NAME] == A.OPERATION_CHAT


@pytest.mark.parametrize(
    ("kind", "changed"),
    [
        (A.KIND_TOOL, {A.GEN_AI_TOOL_TYPE: "extension", A.REPLAY_POLICY: "live"}),
        (A.KIND_LLM, {A.GEN_AI_OPERATION_NAME: "embeddings", A.REPLAY_POLICY: "derived"}),
        (A.KIND_TOOL, {}),
        (A.KIND_LLM, {}),
    ],
)
def test_stored_then_restored_gives_back_what_recording_set(
    kind: str, changed: dict[str, str]
) -> None:
    """Only values the kind implies are left out: any other value is stored as it is."""
    live: dict[str, Any] = {
        A.KIND: kind,
        A.SEQ: 3,
        A.INPUT: '{"q":1}',
        A.OUTPUT: '{"a":2}',
        A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL if kind == A.KIND_TOOL else "chat",
        A.REPLAY_POLICY: "frozen",
    }
    if kind == A.KIND_TOOL:
        live[A.GEN_AI_TOOL_TYPE] = "function"
        live[A.GEN_AI_TOOL_CALL_ARGUMENTS] = live[A.INPUT]
        live[A.GEN_AI_TOOL_CALL_RESULT] = live[A.OUTPUT]
    live.update(changed)
    stored = stored_attributes(live)
    for key, value in changed.items():
        assert stored[key] == value
    restored = restored_attributes(stored)
    restored.pop(A.DIGESTS)
    assert restored == live


def test_a_line_decodes_to_the_same_attributes_through_its_stored_form(v2_bundle: Path) -> None:
    """restored(stored(x)) is a fixed point on bundle lines."""
    for span in _lines(v2_bundle):
        attributes = decode_attributes(span["attributes"])
        assert stored_attributes(restored_attributes(attributes)) == attributes
