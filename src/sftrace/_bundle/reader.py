"""Reading ``.sftrace`` bundles: the ``Bundle`` model and loading a finished bundle.

Loading never executes anything from a bundle, never follows a path out of the bundle
directory, and bounds what it reads (see ``files``). Every problem raises
``BundleError`` naming the file, the line when there is one, and what is wrong. What a
valid span line is, ``checks.SpanChecker`` says; what a valid manifest is,
``manifest.Manifest``.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import orjson

from sftrace._bundle.checks import SpanChecker
from sftrace._bundle.consistency import consistency_problems
from sftrace._bundle.files import (
    check_bundle_file,
    check_directory,
    check_is_bundle,
    read_json_object,
    read_lines_file,
)
from sftrace._bundle.format import (
    CHECKSUMS_FILE,
    MANIFEST_FILE,
    MAX_LINE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    SPANS_FILE,
)
from sftrace._bundle.integrity import call_digest_problems, integrity_problems
from sftrace._bundle.manifest import Failure, Manifest
from sftrace._bundle.upgrade import GROUP_TYPES, group_member
from sftrace._errors import BundleError, public_error_name
from sftrace._model import attributes as A
from sftrace._model.calls import Call, LineRef, StateChange, call_from_span
from sftrace._model.display import repr_html
from sftrace._model.otlp_json import decode_attributes
from sftrace._model.text import repr_preview


class SpanLines(Sequence[dict[str, Any]]):
    """The spans of a loaded bundle, in file order, each parsed when it is accessed.

    Loading validates every line but keeps only its bytes: holding every span as nested
    dicts would cost far more memory and garbage-collector time than replay needs (it
    needs the calls). Each access returns a freshly parsed OTLP/JSON span dict, except
    the run span (index 0), which is parsed once and kept.
    """

    __slots__ = ("_data", "_first", "_starts")

    def __init__(
        self, data: bytes | bytearray, starts: Sequence[int], first: dict[str, Any]
    ) -> None:
        self._data = data  # every line ends with a newline, the next starts after it
        self._starts = starts
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
        return self._parse(index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield self._first
        for index in range(1, len(self)):
            yield self._parse(index)

    def _parse(self, index: int) -> dict[str, Any]:
        starts = self._starts
        end = starts[index + 1] - 1 if index + 1 < len(starts) else len(self._data) - 1
        span: dict[str, Any] = orjson.loads(self._data[starts[index] : end])
        return span

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
        """Why the run failed; a failure recorded as an exception group holding one
        exception (before sftrace read runs through such groups) is read as that exception,
        as a replay's failure is (the manifest keeps what was recorded)."""
        failure = self.manifest.failure
        if failure is None or failure.type not in GROUP_TYPES:
            return failure
        member = group_member(failure.type, _exception_stacktrace(self.run_span))
        if member is None:
            return failure
        return replace(failure, type=public_error_name(member[0]), message=member[1])

    @property
    def run_span(self) -> dict[str, Any]:
        return self.spans[0]

    @property
    def metadata(self) -> Any:
        """What ``record(metadata=...)`` was given (redacted as recorded), None if nothing
        was (or it is not valid JSON: a hand-edited bundle)."""
        return self.run_json(A.METADATA)

    def run_json(self, key: str) -> Any:
        """The run span's attribute ``key``, a JSON text, parsed; None when the span has
        no such text or it is not valid JSON (a hand-edited bundle)."""
        for item in self.run_span.get("attributes", ()):
            if isinstance(item, dict) and item.get("key") == key:
                value = item.get("value")
                text = value.get("stringValue") if isinstance(value, dict) else None
                try:
                    return orjson.loads(text) if isinstance(text, str) else None
                except orjson.JSONDecodeError:
                    return None
        return None

    def _repr_html_(self) -> str | None:
        """In a notebook, the run's HTML report (see ``sftrace.render_html``)."""
        return repr_html(self)

    def __repr__(self) -> str:
        return (
            f"Bundle(agent={self.agent_name!r}, run_id={self.run_id!r}, "
            f"status={self.status!r}, calls={len(self.calls)})"
        )


# --- loading ------------------------------------------------------------------------


