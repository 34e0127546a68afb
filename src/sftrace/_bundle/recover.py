"""Recovering runs whose process died: ``sftrace recover`` and ``load_bundle(allow_partial=True)``.

While a run is recorded, its bundle lives in a hidden sibling directory
``.<name>.<run_id>.partial/`` holding ``header.json`` (which run this is, and the run
span as it started) and ``journal.jsonl`` (one span per line, written as each span
ends). A run killed by SIGKILL, an out-of-memory kill or a power cut leaves that
directory behind. Recovery turns it into a valid bundle:

- every span in the journal is kept; a last line cut off mid-write is dropped (and
  said so), as is any line that is not a valid span of the run;
- the run span, which only ends when the run does, is rebuilt from the header with
  status ``interrupted`` and the run's own trace and span ids;
- a span whose parent never finished is attached to the run span;
- the manifest's ``notes`` say what was lost: calls that had started but never
  finished, the run's output and state changes (kept on the run span until it ends).

A run whose span did reach the journal (the process died while finishing the bundle, or
the disk filled) keeps its real status. A journal still locked by a live process is
refused: it is a recording in progress, not a crashed one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from sftrace._bundle.format import (
    BUNDLE_SUFFIX,
    CHECKSUMS_FILE,
    FORMAT_NAME,
    HEADER_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    PARTIAL_SUFFIX,
    SPANS_FILE,
    STATUS_INTERRUPTED,
)
from sftrace._bundle.manifest import RunTotals, manifest_from_parts
from sftrace._bundle.reader import (
    Bundle,
    bounded_lines,
    load_finished_bundle,
    open_bundle_file,
    read_bundle_file,
    spans_from_data,
    validated_manifest,
)
from sftrace._bundle.writer import (
    check_bundle_target,
    checksums_text,
    dump_manifest,
    fsync_directory,
    place_directory,
    write_file_durably,
)
from sftrace._errors import BundleError
from sftrace._model import attributes as A
from sftrace._model.otlp_json import decode_attributes, encode_attributes, encode_span

_UNSEQUENCED = 1 << 62
_HEX = frozenset("0123456789abcdef")


def run_identity(span: Any) -> dict[str, Any]:
    """What recovery needs to rebuild a run span, for the journal's header.

    The run span as it started (ids, name, start time, attributes: the run's input and
    metadata, already redacted), the resource and the instrumentation scope.
    """
    if not isinstance(span, ReadableSpan):
        return {"pid": os.getpid()}
    scope = span.instrumentation_scope
    return {
        "run_span": encode_span(span),
        "resource": encode_attributes(span.resource.attributes),
        "scope": {"name": scope.name, "version": scope.version or ""} if scope else None,
        "pid": os.getpid(),
    }


# --- finding unfinished recordings ---------------------------------------------------


def is_partial(path: Path) -> bool:
    """True for the directory of an unfinished recording (it holds a header or journal)."""
    return path.is_dir() and (
        (path / HEADER_FILE).exists()
        or (path / JOURNAL_FILE).exists()
        or (path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX))
    )


def unfinished_recordings(path: Path) -> list[Path]:
    """Unfinished recordings for ``path``: itself, the ones meant to become the bundle
    ``path``, or (for a directory of bundles) every one inside it. Newest first."""
    if is_partial(path):
        return [path]
    found: list[Path] = []
    parent = path.parent
    if parent.is_dir():
        found = [p for p in parent.glob(f".{_glob_escape(path.name)}.*{PARTIAL_SUFFIX}")]
    if not found and path.is_dir() and not (path / MANIFEST_FILE).exists():
        found = [p for p in path.glob(f".*{PARTIAL_SUFFIX}")]
    found = [p for p in found if p.is_dir() and not p.is_symlink() and _is_recording(p)]
    return sorted(found, key=_mtime, reverse=True)


def _is_recording(path: Path) -> bool:
    # Skip what place_directory leaves while replacing a bundle, and our own temp dirs.
    name = path.name
    return not name.endswith(f".replaced{PARTIAL_SUFFIX}") and ".recovering-" not in name


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def find_partial(path: Path) -> Path | None:
    """The one unfinished recording ``path`` designates, or None if it designates none.

    Raises ``BundleError`` when several match (the caller must choose one).
    """
    if path.exists() and not is_partial(path):
        return None  # a finished bundle (or not a bundle): the normal loader decides
    candidates = unfinished_recordings(path)
    if not candidates:
        return None
    if len(candidates) > 1:
        listed = ", ".join(repr(str(c)) for c in candidates[:5])
        raise BundleError(
            f"{str(path)!r} matches {len(candidates)} unfinished recordings ({listed}); "
            f"pass the one to use",
            path=str(path),
        )
    return candidates[0]


# --- reading a partial directory ---------------------------------------------------------


@dataclass
class Recovered:
    """A recovered run, ready to be written or loaded: its spans in bundle order."""

    source: Path
    manifest: dict[str, Any]
    lines: list[bytes]
    notes: list[str]
    final_name: str
    calls: int = 0
    lost_calls: list[int] = field(default_factory=list)

    @property
    def spans_bytes(self) -> bytes:
        return b"".join(line + b"\n" for line in self.lines)

    def bundle(self) -> Bundle:
        """The recovered run as a loaded ``Bundle`` (nothing is written)."""
        display = f"{self.source / JOURNAL_FILE} (recovered)"
        manifest = validated_manifest(self.manifest, display)
        bundle = spans_from_data(None, manifest, self.spans_bytes, display)
        bundle.path = self.source
        return bundle


def read_partial(partial: Path) -> Recovered:
    """Rebuild the run left in ``partial``; raise ``BundleError`` when nothing can be."""
    display = str(partial)
    try:
        info = os.lstat(partial)
    except OSError as exc:
        raise BundleError(f"{display}: cannot read it ({exc.strerror})", path=display) from None
    if not stat.S_ISDIR(info.st_mode):
        raise BundleError(
            f"{display}: not an unfinished recording (an unfinished recording is a "
            f"directory holding {HEADER_FILE} and {JOURNAL_FILE})",
            path=display,
        )
    finished = _finished_bundle(partial)
    if finished is not None:
        return finished
    header = _read_header(partial)
    return _rebuild(partial, header)


def _read_header(partial: Path) -> dict[str, Any]:
    path = partial / HEADER_FILE
    display = str(path)
    data = _read_small(path, MAX_MANIFEST_BYTES)
    if data is None:
        raise BundleError(
            f"{display}: missing; without it the run cannot be identified (the journal is "
            f"kept, nothing was changed)",
            path=display,
        )
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{display}: invalid JSON: {exc}", path=display) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise BundleError(f"{display}: not an sftrace journal header", path=display)
    trace_id = header.get("trace_id")
    if not (isinstance(trace_id, str) and len(trace_id) == 32 and set(trace_id) <= _HEX):
        raise BundleError(
            f"{display}: trace_id must be 32 lowercase hex digits, got {trace_id!r}",
            path=display,
        )
    return header


def _read_small(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file inside a bundle (no symlinks), or None if missing."""
    if not os.path.lexists(path):
        return None
    return read_bundle_file(path.parent, path.name, limit)


