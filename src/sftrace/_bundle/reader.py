"""Reading ``.sftrace`` bundles: ``load_bundle`` and the ``Bundle`` model.

Loading never executes anything from a bundle, never follows a path out of the bundle
directory, and bounds what it reads. Every problem raises ``BundleError`` naming the
file, the line when there is one, and what is wrong.

Reading older versions: the manifest's ``format_version`` selects an upgrade step in
``_UPGRADES`` that turns an older manifest and its span lines into the current shape
before validation, so a newer reader keeps reading older bundles. A version newer than
this reader is refused with a message saying to upgrade sftrace.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, overload

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_LINE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    SPANS_FILE,
    SUPPORTED_VERSIONS,
    not_a_bundle_message,
)
from sftrace._errors import BundleError
from sftrace._model import attributes as A
from sftrace._model.calls import call_label
from sftrace._model.display import repr_html
from sftrace._model.otlp_json import decode_attributes, decode_value

# --- manifest -----------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Failure(_Model):
    """Why a recorded run failed: the exception's type and message, and the step (the
    sequence number of the call it was raised in, when it came from a call)."""

    type: str | None = None
    message: str | None = None
    step: int | None = None


class Totals(_Model):
    spans: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0


class Manifest(_Model):
    """The bundle's ``manifest.json`` (see ``docs/bundle-format.md``)."""

    format: Literal["sftrace-bundle"]
    format_version: int
    run_id: str
    trace_id: str
    agent_name: str
    created_at: str
    status: Literal["completed", "failed", "interrupted"]
    failure: Failure | None = None
    totals: Totals
    root_span_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    replay_of: str | None = None
    environment: dict[str, Any] = {}
    resource: dict[str, Any] = {}
    scope: dict[str, Any] | None = None
    notes: list[str] = []


# --- calls --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallFailure:
    """A recorded exception: its type name, message, and whether the type is a builtin.

    ``args_json`` (its args as a JSON array), ``status_code`` and ``body_json`` (an SDK
    error's HTTP status and response body) are what rebuilding it needs; bundles written
    before they were recorded have None.
    """

    type: str
    message: str
    builtin: bool = False
    cancelled: bool = False
    args_json: str | None = None
    status_code: int | None = None
    body_json: str | None = None


