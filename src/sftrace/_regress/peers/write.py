"""A :class:`PeerRun` as an sftrace bundle: the spans recording would have written.

The spans carry the same attributes as a recorded run's (static ones from the
recording boundary's :class:`BoundarySpec`), every value goes through sftrace's
redactor like a recorded value, and the bundle is written by the recording's
:class:`BundleWriter` with a manifest from :func:`manifest_from_parts`, so it loads,
validates and replays like one recorded by sftrace.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import orjson

from sftrace._bundle.load import load_bundle
from sftrace._bundle.manifest import (
    RunTotals,
    environment,
    journal_header,
    manifest_from_parts,
    utc_iso,
)
from sftrace._bundle.names import safe_file_stem
from sftrace._bundle.writer import BundleWriter, partial_dir_for
from sftrace._errors import BundleError
from sftrace._model import attributes as A
from sftrace._model.otlp_json import encode_attributes
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import canonical, dumps
from sftrace._model.stored import stored_attributes
from sftrace._record.boundary import BoundarySpec
from sftrace._record.redaction import KnownSecrets, Redactor, current_redactor
from sftrace._regress.peers.model import JSON, NO_VALUE, PeerCall, PeerError, PeerRun

_ERROR_CODE = 2  # OTLP status code ERROR


class _Values:
    """Redacts one run's values, remembering where (per call, as recording does)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.known = KnownSecrets()
        self.by_seq: list[dict[str, Any]] = []

    def json(self, value: JSON, field: str, records: list[dict[str, Any]], *, keys: bool) -> str:
        text = canonical(value) if keys else dumps(value, what=field, sort_keys=False)
        text, found = self.redactor.redact_json(text, known=self.known, sort_keys=keys)
        records.extend(redaction.record(field) for redaction in found)
        return text

    def text(self, value: str, field: str, records: list[dict[str, Any]]) -> str:
        text, found = self.redactor.redact_text(value, known=self.known)
        records.extend(redaction.record(field) for redaction in found)
        return text

    def note(self, seq: int, records: list[dict[str, Any]]) -> None:
        self.by_seq.extend({"seq": seq, **record} for record in records)


def span_ids(run: PeerRun) -> tuple[str, list[str]]:
    """A trace id and span ids derived from the run, so a re-import gives the same ids."""
    seed = f"{run.source}:{run.run_id}".encode()
    trace_id = hashlib.sha256(seed).hexdigest()[:32]
    span_ids = [
        hashlib.sha256(seed + b":%d" % index).hexdigest()[:16]
        for index in range(len(run.calls) + 1)
    ]
    return trace_id, span_ids


def _error_attributes(error: PeerError, message: str) -> dict[str, Any]:
    return {A.ERROR_TYPE: error.type, A.ERROR_MESSAGE: message, A.ERROR_BUILTIN: error.builtin}


def _exception_event(error: PeerError, message: str, time_ns: int) -> dict[str, Any]:
    return {
        "timeUnixNano": str(time_ns),
        "name": A.EVENT_EXCEPTION,
        "attributes": encode_attributes(
            {
                A.EXCEPTION_TYPE: error.type,
                A.EXCEPTION_MESSAGE: message,
                A.EXCEPTION_ESCAPED: "True",
            }
        ),
    }


def _line(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    kind: int,
    times: tuple[int, int],
    attributes: dict[str, Any],
    events: list[dict[str, Any]],
    status: dict[str, Any],
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(times[0]),
        "endTimeUnixNano": str(times[1]),
        "attributes": encode_attributes(stored_attributes(attributes)),
    }
    if status:
        line["status"] = status
    if parent is not None:
        line["parentSpanId"] = parent
    if events:
        line["events"] = events
    return line