def _finished_bundle(partial: Path) -> Recovered | None:
    """A bundle that was complete inside ``partial`` (only its final rename was missed)."""
    checksums = _read_small(partial / CHECKSUMS_FILE, 1024 * 1024)
    manifest_bytes = _read_small(partial / MANIFEST_FILE, MAX_MANIFEST_BYTES)
    if checksums is None or manifest_bytes is None or not (partial / SPANS_FILE).is_file():
        return None
    expected = {}
    for line in checksums.decode("ascii", "replace").splitlines():
        digest, _, name = line.partition("  ")
        expected[name] = digest
    try:
        spans = _read_small(partial / SPANS_FILE, MAX_SPANS_BYTES) or b""
    except BundleError:
        return None
    if (
        expected.get(MANIFEST_FILE) != hashlib.sha256(manifest_bytes).hexdigest()
        or expected.get(SPANS_FILE) != hashlib.sha256(spans).hexdigest()
    ):
        return None  # a bundle being written when the process died: use the journal
    try:
        manifest = orjson.loads(manifest_bytes)
        bundle = spans_from_data(
            None, validated_manifest(manifest, str(partial / MANIFEST_FILE)), spans, str(partial)
        )
    except (BundleError, orjson.JSONDecodeError):
        return None
    manifest.setdefault("notes", [])
    manifest["notes"] = [
        *manifest["notes"],
        "the run ended and its bundle was complete; only the final rename into place was "
        "interrupted",
    ]
    return Recovered(
        source=partial,
        manifest=manifest,
        lines=[line for line in spans.split(b"\n") if line],
        notes=manifest["notes"],
        final_name=_final_name_from_partial(partial, manifest),
        calls=len(bundle.calls),
    )


