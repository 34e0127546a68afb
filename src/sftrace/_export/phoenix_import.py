"""Pulling runs out of Arize Phoenix: :func:`import_from_phoenix`.

Phoenix keeps what OTLP export sent it and serves it through its REST API
(``GET /v1/projects/{project}/spans``). What comes back is close to, not the same as,
what was sent: attributes whole (with values as JSON), ids in hex and times as ISO 8601
with microseconds; no span kind (it is rebuilt from ``sftrace.kind``), no resource and no
span links; and attributes Phoenix derives itself (``llm.system``,
``tool.parameters.*``) beside those OTLP export added. Each span is turned back into
the OTLP/JSON shape collector files have and goes through the same run import, so a
run that can't be replayed (cut by ``max_payload_bytes``, stripped by
``capture_content=False``, spans missing) is skipped with the reason, per run.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from sftrace._bundle.manifest import iso_to_ns
from sftrace._errors import BackendError, ConfigError
from sftrace._export.collector_import import (
    ImportResult,
    ImportSource,
    Traces,
    add_span,
    import_traces,
)
from sftrace._model import attributes as A
from sftrace._model.otlp_json import encode_attributes

PAGE_SIZE: Final = 1000  # the most Phoenix returns per page
# Attributes Phoenix adds to spans on its own when it stores them; sftrace never
# records them, so an importer takes them off sftrace's spans again.
_PHOENIX_DERIVED = frozenset({"llm.system"})
_PHOENIX_DERIVED_PREFIXES = ("tool.parameters.",)
# Recording starts LLM spans as CLIENT and the others as INTERNAL; Phoenix drops kinds.
_SPAN_KIND_INTERNAL, _SPAN_KIND_CLIENT = 1, 3
_STATUS_CODES = {"OK": 1, "ERROR": 2}
_SINCE = re.compile(r"(\d+)\s*([smhdw])")
_SINCE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class PhoenixQuery:
    """Which runs to pull out of a Phoenix project.

    Either ``trace_ids`` (those traces), or the latest ``limit`` runs whose run span
    has ``status`` (``"error"``, ``"ok"`` or ``"any"``), started after ``since``.
    """

    url: str
    project: str
    trace_ids: tuple[str, ...] = ()
    status: str = "error"
    since: _dt.datetime | None = None
    limit: int = 20
    api_key: str | None = None
    timeout: float = 30.0


def import_from_phoenix(
    *,
    url: str,
    project: str,
    output: str | os.PathLike[str],
    trace_ids: Sequence[str] = (),
    status: str = "error",
    since: str | _dt.datetime | _dt.timedelta | None = None,
    limit: int = 20,
    api_key: str | None = None,
    overwrite: bool = False,
    timeout: float = 30.0,
) -> ImportResult:
    """Write one bundle per sftrace run found in a Phoenix project, in ``output``.

    Args:
        url: Phoenix's address, e.g. ``http://127.0.0.1:6006``.
        project: the project's name or id (Phoenix's default project is ``default``).
        output: directory for the bundles (``<agent>-<run_id>.sftrace``).
        trace_ids: import these traces. When empty, the latest ``limit`` runs whose run
            span has ``status`` (``"error"``, ``"ok"`` or ``"any"``) are imported.
        since: only runs started after this time (a datetime, a timedelta ago, or text
            such as ``"24h"``, ``"7d"`` or an ISO 8601 time).
        api_key: sent as ``Authorization: Bearer``; default ``PHOENIX_API_KEY``.
        overwrite: replace bundles that exist (otherwise such runs are skipped).

    Raises ``BackendError`` when Phoenix can't be reached or refuses the query, and
    ``ConfigError`` for bad arguments. Runs that can't be replayed (payloads cut by
    ``max_payload_bytes``, content left out by ``capture_content=False``, spans missing)
    are in the result's ``skipped``, each with the reason.
    """
    if status not in ("error", "ok", "any"):
        raise ConfigError(f"status must be 'error', 'ok' or 'any', got {status!r}")
    if isinstance(since, str):
        since = parse_since(since)
    elif isinstance(since, _dt.timedelta):
        since = _dt.datetime.now(_dt.UTC) - since
    query = PhoenixQuery(
        url=url,
        project=project,
        trace_ids=tuple(trace_ids),
        status=status,
        since=since,
        limit=limit,
        api_key=api_key if api_key is not None else os.environ.get("PHOENIX_API_KEY"),
        timeout=timeout,
    )
    client = _PhoenixClient(query)
    trace_ids = list(dict.fromkeys(query.trace_ids)) or client.failed_run_traces()
    traces: Traces = {}
    spans_read = 0
    for batch in _batches(trace_ids, 50):
        for item in client.spans({"trace_id": batch}):
            spans_read += 1
            add_otlp_span(traces, item, where=f"{query.url} span")
    description = f"Phoenix ({query.url}, project {query.project})"
    result = import_traces(
        traces, output=output, overwrite=overwrite, source=ImportSource("phoenix", description)
    )
    result.spans_read = spans_read
    for trace_id in trace_ids:
        if trace_id.lower() not in traces:
            result.missing_traces.append(trace_id)
    return result


def add_otlp_span(traces: Traces, item: dict[str, Any], *, where: str) -> None:
    """Add one span of Phoenix's REST API to ``traces``, in OTLP/JSON shape."""
    try:
        context = item["context"]
        attributes = dict(item.get("attributes") or {})
        if attributes.get(A.KIND) in (A.KIND_RUN, A.KIND_TOOL, A.KIND_LLM):
            attributes = _without_derived(attributes)
        span_id = str(context["span_id"])
        label = f"{where} {span_id}"
        span: dict[str, Any] = {
            "traceId": str(context["trace_id"]),
            "spanId": span_id,
            "name": str(item.get("name", "")),
            "kind": _SPAN_KIND_CLIENT
            if attributes.get(A.KIND) == A.KIND_LLM
            else _SPAN_KIND_INTERNAL,
            "startTimeUnixNano": iso_to_ns(item.get("start_time"), f"{label}: start_time"),
            "endTimeUnixNano": iso_to_ns(item.get("end_time"), f"{label}: end_time"),
            "attributes": encode_attributes(attributes),
            "status": _status(item),
        }
        if item.get("parent_id"):
            span["parentSpanId"] = str(item["parent_id"])
        events = [
            {
                "timeUnixNano": iso_to_ns(event.get("timestamp"), f"{label}: event time"),
                "name": str(event.get("name", "")),
                "attributes": encode_attributes(event.get("attributes") or {}),
            }
            for event in item.get("events") or ()
        ]
        if events:
            span["events"] = events
        add_span(traces, span, [], None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BackendError(
            f"{where}: Phoenix returned a span sftrace can't read ({exc!r}); is this a "
            f"Phoenix server (the REST API of Phoenix 8 or newer)?"
        ) from None


def parse_since(text: str, *, now: _dt.datetime | None = None) -> _dt.datetime:
    """``24h``, ``30m``, ``7d``, ``2w``, ``1d12h`` (ago) or an ISO 8601 time, as a UTC time."""
    stripped = text.strip()
    parts = _SINCE.findall(stripped)
    if parts and _SINCE.sub("", stripped).strip() == "":
        delta = _dt.timedelta()
        for amount, unit in parts:
            delta += _dt.timedelta(**{_SINCE_UNITS[unit]: int(amount)})
        return (now or _dt.datetime.now(_dt.UTC)) - delta
    try:
        moment = _dt.datetime.fromisoformat(stripped)
    except ValueError:
        raise ConfigError(
            f"--since {text!r} is neither a duration (24h, 30m, 7d, 2w) nor an ISO 8601 time "
            f"(2026-11-30T12:00:00Z)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def _without_derived(attributes: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in attributes.items()
        if key not in _PHOENIX_DERIVED and not key.startswith(_PHOENIX_DERIVED_PREFIXES)
    }


def _status(item: dict[str, Any]) -> dict[str, Any]:
    code = _STATUS_CODES.get(str(item.get("status_code") or "UNSET").upper(), 0)
    status: dict[str, Any] = {"code": code} if code else {}
    if code and item.get("status_message"):
        status["message"] = str(item["status_message"])
    return status


def _batches(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class _PhoenixClient:
    """The few calls of Phoenix's REST API an import makes (standard library HTTP)."""

    def __init__(self, query: PhoenixQuery) -> None:
        if not query.url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--url {query.url!r} is not an http(s) URL; pass Phoenix's address, e.g. "
                f"http://127.0.0.1:6006"
            )
        if query.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {query.limit}")
        self.query = query
        project = urllib.parse.quote(query.project, safe="")
        self.spans_url = f"{query.url.rstrip('/')}/v1/projects/{project}/spans"

    def failed_run_traces(self) -> list[str]:
        """The traces of the latest ``limit`` run spans with the asked status."""
        params: dict[str, Any] = {"attribute": [f"{A.KIND}:{A.KIND_RUN}"]}
        if self.query.status != "any":
            params["status_code"] = [self.query.status.upper()]
        if self.query.since is not None:
            params["start_time"] = self.query.since.isoformat()
        found: list[str] = []
        for item in self.spans(params, newest_first=True):
            trace_id = str(item["context"]["trace_id"])
            if trace_id not in found:
                found.append(trace_id)
            if len(found) >= self.query.limit:
                break
        return found

    def spans(self, params: dict[str, Any], *, newest_first: bool = False) -> Iterator[Any]:
        """Every span the filters select, page after page."""
        page: dict[str, Any] = {
            **params,
            "limit": PAGE_SIZE,
            "sort": "start_time",
            "order": "desc" if newest_first else "asc",
        }
        while True:
            reply = self._get(page)
            data = reply.get("data") if isinstance(reply, dict) else None
            if not isinstance(data, list):
                raise BackendError(
                    f"Phoenix at {self.query.url} answered {self.spans_url} without a span "
                    f"list (got {str(reply)[:200]!r}); is this Phoenix's REST API?"
                )
            yield from data
            cursor = reply.get("next_cursor")
            if not cursor:
                return
            page["cursor"] = cursor

    def _get(self, params: dict[str, Any]) -> Any:
        address = f"{self.spans_url}?{urllib.parse.urlencode(params, doseq=True)}"
        headers = {"Accept": "application/json"}
        if self.query.api_key:
            headers["Authorization"] = f"Bearer {self.query.api_key}"
        request = urllib.request.Request(address, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.query.timeout) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            raise BackendError(self._refused(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendError(
                f"could not reach Phoenix at {self.query.url} ({reason}); is it running, and "
                f"is --url its address (e.g. http://127.0.0.1:6006)?"
            ) from None
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BackendError(
                f"Phoenix at {self.query.url} answered with something other than JSON "
                f"({body[:120]!r}); is --url Phoenix's address?"
            ) from None

    def _refused(self, exc: urllib.error.HTTPError) -> str:
        detail = exc.read()[:300].decode("utf-8", "replace").strip()
        where = f"Phoenix at {self.query.url}"
        if exc.code == 404:
            return (
                f"{where} has no project {self.query.project!r} (HTTP 404: {detail}); pass "
                f"--project with the project's name or id"
            )
        if exc.code in (401, 403):
            return (
                f"{where} refused the request (HTTP {exc.code}); pass --api-key or set "
                f"PHOENIX_API_KEY"
            )
        return f"{where} refused the query (HTTP {exc.code}: {detail})"