def _call_line(
    run: PeerRun, index: int, call: PeerCall, ids: tuple[str, list[str]], values: _Values
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The span line of call ``index`` (its seq is ``index + 1``) and its attributes."""
    trace_id, span_ids = ids
    seq = index + 1
    policy = ReplayPolicy(call.policy)
    spec = (
        BoundarySpec.tool(call.name, policy, None)
        if call.kind == A.KIND_TOOL
        else BoundarySpec.llm(call.provider or "unknown", call.name, policy, None)
    )
    records = list(call.redactions)
    attributes = dict(spec.attributes)
    attributes[A.SEQ] = seq
    attributes[A.INPUT] = values.json(call.input, "input", records, keys=True)
    end = call.end_ns if call.end_ns is not None else call.start_ns
    events, status = [], {}
    if call.error is not None:
        message = values.text(call.error.message, "error.message", records)
        attributes.update(_error_attributes(call.error, message))
        events.append(_exception_event(call.error, message, end))
        status = {"code": _ERROR_CODE, "message": f"{call.error.type}: {message}"}
    elif call.output is not NO_VALUE:
        attributes[A.OUTPUT] = values.json(call.output, "output", records, keys=False)
    attributes.update(call.usage)
    if records:
        records.sort(key=lambda record: (record["field"], record["path"]))
        attributes[A.REDACTIONS] = canonical(records)
        values.note(seq, records)
    parent = span_ids[0 if call.parent is None else call.parent + 1]
    kind = spec.span_kind.value + 1  # OTLP/JSON numbers span kinds from 1
    line = _line(
        trace_id, span_ids[seq], parent, spec.span_name, kind, (call.start_ns, end),
        attributes, events, status,
    )  # fmt: skip
    return line, attributes


def _run_line(
    run: PeerRun, ids: tuple[str, list[str]], values: _Values
) -> tuple[dict[str, Any], dict[str, Any]]:
    trace_id, span_ids = ids
    records = list(run.redactions)
    attributes: dict[str, Any] = {
        A.KIND: A.KIND_RUN,
        A.SEQ: 0,
        A.RUN_ID: run.run_id,
        A.GEN_AI_OPERATION_NAME: A.OPERATION_INVOKE_AGENT,
        A.GEN_AI_AGENT_NAME: run.agent_name,
    }
    if run.run_input is not NO_VALUE:
        attributes[A.RUN_INPUT] = values.json(run.run_input, "run.input", records, keys=True)
    if run.metadata:
        attributes[A.METADATA] = values.json(run.metadata, "run.metadata", records, keys=True)
    if run.agent_version is not None:
        attributes[A.AGENT_VERSION] = run.agent_version
    events: list[dict[str, Any]] = []
    for state in run.states:
        key = values.text(state.key, "state.key", records)
        before = values.json(state.before, "state.before", records, keys=True)
        after = values.json(state.after, "state.after", records, keys=True)
        event_attributes = {A.EVENT_KEY: key, A.EVENT_BEFORE: before, A.EVENT_AFTER: after}
        events.append(
            {
                "timeUnixNano": str(state.time_ns),
                "name": A.EVENT_STATE_CHANGE,
                "attributes": encode_attributes(event_attributes),
            }
        )
    attributes[A.STATUS] = run.status
    status: dict[str, Any] = {}
    if run.failure is not None:
        message = values.text(run.failure.message, "error.message", records)
        attributes[A.ERROR_TYPE] = run.failure.type
        attributes[A.ERROR_MESSAGE] = message
        if run.failure_call is not None:
            attributes[A.ERROR_STEP] = run.failure_call + 1
        events.append(_exception_event(run.failure, message, run.end_ns))
        status = {"code": _ERROR_CODE, "message": f"{run.failure.type}: {message}"}
    if run.output is not NO_VALUE:
        attributes[A.RUN_OUTPUT] = values.json(run.output, "output", records, keys=False)
    if run.replay_of:
        attributes[A.REPLAY_OF] = run.replay_of
    values.note(0, records)
    redactions = sorted(values.by_seq, key=lambda r: (r["seq"], r["field"], r["path"]))
    if redactions:
        attributes[A.REDACTIONS] = canonical(redactions)
    name = f"{A.OPERATION_INVOKE_AGENT} {run.agent_name}"
    line = _line(
        trace_id, span_ids[0], None, name, 1, (run.start_ns, run.end_ns), attributes, events,
        status,
    )  # fmt: skip
    return line, attributes


def write_peer_run(
    run: PeerRun, path: Path, *, overwrite: bool, redactor: Redactor | None = None
) -> None:
    """Write ``run`` as a bundle at ``path`` (checked by loading it back).

    ``redactor``: the rules values go through (default: ``configure(redaction=...)``'s).
    Raises ``BundleError`` when the result is not a valid bundle (nothing is left behind).
    """
    values = _Values(redactor or current_redactor())
    ids = span_ids(run)
    call_lines = [_call_line(run, index, call, ids, values) for index, call in enumerate(run.calls)]
    root = _run_line(run, ids, values)  # last: it holds every call's redaction records
    header = journal_header(
        ids[0],
        run_id=run.run_id,
        agent_name=run.agent_name,
        final_name=path.name,
        created_at=utc_iso(run.start_ns),
    )
    header["environment"] = {"source": f"{run.source}-import", "imported_by": environment()}
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = BundleWriter(partial_dir_for(path, safe_file_stem(run.run_id)), header)
    try:
        totals = RunTotals()
        for seq, (line, attributes) in enumerate([root, *call_lines]):
            writer.append(orjson.dumps(line), int(line["startTimeUnixNano"]), seq)
            totals.add(attributes)
        manifest = manifest_from_parts(
            header,
            attributes=root[1],
            trace_id=ids[0],
            root_span_id=ids[1][0],
            start=run.start_ns,
            end=run.end_ns,
            resource_attributes=encode_attributes({A.SERVICE_NAME: run.agent_name}),
            scope={"name": A.INSTRUMENTATION_SCOPE, "version": ""},
            totals=totals,
            notes=[
                f"imported from {run.source} ({run.path.name}) on {utc_iso()}",
                *(values.text(note, "note", []) for note in run.notes),
            ],
        )
        writer.finalize(manifest, path, overwrite=overwrite)
    except BaseException:
        writer.discard()
        raise
    try:
        load_bundle(path, verify_integrity=True, eager=True)
    except BundleError:
        shutil.rmtree(path, ignore_errors=True)
        raise