def load_finished_bundle(
    root: Path, *, verify_integrity: bool = False, eager: bool = False
) -> Bundle:
    """Load and validate the finished bundle at ``root`` (see ``load_bundle``)."""
    check_directory(root)
    raw = read_json_object(root, MANIFEST_FILE, MAX_MANIFEST_BYTES)
    manifest = Manifest.from_json(raw, str(root / MANIFEST_FILE))
    if verify_integrity:
        problems = integrity_problems(root)
        if problems:
            raise BundleError(problems[0], path=str(root / CHECKSUMS_FILE))
    data = read_lines_file(root, SPANS_FILE, MAX_SPANS_BYTES, MAX_LINE_BYTES)
    return spans_from_data(root, manifest, data, str(root / SPANS_FILE), eager=eager)


def spans_from_data(
    root: Path | None,
    manifest: Manifest,
    data: bytes | bytearray,
    display: str,
    *,
    eager: bool = False,
) -> Bundle:
    """Check the span lines ``data`` of a bundle (``display`` names them in errors).

    ``eager``: also parse every call's input and output now (they must be JSON text);
    otherwise each is parsed when it is first read, and a malformed one raises
    ``BundleError`` then (see ``Call.input``).
    """
    # One read, then one parse per line: the parsed span is checked, turned into a Call
    # and dropped; only the line's position is kept (see SpanLines).
    loader = _SpanLoader(manifest, display, eager=eager)
    return loader.bundle(root, loader.read(data))


