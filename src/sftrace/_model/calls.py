"""Recorded calls: ``Call`` (one boundary call of a bundle), how a call is labelled and
referenced, and the state changes a run recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from sftrace._errors import BundleError, public_error_name
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes, string_value_start
from sftrace._model.serialize import restore_nonfinite
from sftrace._model.stored import DIGEST_CHARS, split_digests
from sftrace._model.text import shorten

LineRef = tuple[bytes | bytearray, int, int, str, int]
"""Where a loaded call's span line is: (data, start, end, file name, line number)."""

NOTED_KEYS = (
    A.REDACTIONS,
    A.OUTPUT_UNRECORDED,
    A.HANDED_OFF,
    A.OUTPUT_NONFINITE,
    A.OUTPUT_TEXT,
    A.OUTPUT_UNSET,
)
"""Attributes few calls have that a replay asks every call about (answering it, or at
its start, which calls were handed to threads): a loaded call notes at load which of them
it has, so :meth:`Call.may_have` tells without searching its line."""


StoredDigests = tuple[str | None, str | None]
"""What a loaded call's line stores of its input's and output's digests (None: not)."""

# What a line holds before the text of ``sftrace.digests`` (see ``Call.stored_digests``).
_DIGESTS_START = string_value_start(A.DIGESTS)
_NO_DIGESTS: StoredDigests = (None, None)
_QUOTE = ord('"')