class Call:
    """One recorded boundary call (a tool or an LLM call), in sequence order.

    ``input`` and ``output`` are the recorded JSON values (parsed on first access);
    ``input_json`` and ``output_json`` their canonical text.
    """

    __slots__ = (
        "_input",
        "_output",
        "attributes",
        "end_time_ns",
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
        "start_time_ns",
    )

    _MISSING: Any = object()

    def __init__(
        self,
        *,
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
        start_time_ns: int = 0,
        end_time_ns: int = 0,
        attributes: dict[str, Any] | None = None,
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
        self.start_time_ns = start_time_ns
        self.end_time_ns = end_time_ns
        self.attributes = attributes or {}
        self._input = Call._MISSING
        self._output = Call._MISSING

    @property
    def input(self) -> Any:
        if self._input is Call._MISSING:
            self._input = orjson.loads(self.input_json)
        return self._input

    @property
    def output(self) -> Any:
        if self._output is Call._MISSING:
            self._output = None if self.output_json is None else orjson.loads(self.output_json)
        return self._output

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e6

    @property
    def label(self) -> str:
        """``tool search_flights`` or ``llm openai/gpt-4o``: how messages name the call."""
        return call_label(self.kind, self.name, self.provider)

    def describe(self) -> dict[str, Any]:
        """A plain dict of what identifies the call (used in errors and reports)."""
        described: dict[str, Any] = {"seq": self.seq, "kind": self.kind, "name": self.name}
        if self.provider is not None:
            described["provider"] = self.provider
        described["input"] = self.input
        return described

    def __repr__(self) -> str:
        return f"Call(seq={self.seq}, {self.label}, input={self.input_json[:60]})"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def call_from_span(span: dict[str, Any], attributes: dict[str, Any]) -> Call:
    """Build a ``Call`` from an OTLP/JSON span of a boundary and its decoded attributes."""
    error = None
    error_type = attributes.get(A.ERROR_TYPE)
    if error_type is not None:
        error = CallFailure(
            type=str(error_type),
            message=str(attributes.get(A.ERROR_MESSAGE, "")),
            builtin=bool(attributes.get(A.ERROR_BUILTIN, False)),
            cancelled=bool(attributes.get(A.CANCELLED, False)),
            args_json=_text(attributes.get(A.ERROR_ARGS)),
            status_code=_integer(attributes.get(A.ERROR_STATUS_CODE)),
            body_json=_text(attributes.get(A.ERROR_BODY)),
        )
    kind = attributes[A.KIND]
    if kind == A.KIND_LLM:
        name = attributes.get(A.GEN_AI_REQUEST_MODEL)
        provider = attributes.get(A.GEN_AI_PROVIDER_NAME)
    else:
        name = attributes.get(A.GEN_AI_TOOL_NAME)
        provider = None
    return Call(
        seq=attributes[A.SEQ],
        kind=kind,
        name=str(name),
        provider=None if provider is None else str(provider),
        input_json=attributes.get(A.INPUT, "null"),
        output_json=attributes.get(A.OUTPUT),
        error=error,
        policy=str(attributes.get(A.REPLAY_POLICY, "frozen")),
        span_id=span["spanId"],
        parent_span_id=span.get("parentSpanId") or None,
        start_time_ns=int(span.get("startTimeUnixNano", 0)),
        end_time_ns=int(span.get("endTimeUnixNano", 0)),
        attributes=attributes,
    )


# --- bundle -------------------------------------------------------------------------


@dataclass(frozen=True)
class StateChange:
    """A recorded ``session.record_state_change`` (values are JSON)."""

    key: str
    before: Any
    after: Any
    time_ns: int


class SpanLines(Sequence[dict[str, Any]]):
    """The spans of a loaded bundle, in file order, each parsed when it is accessed.

    Loading validates every line but keeps only its bytes: holding every span as nested
    dicts would cost far more memory and garbage-collector time than replay needs (it
    needs the calls). Each access returns a freshly parsed OTLP/JSON span dict, except
    the run span (index 0), which is parsed once and kept.
    """

    __slots__ = ("_data", "_ends", "_first", "_starts")

    def __init__(
        self, data: bytes, starts: Sequence[int], ends: Sequence[int], first: dict[str, Any]
    ) -> None:
        self._data = data
        self._starts = starts
        self._ends = ends
        self._first = first

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("span index out of range")
        if index == 0:
            return self._first
        span: dict[str, Any] = orjson.loads(self._data[self._starts[index] : self._ends[index]])
        return span

    def __iter__(self) -> Iterator[dict[str, Any]]:
        data, loads = self._data, orjson.loads
        yield self._first
        for start, end in zip(self._starts[1:], self._ends[1:], strict=True):
            yield loads(data[start:end])

    def __repr__(self) -> str:
        return f"<{len(self)} spans>"


@dataclass
class Bundle:
    """A loaded bundle: the manifest, the run's input and output, and its calls.

    ``spans`` are the OTLP/JSON spans in file order (parsed on access, see
    :class:`SpanLines`); ``span_parents`` maps each span id to its parent's (or None).
    """

    path: Path | None
    manifest: Manifest
    spans: Sequence[dict[str, Any]]
    calls: list[Call]
    run_input: Any
    output: Any
    has_run_input: bool
    has_output: bool
    state_changes: list[StateChange]
    redactions: list[dict[str, Any]]
    span_parents: dict[str, str | None] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def agent_name(self) -> str:
        return self.manifest.agent_name

    @property
    def status(self) -> str:
        return self.manifest.status

    @property
    def failure(self) -> Failure | None:
        return self.manifest.failure

    @property
    def run_span(self) -> dict[str, Any]:
        return self.spans[0]

    def _repr_html_(self) -> str | None:
        """In a notebook, the run's HTML report (see ``sftrace.render_html``)."""
        return repr_html(self)

    def __repr__(self) -> str:
        return (
            f"Bundle(agent={self.agent_name!r}, run_id={self.run_id!r}, "
            f"status={self.status!r}, calls={len(self.calls)})"
        )


# --- loading ------------------------------------------------------------------------

# format_version -> function upgrading (manifest, span lines) to the next version.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def load_finished_bundle(root: Path, *, verify_integrity: bool = False) -> Bundle:
    """Load and validate the finished bundle at ``root`` (see ``load_bundle``)."""
    _check_directory(root)
    manifest_raw = _read_manifest(root)
    manifest = _validate_manifest(root, manifest_raw)
    if verify_integrity:
        problems = integrity_problems(root)
        if problems:
            raise BundleError(problems[0], path=str(root / CHECKSUMS_FILE))
    return _load_spans(root, manifest)


def bundle_root(path: str | os.PathLike[str]) -> Path:
    try:
        text = os.fspath(path)
    except TypeError:
        raise BundleError(f"a bundle path must be a str or os.PathLike, got {path!r}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\0" in text:
        raise BundleError(f"invalid bundle path {text!r}: it contains a NUL character")
    return Path(text)


def _check_directory(root: Path) -> None:
    if not root.exists():
        raise BundleError(f"bundle not found: {str(root)!r} does not exist", path=str(root))
    if not root.is_dir():
        raise BundleError(
            f"{str(root)!r} is not a bundle: a .sftrace bundle is a directory", path=str(root)
        )
    if (root / JOURNAL_FILE).exists() or (root / HEADER_FILE).exists():
        raise BundleError(
            f"{str(root)!r} is an unfinished recording (a journal left by a run that did not "
            f"end); run `sftrace recover {root}` to turn it into a bundle",
            path=str(root),
        )


def _bundle_file(root: Path, name: str, limit: int) -> Path:
    """The path of a file inside the bundle, refusing symlinks and oversized files."""
    os.close(open_bundle_file(root, name, limit)[0])
    return root / name


def open_bundle_file(root: Path, name: str, limit: int) -> tuple[int, int]:
    """Open a file of the bundle for reading; return (descriptor, size).

    Only a regular file directly inside the bundle opens: no symbolic link (O_NOFOLLOW,
    checked on the opened file, so it cannot be swapped in between), no FIFO or device
    (O_NONBLOCK, then fstat), nothing over ``limit`` bytes.
    """
    candidate = root / name
    display = str(candidate)
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise BundleError(f"{display}: {name!r} is not a file name inside the bundle", path=display)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(candidate, flags)
    except FileNotFoundError:
        raise BundleError(f"{display}: missing file {name!r}", path=display) from None
    except OSError as exc:
        if os.path.islink(candidate):
            raise BundleError(
                f"{display}: is a symbolic link; bundles must hold regular files only",
                path=display,
            ) from None
        if os.path.isdir(candidate):
            raise BundleError(f"{display}: is not a regular file", path=display) from None
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BundleError(f"{display}: is not a regular file", path=display)
        if info.st_size > limit:
            raise BundleError(
                f"{display}: {info.st_size} bytes is over the limit of {limit} bytes; refusing "
                f"to load it",
                path=display,
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_bundle_file(root: Path, name: str, limit: int) -> bytes:
    """The bytes of a file of the bundle (see :func:`open_bundle_file`)."""
    fd, _ = open_bundle_file(root, name, limit)
    display = str(root / name)
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    if len(data) > limit:  # it grew while being read
        raise BundleError(
            f"{display}: over the limit of {limit} bytes; refusing to load it", path=display
        )
    return data


def _read_manifest(root: Path) -> dict[str, Any]:
    display = str(root / MANIFEST_FILE)
    try:
        raw = orjson.loads(read_bundle_file(root, MANIFEST_FILE, MAX_MANIFEST_BYTES))
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{display}: invalid JSON: {exc}", path=display) from None
    if not isinstance(raw, dict):
        raise BundleError(
            f"{display}: expected a JSON object, got {type(raw).__name__}", path=display
        )
    return raw


def _validate_manifest(root: Path, raw: dict[str, Any]) -> Manifest:
    return validated_manifest(raw, str(root / MANIFEST_FILE))


def validated_manifest(raw: Any, display: str) -> Manifest:
    """Check a parsed manifest (upgrading an older version); raise ``BundleError``."""
    if not isinstance(raw, dict):
        raise BundleError(
            f"{display}: expected a JSON object, got {type(raw).__name__}", path=display
        )
    if raw.get("format") != FORMAT_NAME:
        raise BundleError(not_a_bundle_message(display, raw.get("format")), path=display)
    version = raw.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(
            f"{display}: format_version must be an integer, got {version!r}", path=display
        )
    if version not in SUPPORTED_VERSIONS:
        newest = max(SUPPORTED_VERSIONS)
        hint = (
            "upgrade sftrace to read it"
            if version > newest
            else "this version was never released; the bundle is damaged"
        )
        raise BundleError(
            f"{display}: unsupported bundle format version {version}; this sftrace reads "
            f"versions {sorted(SUPPORTED_VERSIONS)}: {hint}",
            path=display,
        )
    while version < FORMAT_VERSION:
        raw = _UPGRADES[version](raw)
        version = raw["format_version"]
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise BundleError(
            f"{display}: invalid manifest field {where!r}: {first['msg']} "
            f"(got {_short(first.get('input'))})",
            path=display,
        ) from None
    if not _HEX32.fullmatch(manifest.trace_id):
        raise BundleError(
            f"{display}: trace_id must be 32 lowercase hex digits, got {_short(manifest.trace_id)}",
            path=display,
        )
    if manifest.root_span_id is not None and not _HEX16.fullmatch(manifest.root_span_id):
        raise BundleError(
            f"{display}: root_span_id must be 16 lowercase hex digits, got "
            f"{_short(manifest.root_span_id)}",
            path=display,
        )
    return manifest


def _short(value: Any, limit: int = 80) -> str:
    """``repr`` of a value from a bundle, cut so that an error message stays one line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bounded_lines(
    handle: BinaryIO, display: str, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) of an open JSON-lines file, each line as read (with its
    newline, if it has one); a line longer than ``limit`` bytes is refused with a
    ``BundleError`` before it is read whole."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:
            raise BundleError(
                f"{display}:{number}: line longer than {limit} bytes; refusing to read it",
                path=display,
                line=number,
            )
        yield number, line


def _load_spans(root: Path, manifest: Manifest) -> Bundle:
    data = read_bundle_file(root, SPANS_FILE, MAX_SPANS_BYTES)
    return spans_from_data(root, manifest, data, str(root / SPANS_FILE))


def spans_from_data(root: Path | None, manifest: Manifest, data: bytes, display: str) -> Bundle:
    """Check the span lines ``data`` of a bundle (``display`` names them in errors)."""
    # One read, then one parse per line: the parsed span is checked, turned into a Call
    # and dropped; only the line's position is kept (see SpanLines).
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    calls: list[Call] = []
    parents: dict[str, str | None] = {}  # span id -> parent id, in file order
    seqs: set[int] = set()
    run_attributes: dict[str, Any] | None = None
    run_span: dict[str, Any] | None = None
    run_values: tuple[Any, Any, list[Any]] = (None, None, [])
    state_changes: list[StateChange] = []
    trace_id = manifest.trace_id
    loads, find = orjson.loads, data.find
    position, number, size = 0, 0, len(data)
    while position < size:
        number += 1
        end = find(b"\n", position)
        if end < 0:
            end = size
        if (end + 1 if end < size else end) - position > MAX_LINE_BYTES:
            raise BundleError(
                f"{display}:{number}: line longer than {MAX_LINE_BYTES} bytes; refusing to load it",
                path=display,
                line=number,
            )
        if end == size:
            raise BundleError(
                f"{display}:{number}: truncated line (no newline at the end of the file)",
                path=display,
                line=number,
            )
        line = data[position:end]
        start, position = position, end + 1
        if not line.strip():
            continue
        try:
            span = loads(line)
        except orjson.JSONDecodeError as exc:
            raise BundleError(
                f"{display}:{number}: invalid JSON: {exc}", path=display, line=number
            ) from None
        try:
            attributes = _check_span(span, trace_id, parents, seqs)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            message = str(exc) if type(exc) is ValueError else f"malformed span ({_short(exc)})"
            raise BundleError(f"{display}:{number}: {message}", path=display, line=number) from None
        parents[span["spanId"]] = span.get("parentSpanId") or None
        starts.append(start)
        ends.append(end)
        kind = attributes.get(A.KIND)
        if kind == A.KIND_TOOL or kind == A.KIND_LLM:
            try:
                calls.append(call_from_span(span, attributes))
            except (KeyError, TypeError, ValueError) as exc:
                raise BundleError(
                    f"{display}:{number}: malformed {kind} span ({_short(exc)})",
                    path=display,
                    line=number,
                ) from None
        elif kind == A.KIND_RUN:
            if run_span is not None:
                raise BundleError(
                    f"{display}:{number}: a second run span; a bundle holds one run",
                    path=display,
                    line=number,
                )
            if len(starts) != 1:
                raise BundleError(f"{display}:1: the first span must be the run span", path=display)
            if manifest.root_span_id is not None and span["spanId"] != manifest.root_span_id:
                raise BundleError(
                    f"{display}:{number}: the run span is {span['spanId']}, but the manifest's "
                    f"root_span_id is {manifest.root_span_id}",
                    path=display,
                    line=number,
                )
            run_span, run_attributes = span, attributes
            try:
                state_changes = _state_changes(span)
                redactions = _json_attribute(attributes, A.REDACTIONS)
                if redactions is not None and (
                    not isinstance(redactions, list)
                    or not all(isinstance(item, dict) for item in redactions)
                ):
                    raise ValueError(f"{A.REDACTIONS} must be a JSON list of objects")
                run_values = (
                    _json_attribute(attributes, A.RUN_INPUT),
                    _json_attribute(attributes, A.RUN_OUTPUT),
                    redactions or [],
                )
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                message = str(exc) if type(exc) is ValueError else f"malformed ({_short(exc)})"
                raise BundleError(
                    f"{display}:{number}: run span: {message}", path=display, line=number
                ) from None
    if run_span is None or run_attributes is None:
        raise BundleError(f"{display}: no run span (sftrace.kind = 'run')", path=display)
    calls.sort(key=lambda call: call.seq)
    return Bundle(
        path=root,
        manifest=manifest,
        spans=SpanLines(data, starts, ends, run_span),
        calls=calls,
        run_input=run_values[0],
        output=run_values[1],
        has_run_input=A.RUN_INPUT in run_attributes,
        has_output=A.RUN_OUTPUT in run_attributes,
        state_changes=state_changes,
        redactions=run_values[2],
        span_parents=parents,
    )


def _check_span(
    span: Any, trace_id: str, seen: dict[str, str | None], seqs: set[int]
) -> dict[str, Any]:
    """Check one parsed line against the format's rules; return its decoded attributes."""
    if not isinstance(span, dict):
        raise ValueError(f"expected a span object, got {type(span).__name__}")
    span_id = span.get("spanId")
    if not isinstance(span_id, str) or not _HEX16.fullmatch(span_id):
        raise ValueError(f"spanId must be 16 lowercase hex digits, got {_short(span_id)}")
    if span.get("traceId") != trace_id:
        raise ValueError(
            f"span {span_id} has traceId {_short(span.get('traceId'))}, but the manifest's run "
            f"is {trace_id!r}"
        )
    if span_id in seen:
        raise ValueError(f"duplicate spanId {span_id}")
    parent = span.get("parentSpanId") or None
    if parent is not None and parent not in seen:
        raise ValueError(
            f"span {span_id} has parentSpanId {_short(parent)}, which does not come before it "
            f"in the file (a missing parent, or a cycle)"
        )
    if not isinstance(span.get("name"), str):
        raise ValueError(f"span {span_id} has no name")
    _check_span_shape(span, span_id)
    raw_attributes = span.get("attributes", [])
    # decode_attributes, with the common case (a string value) inlined.
    attributes: dict[str, Any] = {}
    for item in raw_attributes:
        value = item.get("value", _NO_VALUE)
        if type(value) is not dict:
            raise ValueError(f"span {span_id}: attribute {_short(item.get('key'))} has no value")
        if "stringValue" in value:
            attributes[item["key"]] = value["stringValue"]
        else:
            try:
                attributes[item["key"]] = decode_value(value)
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                raise ValueError(
                    f"span {span_id}: attribute {_short(item['key'])} has a malformed value "
                    f"({_short(str(exc), 60)})"
                ) from None
    kind = attributes.get(A.KIND)
    if kind is not None:
        seq = attributes.get(A.SEQ)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"span {span_id}: {A.SEQ} must be a non-negative integer")
        if seq in seqs:
            raise ValueError(f"span {span_id}: duplicate {A.SEQ} {seq}")
        seqs.add(seq)
        if kind not in (A.KIND_RUN, A.KIND_TOOL, A.KIND_LLM):
            raise ValueError(f"span {span_id}: unknown {A.KIND} {kind!r}")
        for key in (A.INPUT, A.OUTPUT):
            if key in attributes:
                value = attributes[key]
                if not isinstance(value, str):
                    raise ValueError(f"span {span_id}: {key} must be a JSON string")
                try:
                    orjson.loads(value)
                except orjson.JSONDecodeError as exc:
                    raise ValueError(f"span {span_id}: {key} is not valid JSON ({exc})") from None
        if kind == A.KIND_RUN and parent is not None:
            raise ValueError(f"span {span_id}: the run span must have no parent")
    return attributes


_NO_VALUE: dict[str, Any] = {}  # an attribute without a value (never modified)
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_NANOS = re.compile(r"[0-9]{1,19}")


def _is_hex(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]+", text))


def _nanos(value: Any) -> bool:
    """A time in nanoseconds as OTLP/JSON writes it: a decimal string (or an integer)."""
    if type(value) is str:
        # Checked on every line of a bundle: string methods rather than the regex
        # (same rule: 1 to 19 ASCII digits, below 2**63; 18 digits or fewer always are).
        return (
            0 < len(value) <= 19
            and value.isascii()
            and value.isdigit()
            and (len(value) < 19 or int(value) < 1 << 63)
        )
    if isinstance(value, str):
        return _NANOS.fullmatch(value) is not None and int(value) < 1 << 63
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _check_span_shape(span: dict[str, Any], span_id: str) -> None:
    """The OTLP/JSON fields readers rely on have the types the format says."""
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        if key in span and not _nanos(span[key]):
            raise ValueError(f"span {span_id}: {key} must be a time in nanoseconds")
    kind = span.get("kind", 1)
    if not isinstance(kind, int) or isinstance(kind, bool) or not 0 <= kind <= 5:
        raise ValueError(f"span {span_id}: kind must be an integer from 0 to 5")
    if not isinstance(span.get("status", {}), dict):
        raise ValueError(f"span {span_id}: status must be an object")
    _check_attribute_list(span.get("attributes", []), f"span {span_id}")
    events = span.get("events", [])
    if not isinstance(events, list):
        raise ValueError(f"span {span_id}: events must be a list")
    for index, event in enumerate(events):
        where = f"span {span_id}: event {index}"
        if not isinstance(event, dict) or not isinstance(event.get("name"), str):
            raise ValueError(f"{where} must be an object with a name")
        if "timeUnixNano" in event and not _nanos(event["timeUnixNano"]):
            raise ValueError(f"{where}: timeUnixNano must be a time in nanoseconds")
        _check_attribute_list(event.get("attributes", []), where)
    links = span.get("links", [])
    if not isinstance(links, list) or (links and not all(isinstance(link, dict) for link in links)):
        raise ValueError(f"span {span_id}: links must be a list of objects")


def _check_attribute_list(items: Any, where: str) -> None:
    if not isinstance(items, list):
        raise ValueError(f"{where}: attributes must be a list")
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError(f"{where}: each attribute must be an object with a string key")
        if not isinstance(item.get("value", {}), dict):
            raise ValueError(f"{where}: attribute {_short(item['key'])} has no value object")


def _json_attribute(attributes: dict[str, Any], key: str) -> Any:
    value = attributes.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a JSON string, got {type(value).__name__}")
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{key} is not valid JSON ({exc})") from None


def _state_changes(span: dict[str, Any]) -> list[StateChange]:
    changes = []
    for index, event in enumerate(span.get("events", ())):
        if event.get("name") != A.EVENT_STATE_CHANGE:
            continue
        attributes = decode_attributes(event.get("attributes", ()))
        try:
            changes.append(
                StateChange(
                    key=str(attributes.get(A.EVENT_KEY)),
                    before=_json_attribute(attributes, A.EVENT_BEFORE),
                    after=_json_attribute(attributes, A.EVENT_AFTER),
                    time_ns=int(event.get("timeUnixNano", 0)),
                )
            )
        except ValueError as exc:
            raise ValueError(f"state change event {index}: {exc}") from None
    return changes


# --- integrity ----------------------------------------------------------------------


def integrity_problems(root: Path) -> list[str]:
    """Compare every file of the bundle with ``checksums.sha256``; return the problems.

    Digests show that a bundle changed after it was written; they are not a signature:
    whoever can change the files can also rewrite the digests.
    """
    display = str(root / CHECKSUMS_FILE)
    raw = read_bundle_file(root, CHECKSUMS_FILE, 1024 * 1024)
    problems: list[str] = []
    expected: dict[str, str] = {}
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return [f"{display}: not ASCII text"]
    if not text.endswith("\n"):
        problems.append(f"{display}: truncated (no newline at the end)")
    for number, line in enumerate(
        text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), start=1
    ):
        digest, sep, name = line.partition("  ")
        if (
            not sep
            or len(digest) != 64
            or not _is_hex(digest)
            or not _PLAIN_NAME.fullmatch(name)
            or name in expected
        ):
            problems.append(f"{display}:{number}: malformed line {_short(line)}")
            continue
        expected[name] = digest
    if not problems and raw != _checksums_text(expected):
        # Every line parsed, yet the file is not exactly what a writer produces (order,
        # line endings): it was edited.
        problems.append(
            f"{display}: not in the form sftrace writes (sorted '<sha256>  <name>' lines)"
        )
    for name in (MANIFEST_FILE, SPANS_FILE):
        if name not in expected:
            problems.append(f"{display}: no digest for {name}")
    try:
        present = {entry.name for entry in root.iterdir()} - {CHECKSUMS_FILE}
    except OSError as exc:
        raise BundleError(
            f"{root}: cannot list it ({exc.strerror or exc})", path=str(root)
        ) from None
    for extra in sorted(present - set(expected)):
        problems.append(f"{root / extra}: file not listed in {CHECKSUMS_FILE}")
    for name, digest in sorted(expected.items()):
        try:
            actual = _sha256(root, name)
        except BundleError as exc:
            problems.append(str(exc))
            continue
        if actual != digest:
            problems.append(
                f"{root / name}: digest mismatch (expected {digest[:16]}..., got "
                f"{actual[:16]}...): the file changed after the bundle was written"
            )
    return problems


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def _checksums_text(digests: dict[str, str]) -> bytes:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items())).encode()


