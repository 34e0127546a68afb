"""What a bundle line stores of a span's attributes, and what a reader restores.

One home for both directions (``docs/bundle-format.md``, "What a line leaves out"). A
line of a call (format version 2) leaves out what can be derived from what it keeps:

- the aliases of ``sftrace.input`` / ``sftrace.output`` (``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``, ``input.value``, ``output.value``), as version 1 did;
- the GenAI attributes that only repeat the call's kind: ``gen_ai.operation.name`` =
  ``execute_tool`` and ``gen_ai.tool.type`` = ``function`` on a tool call,
  ``gen_ai.operation.name`` = ``chat`` on an LLM call (any other value is kept);
- ``sftrace.replay_policy`` = ``frozen``, the default (any other policy is kept);
- the SHA-256 digests of the input and output, 64 hex digits each: the line keeps
  ``sftrace.digests``, the first 16 hex digits of each, which is what naming the changed
  call needs (the digest of the whole file, in ``checksums.sha256``, shows that the file
  changed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sftrace._model import attributes as A

DIGEST_CHARS = 16  # hex digits of each value's SHA-256 that a line keeps

# Per call kind: attributes whose value the kind implies (left out when they have it).
_IMPLIED: dict[str, dict[str, str]] = {
    A.KIND_TOOL: {
        A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL,
        A.GEN_AI_TOOL_TYPE: "function",
        A.REPLAY_POLICY: "frozen",
    },
    A.KIND_LLM: {A.GEN_AI_OPERATION_NAME: A.OPERATION_CHAT, A.REPLAY_POLICY: "frozen"},
}
ALIASES = frozenset(A.INPUT_ALIASES + A.OUTPUT_ALIASES)
_REPLACED = ALIASES | {A.INPUT_SHA256, A.OUTPUT_SHA256}


def payload_digest(text: str) -> str:
    """The SHA-256 (hex) of a call's stored input or output text (``sftrace.input.sha256``)."""
    return hashlib.sha256(text.encode()).hexdigest()


def value_digest(text: str) -> str:
    """What ``sftrace.digests`` keeps of one stored value: its SHA-256's first digits."""
    return payload_digest(text)[:DIGEST_CHARS]


def split_digests(digests: str) -> tuple[str, str]:
    """``sftrace.digests`` as (the input's digest, the output's): ``""`` for a half it
    does not hold (a call without output stores the input's alone)."""
    return digests[:DIGEST_CHARS], digests[DIGEST_CHARS:]


def stored_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a bundle line stores of a span with ``attributes``."""
    implied = _IMPLIED.get(attributes.get(A.KIND))  # type: ignore[arg-type]
    # A copy less what is left out (the kept keys keep their order): a few look-ups
    # instead of a test of every attribute.
    stored = dict(attributes)
    if implied is None:  # the run span, the application's own spans
        for key in ALIASES:
            stored.pop(key, None)
        return stored
    for key in _REPLACED:
        stored.pop(key, None)
    for key, value in implied.items():
        if stored.get(key, _NOTHING) == value:
            del stored[key]
    digests = _digests(attributes)
    if digests:
        stored[A.DIGESTS] = digests
    return stored


def left_out(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a span with ``attributes`` that its bundle line does not hold
    (an OTLP copy made from the line adds them back)."""
    implied = _IMPLIED.get(attributes.get(A.KIND))  # type: ignore[arg-type]
    if implied is None:
        return {key: value for key, value in attributes.items() if key in ALIASES}
    return {
        key: value
        for key, value in attributes.items()
        if key in _REPLACED or implied.get(key, _NOTHING) == value
    }


def _digests(attributes: Mapping[str, Any]) -> str:
    """``sftrace.digests`` of a call: as recording set it, else from the full digests
    (spans of older recordings, collector output of them) or the values."""
    recorded = attributes.get(A.DIGESTS)
    if isinstance(recorded, str):
        return recorded
    parts = []
    for value_key, digest_key in ((A.INPUT, A.INPUT_SHA256), (A.OUTPUT, A.OUTPUT_SHA256)):
        text = attributes.get(value_key)
        if not isinstance(text, str):
            break  # no output: the input's digest alone
        digest = attributes.get(digest_key)
        parts.append(
            digest[:DIGEST_CHARS] if isinstance(digest, str) and digest else value_digest(text)
        )
    return "".join(parts)


def restored_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a stored span as recording set them: what ``stored_attributes``
    left out, back (the digests stay as stored). Lines of version 1 bundles, which left
    out only the aliases, restore the same way."""
    restored = dict(attributes)
    kind = attributes.get(A.KIND)
    for key, value in _IMPLIED.get(kind, {}).items():  # type: ignore[arg-type]
        restored.setdefault(key, value)
    if kind == A.KIND_TOOL:
        if A.INPUT in attributes:
            restored[A.GEN_AI_TOOL_CALL_ARGUMENTS] = attributes[A.INPUT]
        if A.OUTPUT in attributes:
            restored[A.GEN_AI_TOOL_CALL_RESULT] = attributes[A.OUTPUT]
    return restored


def digest_mismatches(
    attributes: Mapping[str, Any], input_json: str, output_json: str | None
) -> list[tuple[str, str]]:
    """(field, attribute) of each stored value whose digest no longer matches it: from
    ``sftrace.digests`` (version 2) or ``sftrace.input.sha256`` / ``.output.sha256``
    (version 1); values without a digest are not checked."""
    found = []
    digests = attributes.get(A.DIGESTS)
    if isinstance(digests, str):
        expected_input, expected_output = split_digests(digests)
        for field, text, expected in (
            ("input", input_json, expected_input),
            ("output", output_json, expected_output),
        ):
            if expected and text is not None and value_digest(text) != expected:
                found.append((field, A.DIGESTS))
        return found
    for field, text, key in (
        ("input", input_json, A.INPUT_SHA256),
        ("output", output_json, A.OUTPUT_SHA256),
    ):
        digest = attributes.get(key)
        if digest is not None and text is not None and digest != payload_digest(text):
            found.append((field, key))
    return found


_NOTHING = object()
