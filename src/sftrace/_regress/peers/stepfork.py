"""Reading stepfork bundles (format ``stepfork``, schema 0.1) as :class:`PeerRun`.

A stepfork bundle is a directory holding ``manifest.json`` (``format``,
``schema_version``, run id, agent name, status and failure), ``events.jsonl`` (one
event per line: ``run_start``, ``tool_call``/``tool_result``,
``llm_request``/``llm_response``, ``state_change``, ``error``, ``run_end``; each with
an id, a step, a parent id and a timestamp), ``redactions.json`` (where values were
redacted, as JSON pointers into an event) and ``integrity.json`` (SHA-256 digests of
the other files, checked here). A call's result names the call as its parent; a
nested call names the call it was made in.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Final

import orjson

from sftrace._bundle.files import (
    bundle_root,
    check_directory,
    read_bundle_file,
    read_optional_file,
)
from sftrace._bundle.format import (
    MAX_MANIFEST_BYTES,
    MAX_SPANS_BYTES,
    STATUS_COMPLETED,
    STATUS_FAILED,
)
from sftrace._bundle.manifest import iso_to_ns
from sftrace._errors import BundleError
from sftrace._model import attributes as A
from sftrace._model.jsonpath import format_path
from sftrace._record.redaction import marker
from sftrace._regress.peers.model import PeerCall, PeerError, PeerRun, PeerState

FORMAT: Final = "stepfork"
SCHEMA_VERSIONS: Final = ("0.1",)
_MANIFEST = "manifest.json"
_EVENTS = "events.jsonl"
_REDACTIONS = "redactions.json"
_INTEGRITY = "integrity.json"
# The marker stepfork puts in place of a redacted value.
_STEPFORK_MARKER: Final = "[REDACTED]"


def _json_object(path: Path, data: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{path}: invalid JSON ({exc})", path=str(path)) from None
    if not isinstance(value, dict):
        raise BundleError(f"{path}: expected a JSON object", path=str(path))
    return value


def check_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the stepfork bundle at ``root``; ``BundleError`` if it is not one
    this reader understands."""
    path = root / _MANIFEST
    check_directory(root)
    manifest = _json_object(path, read_bundle_file(root, _MANIFEST, MAX_MANIFEST_BYTES))
    if manifest.get("format") != FORMAT:
        raise BundleError(
            f"{path}: not a stepfork bundle (format={manifest.get('format')!r}, expected "
            f"{FORMAT!r}); sftrace's own bundles need no import",
            path=str(path),
        )
    version = manifest.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        raise BundleError(
            f"{path}: stepfork schema_version {version!r} is not supported; sftrace imports "
            f"schema {', '.join(SCHEMA_VERSIONS)} (stepfork 0.1 and 0.2): re-record the run "
            f"with such a stepfork, or upgrade sftrace",
            path=str(path),
        )
    return manifest


def _check_integrity(root: Path, files: dict[str, bytes]) -> None:
    path = root / _INTEGRITY
    if not path.exists():
        return
    integrity = _json_object(path, read_bundle_file(root, _INTEGRITY, MAX_MANIFEST_BYTES))
    digests = integrity.get("files")
    if integrity.get("algorithm") != "sha256" or not isinstance(digests, dict):
        raise BundleError(f"{path}: expected sha256 digests under 'files'", path=str(path))
    for name, data in files.items():
        expected = digests.get(name)
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise BundleError(
                f"{root / name}: does not match its digest in {_INTEGRITY} (the file was "
                f"changed after stepfork wrote it); import an untouched copy",
                path=str(root / name),
            )


def _events(root: Path, data: bytes) -> list[dict[str, Any]]:
    events = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{root / _EVENTS}:{number}"
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BundleError(f"{where}: invalid JSON ({exc})", path=str(root / _EVENTS)) from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise BundleError(f"{where}: expected an event object with a 'type'", path=where)
        if not isinstance(event.get("id"), str):
            raise BundleError(f"{where}: the event has no 'id'", path=where)
        event["_where"] = where
        events.append(event)
    return events