def _sha256(root: Path, name: str) -> str:
    fd, _ = open_bundle_file(root, name, MAX_SPANS_BYTES)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "rb") as handle:
            for chunk in iter(lambda: handle.read(1024 * 1024), b""):
                digest.update(chunk)
    except OSError as exc:
        raise BundleError(
            f"{root / name}: cannot be read ({exc.strerror or exc})", path=str(root / name)
        ) from None
    return digest.hexdigest()


# --- validation ---------------------------------------------------------------------


def validate_bundle(path: str | os.PathLike[str], *, verify_integrity: bool = False) -> list[str]:
    """Check the bundle at ``path``; return its problems, one message each (empty: valid).

    Structural checks are those of :func:`load_bundle` plus the consistency of the
    manifest with the spans (totals, run id, root span) and the presence of the digests
    file; ``verify_integrity`` also compares every file with its digest. Raises
    ``BundleError`` when ``path`` is not a bundle at all (missing, not a directory, no
    ``manifest.json``), and ``OSError`` when it cannot be read.
    """
    return check_bundle(Path(path), verify_integrity=verify_integrity)[1]


def check_bundle(root: Path, *, verify_integrity: bool = False) -> tuple[Bundle | None, list[str]]:
    """:func:`validate_bundle`, also returning the loaded bundle when it could be loaded."""
    _check_is_bundle(root)
    problems: list[str] = []
    bundle: Bundle | None = None
    try:
        bundle = load_finished_bundle(root)
    except BundleError as exc:
        problems.append(str(exc))
    if bundle is not None:
        problems.extend(_consistency_problems(bundle))
    if verify_integrity:
        try:
            problems.extend(integrity_problems(root))
        except BundleError as exc:
            problems.append(str(exc))
    else:
        try:
            _bundle_file(root, CHECKSUMS_FILE, 1024 * 1024)
        except BundleError as exc:
            problems.append(str(exc))
    return bundle, problems