def _final_name_from_partial(partial: Path, manifest: dict[str, Any]) -> str:
    name = partial.name
    run_id = str(manifest.get("run_id", ""))
    suffix = f".{run_id}{PARTIAL_SUFFIX}"
    if name.startswith(".") and run_id and name.endswith(suffix):
        return name[1 : -len(suffix)]
    return f"{manifest.get('agent_name', 'agent')}-{run_id}{BUNDLE_SUFFIX}"


# --- the journal ---------------------------------------------------------------------------


def _journal_lines(path: Path, notes: list[str]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the journal; a last line without its newline is dropped."""
    if not os.path.lexists(path):
        notes.append("the journal was missing: no span had been written")
        return
    fd, _ = open_bundle_file(path.parent, path.name, MAX_SPANS_BYTES)
    with os.fdopen(fd, "rb") as handle:
        for number, line in bounded_lines(handle, str(path)):
            if not line.endswith(b"\n"):
                if line.strip(b"\0 \t\r"):
                    notes.append(
                        f"the last journal line was cut off mid-write ({len(line)} bytes); "
                        f"it was dropped"
                    )
                return
            # A power cut can leave zeros where the file system had not written data yet.
            line = line.strip(b"\0 \t\r\n")
            if line:
                yield number, line


@dataclass
class _Span:
    data: dict[str, Any]
    attributes: dict[str, Any]
    number: int

    @property
    def span_id(self) -> str:
        return str(self.data["spanId"])

    @property
    def parent(self) -> str | None:
        parent = self.data.get("parentSpanId")
        return parent if isinstance(parent, str) and parent else None

    @property
    def kind(self) -> Any:
        return self.attributes.get(A.KIND)

    @property
    def seq(self) -> int | None:
        seq = self.attributes.get(A.SEQ)
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else None

    @property
    def start(self) -> int:
        return _nanos(self.data.get("startTimeUnixNano"))

    @property
    def end(self) -> int:
        return _nanos(self.data.get("endTimeUnixNano"))

    def label(self) -> str:
        if self.kind in (A.KIND_TOOL, A.KIND_LLM):
            return f"call {self.seq} ({self.data.get('name')})"
        return f"span {self.data.get('name')!r}"


def _nanos(value: Any) -> int:
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return 0
    return nanos if 0 <= nanos < 1 << 63 else 0


def _checked_span(raw: Any, trace_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check a journal line's span; return it and its decoded attributes (or raise ValueError)."""
    if not isinstance(raw, dict):
        raise ValueError(f"not a span object ({type(raw).__name__})")
    span_id = raw.get("spanId")
    if not (isinstance(span_id, str) and len(span_id) == 16 and set(span_id) <= _HEX):
        raise ValueError(f"spanId must be 16 hex digits, got {span_id!r}")
    if raw.get("traceId") != trace_id:
        raise ValueError(f"span {span_id} belongs to another trace ({raw.get('traceId')!r})")
    parent = raw.get("parentSpanId")
    if parent not in (None, "") and not (
        isinstance(parent, str) and len(parent) == 16 and set(parent) <= _HEX
    ):
        raise ValueError(f"span {span_id}: parentSpanId must be 16 hex digits")
    if not isinstance(raw.get("name"), str):
        raise ValueError(f"span {span_id} has no name")
    items = raw.get("attributes", [])
    if not isinstance(items, list) or not all(
        isinstance(item, dict) and isinstance(item.get("key"), str) for item in items
    ):
        raise ValueError(f"span {span_id}: malformed attributes")
    try:
        attributes = decode_attributes(items)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"span {span_id}: malformed attributes ({exc})") from None
    kind = attributes.get(A.KIND)
    if kind is not None:
        if kind not in (A.KIND_RUN, A.KIND_TOOL, A.KIND_LLM):
            raise ValueError(f"span {span_id}: unknown {A.KIND} {kind!r}")
        seq = attributes.get(A.SEQ)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"span {span_id}: {A.SEQ} must be a non-negative integer")
        for key in (A.INPUT, A.OUTPUT):
            value = attributes.get(key)
            if value is not None:
                if not isinstance(value, str):
                    raise ValueError(f"span {span_id}: {key} must be a JSON string")
                try:
                    orjson.loads(value)
                except orjson.JSONDecodeError:
                    raise ValueError(f"span {span_id}: {key} is not valid JSON") from None
    return raw, attributes