def read_stepfork(path: str | os.PathLike[str]) -> PeerRun:
    """Read one stepfork bundle. Raises ``BundleError`` for anything it cannot read."""
    root = bundle_root(path)
    manifest = check_manifest(root)
    files = {
        _MANIFEST: read_bundle_file(root, _MANIFEST, MAX_MANIFEST_BYTES),
        _EVENTS: read_bundle_file(root, _EVENTS, MAX_SPANS_BYTES),
    }
    redactions = read_optional_file(root / _REDACTIONS, MAX_MANIFEST_BYTES)
    if redactions is not None:
        files[_REDACTIONS] = redactions
    _check_integrity(root, files)
    events = _events(root, files[_EVENTS])
    created = iso_to_ns(manifest.get("created_at"), str(root / _MANIFEST))
    run = PeerRun(
        source=FORMAT,
        path=root,
        run_id=str(manifest.get("run_id") or root.stem),
        agent_name=str(manifest.get("agent_name") or "agent"),
        start_ns=created,
        end_ns=created,
        status=str(manifest.get("status")),
    )
    builder = _Builder(run)
    builder.feed(events)
    if _REDACTIONS in files:
        _apply_redactions(run, events, _json_object(root / _REDACTIONS, files[_REDACTIONS]))
    _check_complete(run, manifest, events, [error for _, error in builder.run_errors])
    for step, error in builder.run_errors:
        if run.failure is None or (error.type, error.message) != (
            run.failure.type,
            run.failure.message,
        ):
            # sftrace records exceptions where they are raised; a reported one has no span.
            run.notes.append(f"stepfork error event at step {step}: {error.type}: {error.message}")
    return run