def _check_is_bundle(root: Path) -> None:
    """Raise ``BundleError`` unless ``root`` is a directory holding a ``manifest.json``."""
    if not (root / MANIFEST_FILE).exists() and not (root / MANIFEST_FILE).is_symlink():
        _check_directory(root)  # names a missing path, a file, or an unfinished recording
        raise BundleError(
            f"{str(root)!r} is not an sftrace bundle: it has no {MANIFEST_FILE}",
            path=str(root),
        )


def _consistency_problems(bundle: Bundle) -> list[str]:
    """Disagreements between the manifest and the spans (e.g. a span line deleted)."""
    display = str((bundle.path or Path(".")) / MANIFEST_FILE)
    manifest, totals = bundle.manifest, bundle.manifest.totals
    problems = []
    counted = {
        "spans": len(bundle.spans),
        "tool_calls": sum(1 for call in bundle.calls if call.kind == A.KIND_TOOL),
        "llm_calls": sum(1 for call in bundle.calls if call.kind == A.KIND_LLM),
    }
    for field_name, actual in counted.items():
        declared = getattr(totals, field_name)
        if declared != actual:
            problems.append(
                f"{display}: totals.{field_name} is {declared}, but {SPANS_FILE} holds {actual}"
            )
    run_span_id = bundle.run_span.get("spanId")
    if manifest.root_span_id is not None and manifest.root_span_id != run_span_id:
        problems.append(
            f"{display}: root_span_id is {manifest.root_span_id!r}, but the run span in "
            f"{SPANS_FILE} is {run_span_id!r}"
        )
    run_attributes = decode_attributes(bundle.run_span.get("attributes", []))
    span_run_id = run_attributes.get(A.RUN_ID)
    if span_run_id is not None and span_run_id != manifest.run_id:
        problems.append(
            f"{display}: run_id is {manifest.run_id!r}, but the run span in {SPANS_FILE} "
            f"says {span_run_id!r}"
        )
    return problems
