"""The manifest of a bundle: one model for reading and writing ``manifest.json``.

:class:`Manifest` (with :class:`Totals` and :class:`Failure`) is a plain dataclass with
its own checks: ``Manifest.from_json`` validates a parsed manifest (upgrading an older
format version) and ``Manifest.to_json`` gives the dict every writer dumps. Recording,
recovery and collector import all build their manifest here (``manifest_from_parts``),
so they write the same keys. Also here: the journal header (what recovery needs to
rebuild a run) and the one UTC timestamp format, :func:`utc_iso`.

Reading older versions: ``Manifest.from_json`` first has ``upgrade`` check the
manifest's ``format_version`` and turn an older manifest into the current shape, so a
newer reader keeps reading older bundles; a version newer than this reader is refused
with a message saying to upgrade sftrace.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import orjson
from opentelemetry.sdk.trace import ReadableSpan

from sftrace._bundle.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
)
from sftrace._bundle.upgrade import upgraded_manifest
from sftrace._errors import BundleError, public_error_name
from sftrace._model import attributes as A
from sftrace._model.otlp_json import encode_attributes, encode_span, span_id_hex, trace_id_hex
from sftrace._model.text import repr_preview
from sftrace._version import __version__

HEX16 = re.compile(r"[0-9a-f]{16}")
HEX32 = re.compile(r"[0-9a-f]{32}")
STATUSES = (STATUS_COMPLETED, STATUS_FAILED, STATUS_INTERRUPTED)


# How a derived run was made (manifest ``derived_from.how``).
DERIVED_HOW: Final = ("replay", "on_miss", "fork", "minimize")


def _derived_from(text: Any) -> dict[str, Any] | None:
    """The run span's ``sftrace.derived_from`` attribute (JSON text), if well formed."""
    if not isinstance(text, str):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def utc_iso(nanos: int | None = None) -> str:
    """A UTC time as bundles write it (``2026-01-31T12:00:00.123456Z``): now, or
    ``nanos`` nanoseconds after the epoch."""
    moment = (
        _dt.datetime.now(_dt.UTC)
        if nanos is None
        else _dt.datetime.fromtimestamp(nanos / 1e9, _dt.UTC)
    )
    return moment.isoformat().replace("+00:00", "Z")


def iso_to_ns(value: Any, where: str) -> int:
    """An ISO 8601 time with a time zone as nanoseconds since the epoch."""
    if not isinstance(value, str):
        raise BundleError(f"{where}: expected an ISO 8601 time, got {value!r}", path=where)
    try:
        moment = _dt.datetime.fromisoformat(value)
    except ValueError:
        raise BundleError(f"{where}: not an ISO 8601 time: {value!r}", path=where) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta // _dt.timedelta(microseconds=1)) * 1000


def environment() -> dict[str, str]:
    """What produced a bundle (no host names, no user names)."""
    from opentelemetry.sdk.version import __version__ as otel_sdk_version

    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sys.platform,
        "sftrace": __version__,
        "opentelemetry_sdk": otel_sdk_version,
    }


def journal_header(trace_id: int | str, **fields: Any) -> dict[str, Any]:
    """The ``header.json`` of a run's journal: what recovery needs to rebuild it."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "trace_id": trace_id if isinstance(trace_id, str) else trace_id_hex(trace_id),
        "environment": environment(),
        **fields,
    }


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


# --- the model ------------------------------------------------------------------------


def _problem(display: str, where: str, what: str, value: Any) -> BundleError:
    return BundleError(
        f"{display}: invalid manifest field {where!r}: {what} (got {repr_preview(value)})",
        path=display,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int64(value: Any) -> bool:
    """A JSON integer that JSON output can write back (a signed 64-bit one)."""
    return _is_int(value) and -(1 << 63) <= value < 1 << 63


def _take(
    raw: Mapping[str, Any],
    names: dict[str, tuple[str, bool]],
    display: str,
    prefix: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check the known fields of ``raw`` (name -> (type, optional)); return them and the
    unknown fields (kept as they are, so a newer writer's additions survive)."""
    known: dict[str, Any] = {}
    for name, (kind, optional) in names.items():
        if name not in raw:
            if not optional:
                raise _problem(display, prefix + name, "field required", None)
            continue
        value = raw[name]
        if value is None and optional:
            known[name] = None
            continue
        if (kind == "str" and isinstance(value, str)) or (kind == "int" and _is_int64(value)):
            known[name] = value
        elif kind == "float" and (_is_int64(value) or isinstance(value, float)):
            known[name] = float(value)
        elif kind == "dict" and isinstance(value, dict):
            known[name] = value
        elif kind == "strs" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            known[name] = list(value)
        else:
            what = {
                "strs": "a list of strings",
                "dict": "an object",
                "int": "a 64-bit integer",
            }.get(kind, f"a {kind}")
            raise _problem(display, prefix + name, f"must be {what}", value)
    extra = {key: value for key, value in raw.items() if key not in names}
    return known, extra