class _Builder:
    """Pairs calls with their results and errors, and finds the parents of calls."""

    def __init__(self, run: PeerRun) -> None:
        self.run = run
        self.calls: dict[str, int] = {}  # event id of a call (or of its result) -> index
        self.run_events: set[str] = set()
        self.run_errors: list[tuple[Any, PeerError]] = []

    def feed(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            handler = getattr(self, "_" + event["type"], None)
            if handler is None:
                raise BundleError(
                    f"{event['_where']}: unknown stepfork event type {event['type']!r}",
                    path=event["_where"],
                )
            try:
                handler(event, iso_to_ns(event.get("timestamp"), event["_where"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise BundleError(
                    f"{event['_where']}: malformed {event['type']} event ({exc!r})",
                    path=event["_where"],
                ) from None

    def _parent(self, event: dict[str, Any]) -> int | None:
        return self.calls.get(event.get("parent_id") or "")

    def _run_start(self, event: dict[str, Any], time: int) -> None:
        self.run_events.add(event["id"])
        self.run.start_ns = time
        if event.get("input") is not None:
            self.run.run_input = event["input"]

    def _call(self, event: dict[str, Any], time: int, call: PeerCall) -> None:
        call.parent = self._parent(event)
        call.policy = str(event.get("replay_policy") or "frozen")
        self.calls[event["id"]] = len(self.run.calls)
        self.run.calls.append(call)

    def _tool_call(self, event: dict[str, Any], time: int) -> None:
        call = PeerCall(A.KIND_TOOL, str(event["name"]), event.get("input"), time)
        self._call(event, time, call)

    def _llm_request(self, event: dict[str, Any], time: int) -> None:
        provider = event.get("provider") or "unknown"
        call = PeerCall(A.KIND_LLM, str(event["model"]), event.get("input"), time, provider)
        self._call(event, time, call)

    def _result(self, event: dict[str, Any], time: int) -> PeerCall:
        index = self._parent(event)
        if index is None:
            raise ValueError(f"its parent_id {event.get('parent_id')!r} is no call")
        self.calls[event["id"]] = index
        call = self.run.calls[index]
        call.end_ns = time
        return call

    def _tool_result(self, event: dict[str, Any], time: int) -> None:
        call = self._result(event, time)
        output = event.get("output")
        if event.get("status") == "error" and isinstance(output, dict):
            kind = str(output.get("error_type") or "Exception")
            call.error = PeerError(kind, str(output.get("message") or kind))
        else:
            call.output = output

    def _llm_response(self, event: dict[str, Any], time: int) -> None:
        call = self._result(event, time)
        call.output = event.get("output")
        for key, attribute in (
            ("model", A.GEN_AI_RESPONSE_MODEL),
            ("prompt_tokens", A.GEN_AI_USAGE_INPUT_TOKENS),
            ("completion_tokens", A.GEN_AI_USAGE_OUTPUT_TOKENS),
            ("total_tokens", A.USAGE_TOTAL_TOKENS),
            ("cost_usd", A.COST_USD),
        ):
            if event.get(key) is not None:
                call.usage[attribute] = event[key]

    def _state_change(self, event: dict[str, Any], time: int) -> None:
        key = str(event.get("key") or "state")
        self.run.states.append(PeerState(time, key, event.get("before"), event.get("after")))

    def _error(self, event: dict[str, Any], time: int) -> None:
        error = PeerError(str(event["error_type"]), str(event.get("message") or ""))
        index = self._parent(event)
        if index is None:  # an error of the run itself, or one the agent reported
            self.run_errors.append((event.get("step"), error))
            return
        call = self.run.calls[index]
        if call.error is None:  # an LLM call that raised (a tool's failure is its result)
            call.error = error
            call.end_ns = time

    def _run_end(self, event: dict[str, Any], time: int) -> None:
        self.run_events.add(event["id"])
        self.run.end_ns = time
        if event.get("output") is not None:
            self.run.output = event["output"]


def _check_complete(
    run: PeerRun,
    manifest: dict[str, Any],
    events: list[dict[str, Any]],
    run_errors: list[PeerError],
) -> None:
    types = {event["type"] for event in events}
    if run.status not in (STATUS_COMPLETED, STATUS_FAILED) or not {"run_start", "run_end"} <= types:
        run.problem = (
            f"not a finished run (status {run.status!r}, events: {', '.join(sorted(types))}): "
            f"a hand-built or partial stepfork trace holds nothing to replay"
        )
        return
    unfinished = [call for call in run.calls if not call.finished]
    if unfinished:
        run.problem = f"{unfinished[0].kind} call {unfinished[0].name!r} has no recorded result"
        return
    failure = manifest.get("failure")
    if run.status == STATUS_FAILED:
        if isinstance(failure, dict) and failure.get("type"):
            run.failure = PeerError(str(failure["type"]), str(failure.get("message") or ""))
        else:
            run.failure = run_errors[-1] if run_errors else PeerError("Exception", "failed")
        step = failure.get("step") if isinstance(failure, dict) else None
        run.failure_call = _call_at_step(run, events, step)


def _call_at_step(run: PeerRun, events: list[dict[str, Any]], step: Any) -> int | None:
    """The call the failure at event ``step`` was raised in (None: the run itself)."""
    by_id = {event["id"]: event for event in events}
    for event in events:
        if event.get("step") == step and event["type"] == "error":
            parent = by_id.get(event.get("parent_id") or "")
            while parent is not None and parent["type"] in ("tool_result", "llm_response"):
                parent = by_id.get(parent.get("parent_id") or "")
            if parent is not None and parent["type"] in ("tool_call", "llm_request"):
                return _call_indices(events)[parent["id"]]
    return None


def _call_indices(events: list[dict[str, Any]]) -> dict[str, int]:
    """Event id of each call -> its index among the run's calls."""
    calls = (event["id"] for event in events if event["type"] in ("tool_call", "llm_request"))
    return {event_id: index for index, event_id in enumerate(calls)}


def _apply_redactions(run: PeerRun, events: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    """Mark what stepfork redacted the way sftrace does, and record where."""
    by_id = {event["id"]: event for event in events}
    call_ids = _call_indices(events)
    for entry in raw.get("entries") or ():
        event = by_id.get(entry.get("event_id")) if isinstance(entry, dict) else None
        pointer = entry.get("path") if event is not None else None
        if event is None or not isinstance(pointer, str):
            continue
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
        if not parts:
            continue
        rule = str(entry.get("reason") or "stepfork")
        path = format_path(_segments(event.get(parts[0]), parts[1:]))
        record = {"field": parts[0], "path": path, "rule": rule}
        kind = event["type"]
        if kind in ("tool_call", "llm_request", "tool_result", "llm_response"):
            target_id = (
                event["id"] if kind in ("tool_call", "llm_request") else event.get("parent_id")
            )
            if target_id not in call_ids:
                continue
            call = run.calls[call_ids[target_id]]
            field = "input" if parts[0] == "input" else "output"
            setattr(call, field, _marked(getattr(call, field), parts[1:], rule))
            call.redactions.append({**record, "field": field})
        elif kind in ("run_start", "run_end"):
            field = "run_input" if kind == "run_start" else "output"
            setattr(run, field, _marked(getattr(run, field), parts[1:], rule))
            run.redactions.append(
                {**record, "field": "run.input" if kind == "run_start" else "output"}
            )


def _marked(value: Any, parts: list[str], rule: str) -> Any:
    """``value`` with stepfork's marker at ``parts`` replaced by sftrace's."""
    if not parts:
        return marker(rule) if value == _STEPFORK_MARKER else value
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict) and head in value:
        return {**value, head: _marked(value[head], rest, rule)}
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        index = int(head)
        return [*value[:index], _marked(value[index], rest, rule), *value[index + 1 :]]
    return value


def _segments(value: Any, parts: list[str]) -> list[str | int]:
    """JSON-pointer ``parts`` as path segments: a part is a list index where ``value``
    holds a list at that point."""
    segments: list[str | int] = []
    for part in parts:
        if isinstance(value, list) and part.isdigit():
            segments.append(int(part))
            value = value[int(part)] if int(part) < len(value) else None
        else:
            segments.append(part)
            value = value.get(part) if isinstance(value, dict) else None
    return segments