class Identified(Protocol):
    """Anything that names a call: a recorded ``Call`` or what a replay reached."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str | None: ...


def call_label(kind: str, name: str, provider: str | None) -> str:
    """``tool search_flights`` or ``llm openai/gpt-4o``: how messages name a call."""
    if kind == A.KIND_LLM and provider:
        return f"llm {provider}/{name}"
    return f"{kind} {name}"


@dataclass(frozen=True, slots=True)
class CallRef:
    """A call as findings name it: its number (``sftrace.seq``), 1-based position in its
    run, kind, name and (for LLM calls) provider."""

    number: int
    position: int
    kind: str
    name: str
    provider: str | None = None

    @classmethod
    def of(cls, call: Identified, position: int) -> CallRef:
        return cls(call.seq, position, call.kind, call.name, call.provider)

    @property
    def label(self) -> str:
        return call_label(self.kind, self.name, self.provider)

    def __str__(self) -> str:
        return f"call {self.number} ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "position": self.position,
            "kind": self.kind,
            "name": self.name,
            "provider": self.provider,
        }


@dataclass(frozen=True, slots=True)
class CallFailure:
    """A recorded exception: its type name, message, and whether the type is a builtin.

    ``args_json`` (its args as a JSON array), ``fields_json`` (its own attributes, a JSON
    object), ``status_code`` and ``body_json`` (an SDK error's HTTP status and response
    body, ``headers_json`` the response headers handlers read) and ``cause_json`` (the
    exception it was raised from) are what rebuilding it needs; bundles written before
    they were recorded have None.
    """

    type: str
    message: str
    builtin: bool = False
    cancelled: bool = False
    args_json: str | None = None
    status_code: int | None = None
    body_json: str | None = None
    fields_json: str | None = None
    cause_json: str | None = None
    headers_json: str | None = None
    # The call's own code raised its CancelledError: nothing outside cancelled it.
    cancelled_within: bool = False


class Call:
    """One recorded boundary call (a tool or an LLM call), in sequence order.

    ``input`` and ``output`` are the recorded JSON values, parsed when first read (a
    loaded bundle checks that they are JSON text only with ``load_bundle(eager=True)``
    or ``sftrace validate``; otherwise a malformed one raises ``BundleError`` naming the
    file, line and span when it is first read); ``input_json`` and ``output_json`` are
    their canonical text. ``attributes`` are the span's decoded attributes; a loaded
    bundle decodes them again from the span's line when they are first asked for,
    rather than keeping every call's attributes in memory. ``start_time_ns`` and
    ``end_time_ns`` may be given as the span's decimal strings (a loaded call's are),
    parsed when read.
    """

    __slots__ = (
        "_attributes",
        "_end",
        "_input",
        "_line",
        "_noted",
        "_output",
        "_start",
        "error",
        "input_json",
        "kind",
        "name",
        "output_json",
        "parent_span_id",
        "policy",
        "provider",
        "seq",
        "span_id",
    )

    _MISSING: Any = object()

    def __init__(
        self,
        seq: int,
        kind: str,
        name: str,
        provider: str | None,
        input_json: str,
        output_json: str | None,
        error: CallFailure | None,
        policy: str,
        span_id: str,
        parent_span_id: str | None,
        start_time_ns: int | str = 0,
        end_time_ns: int | str = 0,
        attributes: dict[str, Any] | None = None,
        line: LineRef | None = None,
        noted: tuple[str, ...] | None = None,
    ) -> None:
        self.seq = seq
        self.kind = kind
        self.name = name
        self.provider = provider
        self.input_json = input_json
        self.output_json = output_json
        self.error = error
        self.policy = policy
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self._start = start_time_ns  # a loaded call's are the line's decimal strings,
        self._end = end_time_ns  # parsed when read (most calls' never are)
        self._attributes = attributes
        self._line = line  # where the span's line is: to decode it again, to name it
        self._noted = noted  # which of NOTED_KEYS the attributes have (None: not noted)
        self._input = Call._MISSING
        self._output = Call._MISSING

    @property
    def attributes(self) -> dict[str, Any]:
        if self._attributes is None:
            attributes: dict[str, Any] = {}
            if self._line is not None:
                data, start, end = self._line[:3]
                attributes = decode_attributes(orjson.loads(data[start:end]).get("attributes", ()))
            self._attributes = attributes
        return self._attributes

    @attributes.setter
    def attributes(self, value: dict[str, Any]) -> None:
        self._attributes = value

    def may_have(self, key: str) -> bool:
        """False when the call's attributes surely lack ``key``, told without decoding
        them: a loaded call knows for ``NOTED_KEYS``, and looks for any other key's JSON
        text in its span's line (a line with any ``\\u`` escape, which could spell a key
        otherwise, is decoded)."""
        line = self._line
        if self._attributes is not None or line is None:
            return key in self.attributes
        if self._noted is not None and key in NOTED_KEYS:
            return key in self._noted
        data, start, end = line[0], line[1], line[2]
        if data.find(b'"' + key.encode() + b'"', start, end) < 0 and (
            data.find(b"\\u", start, end) < 0
        ):
            return False
        return key in self.attributes

    def stored_digests(self) -> StoredDigests:
        """The digests of ``input_json`` and ``output_json`` that a loaded call's line
        stores in ``sftrace.digests``, each None where it has none: a replay making a span
        with the same text keeps the recorded digest (as a bundle keeps the digests it
        stores) instead of hashing the text again.

        Both from one search of the line as sftrace writes it (no copy is kept per call:
        loading stays within its memory bound); a line written otherwise gives None.
        """
        line = self._line
        if line is None:
            return _NO_DIGESTS
        data, start, end = line[0], line[1], line[2]
        at = data.find(_DIGESTS_START, start, end)
        if at < 0:
            return _NO_DIGESTS
        at += len(_DIGESTS_START)
        # The text's closing quote: after the input's digest alone (a call without
        # output), or after both digests (no search: hex digits need no escapes).
        stop = at + DIGEST_CHARS
        if stop < end and data[stop] != _QUOTE:
            stop += DIGEST_CHARS
        if stop >= end or data[stop] != _QUOTE:
            return _NO_DIGESTS  # not the digests sftrace writes
        try:  # in lowercase hex digits, as sftrace writes them
            digests = data[at:stop].decode()
            if bytes.fromhex(digests).hex() != digests:
                return _NO_DIGESTS
        except ValueError:  # not UTF-8, or not hex digits
            return _NO_DIGESTS
        input_digest, output_digest = split_digests(digests)
        return input_digest, (output_digest if output_digest and self.output_json else None)

    @property
    def input(self) -> Any:
        if self._input is Call._MISSING:
            self._input = self._parse(A.INPUT, self.input_json)
        return self._input

    @property
    def output(self) -> Any:
        if self._output is Call._MISSING:
            output_json = self.output_json
            self._output = None if output_json is None else self._parse(A.OUTPUT, output_json)
        return self._output

    def fresh_output(self) -> Any:
        """The recorded output parsed anew: a new object on every call (a replay hands
        one to the agent, which may change it), its non-finite floats as floats again.
        Raises ``BundleError`` like ``output``."""
        if self.output_json is None:
            return None
        value = self._parse(A.OUTPUT, self.output_json)
        if self.may_have(A.OUTPUT_NONFINITE):
            paths = self.attributes.get(A.OUTPUT_NONFINITE)
            if isinstance(paths, str):
                value = restore_nonfinite(value, self._parse(A.OUTPUT_NONFINITE, paths))
        return value

    def check_values(self) -> None:
        """Raise ``BundleError`` if the recorded input or output is not JSON text: for
        readers that copy ``input_json`` / ``output_json`` as JSON without parsing them
        (a loaded bundle parses a value only when it is first read)."""
        if self._input is Call._MISSING:
            self._parse(A.INPUT, self.input_json)
        if self._output is Call._MISSING and self.output_json is not None:
            self._parse(A.OUTPUT, self.output_json)

    def _parse(self, key: str, text: str) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise self._malformed(key, exc) from None

    def _malformed(self, key: str, exc: orjson.JSONDecodeError) -> BundleError:
        what = f"span {self.span_id} (call {self.seq}, {self.label}): {key} is not valid JSON"
        if self._line is None:
            return BundleError(f"{what} ({exc})")
        display, number = self._line[3], self._line[4]
        return BundleError(
            f"{display}:{number}: {what} ({exc}); the file was changed or damaged after it "
            f"was written: restore the bundle from a copy or record the run again "
            f"(`sftrace validate` lists every problem)",
            path=display,
            line=number,
        )

    @property
    def start_time_ns(self) -> int:
        return int(self._start)

    @property
    def end_time_ns(self) -> int:
        return int(self._end)

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e6

    @property
    def label(self) -> str:
        """``tool search_flights`` or ``llm openai/gpt-4o``: how messages name the call."""
        return call_label(self.kind, self.name, self.provider)

    def with_output(self, output_json: str) -> Call:
        """A copy of this call that returned the JSON text ``output_json`` instead."""
        return Call(
            seq=self.seq,
            kind=self.kind,
            name=self.name,
            provider=self.provider,
            input_json=self.input_json,
            output_json=output_json,
            error=self.error,
            policy=self.policy,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            start_time_ns=self.start_time_ns,
            end_time_ns=self.end_time_ns,
            attributes={
                **{k: v for k, v in self.attributes.items() if k != A.OUTPUT_NONFINITE},
                A.OUTPUT: output_json,
            },
        )

    def describe(self) -> dict[str, Any]:
        """A plain dict of what identifies the call (used in errors and reports)."""
        described: dict[str, Any] = {"seq": self.seq, "kind": self.kind, "name": self.name}
        if self.provider is not None:
            described["provider"] = self.provider
        described["input"] = self.input
        return described

    def __repr__(self) -> str:
        return f"Call(seq={self.seq}, {self.label}, input={shorten(self.input_json, 60)})"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def call_from_span(
    span: dict[str, Any],
    attributes: dict[str, Any],
    line: LineRef | None = None,
) -> Call:
    """Build a ``Call`` from an OTLP/JSON span of a boundary and its decoded attributes.

    ``line``: where the span's JSON line is (see ``LineRef``); the call then keeps
    only what it needs and decodes its attributes again from the line when asked."""
    get = attributes.get
    error = None
    error_type = get(A.ERROR_TYPE)
    if error_type is not None:
        error = CallFailure(
            type=public_error_name(str(error_type)),
            message=str(get(A.ERROR_MESSAGE, "")),
            builtin=bool(get(A.ERROR_BUILTIN, False)),
            cancelled=bool(get(A.CANCELLED, False)),
            args_json=_text(get(A.ERROR_ARGS)),
            status_code=_integer(get(A.ERROR_STATUS_CODE)),
            body_json=_text(get(A.ERROR_BODY)),
            fields_json=_text(get(A.ERROR_FIELDS)),
            cause_json=_text(get(A.ERROR_CAUSE)),
            headers_json=_text(get(A.ERROR_HEADERS)),
            cancelled_within=get(A.CANCELLED_WITHIN) is True,
        )
    kind = attributes[A.KIND]
    if kind == A.KIND_LLM:
        name, provider = get(A.GEN_AI_REQUEST_MODEL), get(A.GEN_AI_PROVIDER_NAME)
    else:
        name, provider = get(A.GEN_AI_TOOL_NAME), None
    # Positional, in the order of Call's parameters: called with keywords, a class gets
    # them as a dict built for the call (CPython 3.11), a third of what building a
    # loaded call cost (issue 16).
    return Call(
        attributes[A.SEQ],  # seq
        kind,
        str(name),
        None if provider is None else str(provider),
        get(A.INPUT, "null"),  # input_json
        get(A.OUTPUT),  # output_json
        error,
        str(get(A.REPLAY_POLICY, "frozen")),  # policy
        span["spanId"],  # span_id
        span.get("parentSpanId") or None,  # parent_span_id
        span.get("startTimeUnixNano", 0),  # start_time_ns
        span.get("endTimeUnixNano", 0),  # end_time_ns
        None if line is not None else attributes,  # attributes
        line,
        _noted(attributes) if line is not None else None,  # noted
    )


def _noted(attributes: dict[str, Any]) -> tuple[str, ...]:
    """Which of ``NOTED_KEYS`` ``attributes`` has (most calls: none, the shared ``()``)."""
    if (
        A.REDACTIONS not in attributes
        and A.OUTPUT_UNRECORDED not in attributes
        and A.HANDED_OFF not in attributes
        and A.OUTPUT_NONFINITE not in attributes
        and A.OUTPUT_TEXT not in attributes
        and A.OUTPUT_UNSET not in attributes
    ):
        return ()
    return tuple(key for key in NOTED_KEYS if key in attributes)


@dataclass(frozen=True)
class StateChange:
    """A recorded ``session.record_state_change`` (values are JSON)."""

    key: str
    before: Any
    after: Any
    time_ns: int


def inner_calls(calls: list[Call], span_parents: dict[str, str | None]) -> dict[int, list[int]]:
    """For each call index, the indexes of the calls directly inside it.

    A call is inside another when walking up its parent spans (through spans that are not
    calls, such as the application's own spans) reaches the other call's span.
    """
    index_of = {call.span_id: index for index, call in enumerate(calls)}
    inner: dict[int, list[int]] = {}
    for index, call in enumerate(calls):
        parent = call.parent_span_id
        hops = 0
        while parent is not None and parent not in index_of and hops < 10_000:
            parent = span_parents.get(parent)
            hops += 1
        if parent is not None and parent in index_of:
            inner.setdefault(index_of[parent], []).append(index)
    return inner