@dataclass(frozen=True)
class Failure:
    """Why a recorded run failed: the exception's type and message, and the step (the
    sequence number of the call it was raised in, when it came from a call)."""

    type: str | None = None
    message: str | None = None
    step: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    FIELDS: ClassVar[dict[str, tuple[str, bool]]] = {
        "type": ("str", True),
        "message": ("str", True),
        "step": ("int", True),
    }

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "step": self.step, **self.extra}

    @classmethod
    def from_json(cls, raw: Any, display: str) -> Failure:
        if not isinstance(raw, dict):
            raise _problem(display, "failure", "must be an object", raw)
        known, extra = _take(raw, cls.FIELDS, display, "failure.")
        if isinstance(known.get("type"), str):
            known["type"] = public_error_name(known["type"])
        return cls(**known, extra=extra)


@dataclass(frozen=True)
class Totals:
    """What a run holds and cost: spans, calls, tokens, cost and duration."""

    spans: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    FIELDS: ClassVar[dict[str, tuple[str, bool]]] = {
        **{
            name: ("int", True)
            for name in (
                "spans",
                "tool_calls",
                "llm_calls",
                "input_tokens",
                "output_tokens",
                "total_tokens",
            )
        },
        "cost_usd": ("float", True),
        "duration_ms": ("float", True),
    }

    def to_json(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in self.FIELDS}
        return {**values, **self.extra}

    @classmethod
    def from_json(cls, raw: Any, display: str) -> Totals:
        if not isinstance(raw, dict):
            raise _problem(display, "totals", "must be an object", raw)
        known, extra = _take(raw, cls.FIELDS, display, "totals.")
        return cls(**{k: v for k, v in known.items() if v is not None}, extra=extra)


@dataclass(frozen=True)
class Manifest:
    """The bundle's ``manifest.json`` (see ``docs/bundle-format.md``)."""

    run_id: str
    trace_id: str
    agent_name: str
    created_at: str
    status: str
    totals: Totals
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    failure: Failure | None = None
    root_span_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    replay_of: str | None = None  # bundles written before derived_from
    # Where a derived run came from: {"run_id", "how": replay|on_miss|fork|minimize, and
    # for a fork "step" and "overridden"}.
    derived_from: dict[str, Any] | None = None
    agent_version: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    FIELDS: ClassVar[dict[str, tuple[str, bool]]] = {
        "format": ("str", False),
        "format_version": ("int", False),
        "run_id": ("str", False),
        "trace_id": ("str", False),
        "root_span_id": ("str", True),
        "agent_name": ("str", False),
        "created_at": ("str", False),
        "started_at": ("str", True),
        "ended_at": ("str", True),
        "status": ("str", False),
        "failure": ("dict", True),
        "totals": ("dict", False),
        "replay_of": ("str", True),
        "derived_from": ("dict", True),
        "agent_version": ("str", True),
        "environment": ("dict", True),
        "resource": ("dict", True),
        "scope": ("dict", True),
        "notes": ("strs", True),
    }

    def to_json(self) -> dict[str, Any]:
        """The manifest as written to ``manifest.json`` (unknown fields read kept)."""
        return {
            "format": self.format,
            "format_version": self.format_version,
            "run_id": self.run_id,
            "trace_id": self.trace_id,
            "root_span_id": self.root_span_id,
            "agent_name": self.agent_name,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "status": self.status,
            "failure": None if self.failure is None else self.failure.to_json(),
            "totals": self.totals.to_json(),
            # Written only when set: derived_from replaced replay_of (kept for old bundles).
            **({} if self.replay_of is None else {"replay_of": self.replay_of}),
            **({} if self.derived_from is None else {"derived_from": self.derived_from}),
            # Written only when set: bundles of agents without a version stay as they were.
            **({} if self.agent_version is None else {"agent_version": self.agent_version}),
            "environment": self.environment,
            "resource": self.resource,
            "scope": self.scope,
            "notes": self.notes,
            **self.extra,
        }

    def with_notes(self, notes: list[str]) -> Manifest:
        return dataclasses.replace(self, notes=list(notes))

    @classmethod
    def from_json(cls, raw: Any, display: str) -> Manifest:
        """Check a parsed manifest (upgrading an older version); raise ``BundleError``
        naming ``display`` and the field."""
        raw = upgraded_manifest(raw, display)
        known, extra = _take(raw, cls.FIELDS, display)
        if known["status"] not in STATUSES:
            raise _problem(display, "status", f"must be one of {list(STATUSES)}", known["status"])
        if not HEX32.fullmatch(known["trace_id"]):
            raise BundleError(
                f"{display}: trace_id must be 32 lowercase hex digits, got "
                f"{repr_preview(known['trace_id'])}",
                path=display,
            )
        root = known.get("root_span_id")
        if root is not None and not HEX16.fullmatch(root):
            raise BundleError(
                f"{display}: root_span_id must be 16 lowercase hex digits, got "
                f"{repr_preview(root)}",
                path=display,
            )
        failure = known.pop("failure", None)
        known["failure"] = None if failure is None else Failure.from_json(failure, display)
        known["totals"] = Totals.from_json(known["totals"], display)
        for name in ("environment", "resource", "notes"):
            if known.get(name) is None:
                known.pop(name, None)
        derived = known.get("derived_from")
        if derived is not None and not (
            isinstance(derived.get("run_id"), str) and derived.get("how") in DERIVED_HOW
        ):
            raise _problem(
                display,
                "derived_from",
                f"must hold a run_id string and how (one of {list(DERIVED_HOW)})",
                derived,
            )
        if derived is None and known.get("replay_of") is not None:
            known["derived_from"] = {"run_id": known["replay_of"], "how": "replay"}
        return cls(**known, extra=extra)