def _rebuild(partial: Path, header: dict[str, Any]) -> Recovered:
    trace_id: str = header["trace_id"]
    notes: list[str] = []
    journal = partial / JOURNAL_FILE
    spans: list[_Span] = []
    by_id: dict[str, _Span] = {}
    seqs: set[int] = set()
    run: _Span | None = None
    for number, line in _journal_lines(journal, notes):
        try:
            data, attributes = _checked_span(orjson.loads(line), trace_id)
        except orjson.JSONDecodeError:
            notes.append(f"journal line {number} was not valid JSON; it was dropped")
            continue
        except ValueError as exc:
            notes.append(f"journal line {number} was dropped: {exc}")
            continue
        span = _Span(data, attributes, number)
        if span.span_id in by_id:
            notes.append(f"journal line {number} repeated span {span.span_id}; it was dropped")
            continue
        if span.kind is not None:
            seq = span.seq
            assert seq is not None
            if seq in seqs or (span.kind == A.KIND_RUN) != (seq == 0):
                notes.append(f"journal line {number} has a wrong or repeated seq; it was dropped")
                continue
            seqs.add(seq)
        if span.kind == A.KIND_RUN:
            if span.parent is not None:
                notes.append(f"journal line {number}: a run span with a parent; it was dropped")
                continue
            run = span
        by_id[span.span_id] = span
        spans.append(span)

    if run is not None:
        notes.insert(
            0,
            "the run ended but its bundle was never finished (the process died or the disk "
            "filled while writing it); rebuilt from the journal",
        )
        status_interrupted = False
    else:
        run = _synthesized_run(partial, header, spans, notes)
        spans.insert(0, run)
        by_id[run.span_id] = run
        status_interrupted = True

    ordered = _order(run, spans, by_id, notes)
    calls = [s for s in ordered if s.kind in (A.KIND_TOOL, A.KIND_LLM)]
    finished = {s.seq for s in calls if s.seq is not None}
    highest = max(finished, default=0)
    lost = [seq for seq in range(1, highest) if seq not in finished]
    if lost:
        listed = ", ".join(str(seq) for seq in lost[:20])
        more = f" and {len(lost) - 20} more" if len(lost) > 20 else ""
        notes.append(
            f"calls {listed}{more} are not in the journal (they had not finished, or could "
            f"not be saved): they are not in the bundle"
        )
    if status_interrupted:
        notes.append(
            f"any call in progress after call {highest} when the process died is lost"
            if highest
            else "no call had finished when the process died"
        )
    totals = RunTotals()
    for span in ordered:
        totals.add(_numeric_totals(span.attributes))
    start = run.start
    end = max([run.end, *(s.end for s in ordered)])
    manifest = manifest_from_parts(
        header,
        attributes=run.attributes,
        trace_id=trace_id,
        root_span_id=run.span_id,
        start=start,
        end=end,
        resource_attributes=_list(header.get("resource")),
        scope=header.get("scope") if isinstance(header.get("scope"), dict) else None,
        totals=totals,
    )
    manifest["notes"] = notes
    final_name = header.get("final_name")
    if not isinstance(final_name, str) or not _safe_name(final_name):
        final_name = f"{manifest['agent_name']}-{manifest['run_id']}{BUNDLE_SUFFIX}"
        if not _safe_name(final_name):
            final_name = f"recovered-{trace_id}{BUNDLE_SUFFIX}"
    return Recovered(
        source=partial,
        manifest=manifest,
        lines=[orjson.dumps(span.data) for span in ordered],
        notes=notes,
        final_name=final_name,
        calls=len(calls),
        lost_calls=lost,
    )


