"""Call.may_have: telling that a loaded call lacks an attribute without decoding its line."""

from __future__ import annotations

from typing import Any

import orjson

from sftrace._model import attributes as A
from sftrace._model.calls import NOTED_KEYS, Call, call_from_span


def _loaded_call(line: bytes, prefix: bytes = b"[1,2]\n") -> Call:
    """A call as a loaded bundle keeps it: where its span's line is in the file's bytes."""
    data = prefix + line + b"\n"
    return Call(
        seq=1,
        kind="tool",
        name="lookup",
        provider=None,
        input_json="{}",
        output_json=None,
        error=None,
        policy="frozen",
        span_id="00f067aa0ba902b7",
        parent_span_id=None,
        line=(data, len(prefix), len(prefix) + len(line)),
    )


def _line(attributes: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]}
    )


def test_may_have_answers_like_the_decoded_attributes() -> None:
    present = _loaded_call(_line({A.KIND: "tool", A.OUTPUT_UNRECORDED: "too big"}))
    absent = _loaded_call(_line({A.KIND: "tool", A.OUTPUT: "{}"}))
    assert present.may_have(A.OUTPUT_UNRECORDED)
    assert present.attributes[A.OUTPUT_UNRECORDED] == "too big"
    assert not absent.may_have(A.OUTPUT_UNRECORDED)
    assert not absent.may_have(A.REDACTIONS)
    assert absent.may_have(A.OUTPUT)


def test_a_key_written_with_an_escape_is_found() -> None:
    """JSON may spell a key with \\u escapes: such a line is decoded, not searched."""
    line = _line({A.KIND: "tool"}).replace(b'"sftrace.kind"', b'"sftrace.kin\\u0064"')
    call = _loaded_call(line)
    assert call.may_have(A.KIND)
    assert not call.may_have(A.OUTPUT_UNRECORDED)


def test_the_key_is_looked_for_in_the_call_s_own_line_only() -> None:
    """Other lines of the file (here the one before) do not count."""
    before = _line({A.OUTPUT_UNRECORDED: "another call's"})
    call = _loaded_call(_line({A.KIND: "tool"}), prefix=before + b"\n")
    assert not call.may_have(A.OUTPUT_UNRECORDED)


def test_a_call_built_with_attributes_answers_from_them() -> None:
    call = _loaded_call(b"{}")
    call.attributes = {A.REDACTIONS: "[]"}
    assert call.may_have(A.REDACTIONS)
    assert not call.may_have(A.OUTPUT_UNRECORDED)


def test_a_loaded_call_answers_for_the_noted_keys_like_its_attributes() -> None:
    """``call_from_span`` notes which of ``NOTED_KEYS`` the decoded attributes hold, so
    ``may_have`` answers for them without the line, escapes included."""
    for present in ((), (A.REDACTIONS,), (A.OUTPUT_UNRECORDED,), NOTED_KEYS):
        attributes: dict[str, Any] = {A.KIND: "tool", A.SEQ: 1, A.GEN_AI_TOOL_NAME: "lookup"}
        attributes.update({key: "[]" for key in present})
        line = _line(attributes).replace(b"sftrace.", b"sftrace\\u002e")
        data = line + b"\n"
        call = call_from_span({"spanId": "00f067aa0ba902b7"}, attributes, (data, 0, len(line)))
        for key in NOTED_KEYS:
            assert call.may_have(key) is (key in present)