# --- building the manifest of a run ---------------------------------------------------


@dataclass
class RunTotals:
    """The totals of a run, added up span by span as they end."""

    spans: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, attributes: Any) -> None:
        self.spans += 1
        kind = attributes.get(A.KIND)
        if kind == A.KIND_TOOL:
            self.tool_calls += 1
        elif kind == A.KIND_LLM:
            self.llm_calls += 1
            input_tokens = attributes.get(A.GEN_AI_USAGE_INPUT_TOKENS) or 0
            output_tokens = attributes.get(A.GEN_AI_USAGE_OUTPUT_TOKENS) or 0
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.total_tokens += (
                attributes.get(A.USAGE_TOTAL_TOKENS) or input_tokens + output_tokens
            )
            self.cost_usd += attributes.get(A.COST_USD) or 0.0

    def totals(self, start: int, end: int) -> Totals:
        """The manifest's totals, for a run from ``start`` to ``end`` (nanoseconds)."""
        return Totals(
            spans=self.spans,
            tool_calls=self.tool_calls,
            llm_calls=self.llm_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            cost_usd=round(self.cost_usd, 10),
            duration_ms=round((end - start) / 1e6, 3),
        )


def build_manifest(header: dict[str, Any], root: ReadableSpan, totals: RunTotals) -> Manifest:
    """The manifest of a finished run, from its journal header, run span and totals."""
    context = root.context
    assert context is not None
    scope = root.instrumentation_scope
    return manifest_from_parts(
        header,
        attributes=root.attributes or {},
        trace_id=trace_id_hex(context.trace_id),
        root_span_id=span_id_hex(context.span_id),
        start=root.start_time or 0,
        end=root.end_time or 0,
        resource_attributes=encode_attributes(root.resource.attributes),
        scope={"name": scope.name, "version": scope.version or ""} if scope else None,
        totals=totals,
    )


def manifest_from_parts(
    header: dict[str, Any],
    *,
    attributes: Mapping[str, Any],
    trace_id: str,
    root_span_id: str,
    start: int,
    end: int,
    resource_attributes: list[dict[str, Any]],
    scope: dict[str, Any] | None,
    totals: RunTotals,
    notes: list[str] | None = None,
) -> Manifest:
    """The manifest of a finished run from plain values (recording, recovery, import).

    ``resource_attributes`` are OTLP/JSON key-value objects; ``start``/``end`` nanoseconds.
    """
    status = attributes.get(A.STATUS) or STATUS_COMPLETED
    derived_from = _derived_from(attributes.get(A.DERIVED_FROM))
    failure = None
    if status == STATUS_FAILED:
        failure = Failure(
            type=attributes.get(A.ERROR_TYPE),
            message=attributes.get(A.ERROR_MESSAGE),
            step=attributes.get(A.ERROR_STEP),
        )
    return Manifest(
        run_id=str(attributes.get(A.RUN_ID) or header.get("run_id")),
        trace_id=trace_id,
        root_span_id=root_span_id,
        agent_name=str(attributes.get(A.GEN_AI_AGENT_NAME) or header.get("agent_name")),
        created_at=header.get("created_at") or utc_iso(start),
        started_at=utc_iso(start),
        ended_at=utc_iso(end),
        status=status,
        failure=failure,
        totals=totals.totals(start, end),
        replay_of=None if derived_from is not None else attributes.get(A.REPLAY_OF),
        derived_from=derived_from,
        agent_version=attributes.get(A.AGENT_VERSION),
        environment=header.get("environment") or environment(),
        resource={"attributes": resource_attributes},
        scope=scope,
        notes=list(notes or ()),
    )