class _SpanLoader:
    """What loading keeps of each checked span line: the calls, the run span and its values."""

    def __init__(self, manifest: Manifest, display: str, *, eager: bool) -> None:
        self.manifest = manifest
        self.display = display
        self.eager = eager
        self.checker = SpanChecker(manifest.trace_id)
        self.calls: list[Call] = []
        self.run: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.run_values: tuple[Any, Any, list[Any]] = (None, None, [])
        self.state_changes: list[StateChange] = []

    def error(self, number: int, message: str) -> BundleError:
        return BundleError(f"{self.display}:{number}: {message}", path=self.display, line=number)

    def read(self, data: bytes | bytearray) -> SpanLines:
        """Check and keep every line of ``data``. Every line comes through this loop, so
        it keeps in local names what it uses per line and calls the checker's fast path
        itself (:meth:`add` checks and explains the other lines)."""
        starts: array[int] = array("q")
        loads, find, view = orjson.loads, data.find, memoryview(data)
        take_plain, eager, display = self.checker.take_plain, self.eager, self.display
        add_call, call_kinds = self.calls.append, (A.KIND_TOOL, A.KIND_LLM)
        position, number, size = 0, 0, len(data)
        while position < size:
            number += 1
            end = find(b"\n", position)
            if end < 0 or end - position >= MAX_LINE_BYTES:
                raise self._line_error(number, position, end, size)
            try:
                span = loads(view[position:end])
            except orjson.JSONDecodeError as exc:
                if not data[position:end].strip():
                    raise self.error(
                        number, "blank line; a bundle holds one span on every line"
                    ) from None
                raise self.error(number, f"invalid JSON: {exc}") from None
            line = (data, position, end, display, number)
            attributes = take_plain(span, eager)
            if attributes is None or attributes.get(A.KIND) not in call_kinds:
                self.add(span, attributes, line)
            else:
                try:
                    add_call(call_from_span(span, attributes, line))
                except (KeyError, TypeError, ValueError) as exc:
                    raise self.malformed(attributes, number, exc) from None
            starts.append(position)
            position = end + 1
        return SpanLines(data, starts, self.run_span())

    def _line_error(self, number: int, position: int, end: int, size: int) -> BundleError:
        """The line at ``position`` is too long, or the last one and has no newline."""
        if (size if end < 0 else end + 1) - position > MAX_LINE_BYTES:
            return self.error(
                number, f"line longer than {MAX_LINE_BYTES} bytes; refusing to load it"
            )
        return self.error(number, "truncated line (no newline at the end of the file)")

    def add(self, span: Any, attributes: dict[str, Any] | None, line: LineRef) -> None:
        """Check (unless the fast path has: ``attributes``) and keep the span parsed from
        ``line`` (see ``LineRef``)."""
        number = line[4]
        if attributes is None:
            problems, attributes = self.checker.take(span, values=self.eager)
            if problems:
                raise self.error(number, problems[0])
        kind = attributes.get(A.KIND)
        if kind == A.KIND_TOOL or kind == A.KIND_LLM:
            try:
                self.calls.append(call_from_span(span, attributes, line))
            except (KeyError, TypeError, ValueError) as exc:
                raise self.malformed(attributes, number, exc) from None
        elif kind == A.KIND_RUN:
            self._add_run(span, attributes, number, first=number == 1)

    def malformed(self, attributes: dict[str, Any], number: int, exc: Exception) -> BundleError:
        """A call span a ``Call`` cannot be made from."""
        return self.error(number, f"malformed {attributes[A.KIND]} span ({repr_preview(exc)})")

    def _add_run(
        self, span: dict[str, Any], attributes: dict[str, Any], number: int, *, first: bool
    ) -> None:
        if self.run is not None:
            raise self.error(number, "a second run span; a bundle holds one run")
        if not first:
            raise BundleError(
                f"{self.display}:1: the first span must be the run span", path=self.display
            )
        root_span_id = self.manifest.root_span_id
        if root_span_id is not None and span["spanId"] != root_span_id:
            raise self.error(
                number,
                f"the run span is {span['spanId']}, but the manifest's root_span_id is "
                f"{root_span_id}",
            )
        self.run = (span, attributes)
        try:
            self.state_changes = _state_changes(span)
            redactions = _json_attribute(attributes, A.REDACTIONS)
            if redactions is not None and (
                not isinstance(redactions, list)
                or not all(isinstance(item, dict) for item in redactions)
            ):
                raise ValueError(f"{A.REDACTIONS} must be a JSON list of objects")
            self.run_values = (
                _json_attribute(attributes, A.RUN_INPUT),
                _json_attribute(attributes, A.RUN_OUTPUT),
                redactions or [],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            message = str(exc) if type(exc) is ValueError else f"malformed ({repr_preview(exc)})"
            raise self.error(number, f"run span: {message}") from None

    def run_span(self) -> dict[str, Any]:
        if self.run is None:
            raise BundleError(
                f"{self.display}: no run span (sftrace.kind = 'run')", path=self.display
            )
        return self.run[0]

    def bundle(self, root: Path | None, spans: SpanLines) -> Bundle:
        assert self.run is not None
        run_attributes = self.run[1]
        self.calls.sort(key=lambda call: call.seq)
        return Bundle(
            path=root,
            manifest=self.manifest,
            spans=spans,
            calls=self.calls,
            run_input=self.run_values[0],
            output=self.run_values[1],
            has_run_input=A.RUN_INPUT in run_attributes,
            has_output=A.RUN_OUTPUT in run_attributes,
            state_changes=self.state_changes,
            redactions=self.run_values[2],
            span_parents=self.checker.parents,
        )


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


def _exception_stacktrace(span: dict[str, Any]) -> str | None:
    """The stack trace of the last ``exception`` event on ``span`` (the one that ended it)."""
    for event in reversed(span.get("events", ())):
        if event.get("name") == A.EVENT_EXCEPTION:
            value = decode_attributes(event.get("attributes", ())).get(A.EXCEPTION_STACKTRACE)
            return value if isinstance(value, str) else None
    return None


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


# --- validation ---------------------------------------------------------------------


def validate_bundle(path: str | os.PathLike[str], *, verify_integrity: bool = True) -> list[str]:
    """Check the bundle at ``path``; return its problems, one message each (empty: valid).

    Structural checks are those of :func:`load_bundle` plus the consistency of the
    manifest with the spans (totals, run id, root span) and the presence of the digests
    file; ``verify_integrity`` (the default) also compares every file with its digest
    and every call's input and output with theirs (``False`` skips that). Raises
    ``BundleError`` when ``path`` is not a bundle at all (missing, not a directory, no
    ``manifest.json``), and ``OSError`` when it cannot be read.
    """
    return check_bundle(Path(path), verify_integrity=verify_integrity)[1]


def check_bundle(root: Path, *, verify_integrity: bool = True) -> tuple[Bundle | None, list[str]]:
    """:func:`validate_bundle`, also returning the loaded bundle when it could be loaded."""
    check_is_bundle(root)
    problems: list[str] = []
    bundle: Bundle | None = None
    try:
        bundle = load_finished_bundle(root, eager=True)
    except BundleError as exc:
        problems.append(str(exc))
    if bundle is not None:
        problems.extend(
            consistency_problems(
                bundle.manifest,
                str(root / MANIFEST_FILE),
                span_count=len(bundle.spans),
                calls=bundle.calls,
                run_span=bundle.run_span,
            )
        )
    if verify_integrity:
        if bundle is not None:
            problems.extend(call_digest_problems(bundle.calls, str(root / SPANS_FILE)))
        try:
            problems.extend(integrity_problems(root))
        except BundleError as exc:
            problems.append(str(exc))
    else:
        try:
            check_bundle_file(root, CHECKSUMS_FILE, 1024 * 1024)
        except BundleError as exc:
            problems.append(str(exc))
    return bundle, problems