def _safe_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _numeric_totals(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes totals are computed from, keeping only numbers where numbers go."""
    numeric = (
        A.GEN_AI_USAGE_INPUT_TOKENS,
        A.GEN_AI_USAGE_OUTPUT_TOKENS,
        A.USAGE_TOTAL_TOKENS,
        A.COST_USD,
    )
    return {
        key: value
        for key, value in attributes.items()
        if key not in numeric or (isinstance(value, int | float) and not isinstance(value, bool))
    }


def _synthesized_run(
    partial: Path, header: dict[str, Any], spans: list[_Span], notes: list[str]
) -> _Span:
    """The run span, rebuilt: it was still open when the process died."""
    trace_id: str = header["trace_id"]
    run_id = str(header.get("run_id") or trace_id)
    agent = str(header.get("agent_name") or "unknown")
    template = header.get("run_span")
    data: dict[str, Any]
    attributes: dict[str, Any] = {}
    if isinstance(template, dict):
        try:
            data, attributes = _checked_span(dict(template), trace_id)
        except ValueError:
            template = None
    if not isinstance(template, dict):
        # An older header, or a run the exporter met without record(): the run span's id
        # is the parent that the top-level spans name but that never reached the journal.
        known = {s.span_id for s in spans}
        orphans = [s for s in spans if s.parent is not None and s.parent not in known]
        # The run started first: its first child is the earliest orphan.
        first = min(orphans, key=lambda s: (s.start, s.seq or 0), default=None)
        root = str(first.parent) if first is not None else secrets.token_hex(8)
        data = {
            "traceId": trace_id,
            "spanId": root,
            "name": f"{A.OPERATION_INVOKE_AGENT} {agent}",
            "kind": 1,
            "startTimeUnixNano": str(min((s.start for s in spans), default=0)),
            "endTimeUnixNano": "0",
            "attributes": encode_attributes(
                {
                    A.KIND: A.KIND_RUN,
                    A.SEQ: 0,
                    A.RUN_ID: run_id,
                    A.GEN_AI_OPERATION_NAME: A.OPERATION_INVOKE_AGENT,
                    A.GEN_AI_AGENT_NAME: agent,
                }
            ),
            "status": {},
        }
        attributes = decode_attributes(data["attributes"])
        notes.append("the journal header did not describe the run span; it was inferred")
    data = dict(data)
    data.pop("parentSpanId", None)
    data.pop("events", None)
    died = max([_nanos(data.get("startTimeUnixNano")), *(s.end for s in spans)])
    with contextlib.suppress(OSError):
        died = max(died, os.stat(partial / JOURNAL_FILE).st_mtime_ns)
    data["endTimeUnixNano"] = str(died)
    redactions = _collected_redactions(header, spans)
    extra: dict[str, Any] = {A.STATUS: STATUS_INTERRUPTED}
    if redactions:
        extra[A.REDACTIONS] = orjson.dumps(redactions, option=orjson.OPT_SORT_KEYS).decode()
    kept = [
        item
        for item in data.get("attributes", [])
        if item.get("key") not in (A.STATUS, A.REDACTIONS, A.RUN_OUTPUT)
    ]
    data["attributes"] = kept + encode_attributes(extra)
    data["status"] = {
        "code": 2,
        "message": "interrupted: the process ended before the run did (recovered by sftrace)",
    }
    attributes = decode_attributes(data["attributes"])
    notes.insert(
        0,
        "recovered from the journal of a run that never ended (its process was killed or "
        "crashed): status 'interrupted'; the run's output, final status and state changes "
        "were lost (they are written when the run ends)",
    )
    return _Span(data, attributes, 0)


def _collected_redactions(header: dict[str, Any], spans: list[_Span]) -> list[dict[str, Any]]:
    """The run's redaction list: the header's (run input, metadata) and each call's."""
    collected = [r for r in _list(header.get("redactions")) if isinstance(r.get("seq"), int)]
    for span in spans:
        text = span.attributes.get(A.REDACTIONS)
        seq = span.seq
        if not isinstance(text, str) or seq is None:
            continue
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(items, list):
            collected.extend({**item, "seq": seq} for item in items if isinstance(item, dict))
    return sorted(
        collected,
        key=lambda r: (r.get("seq", 0), str(r.get("field", "")), str(r.get("path", ""))),
    )


def _order(
    run: _Span, spans: list[_Span], by_id: dict[str, _Span], notes: list[str]
) -> list[_Span]:
    """Spans in bundle order: the run first, then by start time, parents before children.

    A span whose parent is not in the journal (it was still open when the process died)
    is attached to the run span, and said so; so is a span caught in a parent cycle
    (which only a damaged journal has).
    """
    for span in spans:
        parent = span.parent
        if span is not run and (parent is None or parent not in by_id or parent == span.span_id):
            _reparent(span, run, notes)
    reaches_run = {run.span_id}
    for span in spans:
        chain: list[_Span] = []
        current = span
        while current.span_id not in reaches_run:
            if current in chain:
                _reparent(current, run, notes)
                break
            chain.append(current)
            current = by_id[str(current.parent)]
        reaches_run.update(item.span_id for item in chain)
    rest = sorted(
        (span for span in spans if span is not run),
        key=lambda s: (s.start, s.seq if s.seq is not None else _UNSEQUENCED, s.number),
    )
    result = [run]
    placed = {run.span_id}
    for span in rest:
        # Place the span after any of its ancestors not placed yet (same start time).
        pending: list[_Span] = []
        ancestor: _Span | None = span
        while ancestor is not None and ancestor.span_id not in placed:
            pending.append(ancestor)
            ancestor = by_id.get(str(ancestor.parent))
        for item in reversed(pending):
            placed.add(item.span_id)
            result.append(item)
    return result


def _reparent(span: _Span, run: _Span, notes: list[str]) -> None:
    original = span.parent
    span.data["parentSpanId"] = run.span_id
    if original is not None and original != run.span_id:
        notes.append(
            f"{span.label()} was inside a span that never finished ({original}); it is "
            f"attached to the run span"
        )


# --- writing ---------------------------------------------------------------------------------


def _check_not_live(partial: Path) -> None:
    """Refuse a journal that a running process still holds (its lock is held)."""
    journal = partial / JOURNAL_FILE
    if fcntl is None:
        return
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BundleError(
            f"{partial}: this recording is still being written by a running process; "
            f"recover it only after that process has ended",
            path=str(partial),
        ) from None
    except OSError:
        pass  # a file system without locks: nothing to learn
    finally:
        os.close(fd)


def recover_bundle(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Turn an unfinished recording (left by a process that died) into a valid bundle.

    ``path``: the hidden ``.<name>.<run_id>.partial`` directory, or the bundle path the
    run was recording to. The bundle is written to ``output`` (default: the path the run
    was recording to) with status ``interrupted`` (or the run's own status, if the run
    had ended), every finished call intact, and ``notes`` in its manifest saying what
    was lost. The unfinished recording is removed once the bundle is in place. Returns
    the bundle's path. Raises ``BundleError`` when there is nothing to recover, the
    output exists (pass ``overwrite=True``), or the recording is still in progress.
    """
    given = Path(path)
    partial = find_partial(given)
    if partial is None:
        if (given / MANIFEST_FILE).exists():
            raise BundleError(
                f"{str(given)!r} is a finished bundle: there is nothing to recover",
                path=str(given),
            )
        raise BundleError(
            f"no unfinished recording found for {str(given)!r}: pass the hidden "
            f"'.<name>.<run_id>{PARTIAL_SUFFIX}' directory a crashed run left, or the bundle "
            f"path it was recording to",
            path=str(given),
        )
    _check_not_live(partial)
    recovered = read_partial(partial)
    target = Path(output) if output is not None else partial.parent / recovered.final_name
    check_bundle_target(
        target,
        overwrite=overwrite,
        purpose="write the recovered bundle",
        overwrite_hint="pass overwrite=True (--overwrite)",
    )
    _write(recovered, target, overwrite=overwrite)
    shutil.rmtree(partial, ignore_errors=True)
    return target


def _write(recovered: Recovered, target: Path, *, overwrite: bool) -> None:
    """Write the bundle next to ``target``, check it loads, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.recovering-{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
    staging.mkdir()
    try:
        spans = recovered.spans_bytes
        write_file_durably(staging / SPANS_FILE, spans)
        manifest_bytes = dump_manifest(recovered.manifest)
        write_file_durably(staging / MANIFEST_FILE, manifest_bytes)
        digests = {
            MANIFEST_FILE: hashlib.sha256(manifest_bytes).hexdigest(),
            SPANS_FILE: hashlib.sha256(spans).hexdigest(),
        }
        write_file_durably(staging / CHECKSUMS_FILE, checksums_text(digests))
        fsync_directory(staging)
        load_finished_bundle(staging, verify_integrity=True)  # never place what cannot be read back
        place_directory(staging, target, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
