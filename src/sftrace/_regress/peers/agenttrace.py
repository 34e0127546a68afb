"""Reading agenttrace-vcr recordings (a run's JSON payload with ``events``) as a PeerRun.

A recording is one JSON object: the run's ``id``, ``agent_name``, ``agent_version``,
``input``, ``output``, ``status``, ``started_at``/``completed_at``, ``metadata`` and
``events``. Events carry a ``sequence`` and an ``event_type``: ``agent_start``,
``tool_call`` (``tool_name``, ``arguments``, ``call_id``), ``tool_response``
(``response``), ``error`` (``response`` = ``{"type", "message"}``; with a ``call_id``
a tool's failure, without one the run's) and ``agent_end``. A call is paired with the
first answer carrying its ``call_id``. Events hold no times: calls are spread evenly
over the run's duration, in sequence order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import orjson

from sftrace._bundle.format import STATUS_COMPLETED, STATUS_FAILED
from sftrace._bundle.manifest import iso_to_ns
from sftrace._errors import BundleError
from sftrace._model import attributes as A
from sftrace._regress.peers.model import PeerCall, PeerError, PeerRun

SOURCE: Final = "agenttrace"
_MAX_BYTES: Final = 1024 * 1024 * 1024
_ANSWERS: Final = ("tool_response", "error")
_EVENT_TYPES: Final = ("agent_start", "tool_call", "tool_response", "error", "agent_end")


def load_payload(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The recording's JSON object; ``BundleError`` when it is not a whole one."""
    source = Path(path)
    display = str(source)
    try:
        with open(source, "rb") as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise BundleError(
            f"{display}: cannot be read ({exc.strerror or exc})", path=display
        ) from None
    if len(data) > _MAX_BYTES:
        raise BundleError(f"{display}: over {_MAX_BYTES} bytes; refusing it", path=display)
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BundleError(
            f"{display}: not a complete JSON document ({exc}); is the file truncated? "
            f"Export the run again with `agenttrace export RUN_ID -o {display} --force`",
            path=display,
        ) from None
    if not isinstance(payload, dict) or not isinstance(payload.get("events"), list):
        raise BundleError(
            f"{display}: not an agenttrace recording (expected a JSON object with an "
            f"'events' list, as `agenttrace export` writes)",
            path=display,
        )
    if not payload.get("id"):
        raise BundleError(f"{display}: the recording has no run 'id'", path=display)
    return payload


def _events(payload: dict[str, Any], display: str) -> list[dict[str, Any]]:
    events = payload["events"]
    for index, event in enumerate(events):
        if (
            not isinstance(event, dict)
            or not isinstance(event.get("sequence"), int)
            or event.get("event_type") not in _EVENT_TYPES
        ):
            raise BundleError(
                f"{display}: events[{index}] is not an agenttrace event (needs an integer "
                f"'sequence' and an 'event_type' of {', '.join(_EVENT_TYPES)}): {event!r:.200}",
                path=display,
            )
    return sorted(events, key=lambda event: event["sequence"])


def read_agenttrace(path: str | os.PathLike[str]) -> PeerRun:
    """Read one agenttrace-vcr recording. Raises ``BundleError`` if it cannot be read."""
    source = Path(path)
    display = str(source)
    payload = load_payload(source)
    events = _events(payload, display)
    start = iso_to_ns(payload.get("started_at"), f"{display}: started_at")
    end = iso_to_ns(payload.get("completed_at") or payload.get("started_at"), display)
    end = max(end, start)
    metadata = dict(payload.get("metadata") or {})
    version = payload.get("agent_version")
    if version is not None and not _is_version(version):
        metadata["agent_version"] = version  # not a one-line label: kept as it was
        version = None
    run = PeerRun(
        source=SOURCE,
        path=source,
        run_id=str(payload["id"]),
        agent_name=str(payload.get("agent_name") or "agent"),
        start_ns=start,
        end_ns=end,
        status=str(payload.get("status") or ""),
        metadata=metadata,
        agent_version=version,
        replay_of=payload.get("replay_of_run_id") or None,
    )
    if payload.get("input") is not None:
        run.run_input = payload["input"]
    if payload.get("output") is not None:
        run.output = payload["output"]
    _add_calls(run, events)
    if run.status not in (STATUS_COMPLETED, STATUS_FAILED):
        run.problem = f"the run is not finished (status {run.status!r}): nothing to replay"
    elif run.status == STATUS_FAILED and run.failure is None:
        run.failure = PeerError("Exception", "the run failed")
    return run


def _is_version(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and "\n" not in value


def _error(response: Any) -> PeerError:
    if isinstance(response, dict) and "type" in response:
        return PeerError(str(response["type"]), str(response.get("message", "")))
    return PeerError("Exception", "" if response is None else str(response))


def _add_calls(run: PeerRun, events: list[dict[str, Any]]) -> None:
    span = max(run.end_ns - run.start_ns, 0)
    count = len(events) + 1

    def time_of(position: int) -> int:
        return run.start_ns + span * position // count

    open_calls: dict[str, PeerCall] = {}
    for position, event in enumerate(events, 1):
        kind, call_id = event["event_type"], event.get("call_id")
        if kind == "tool_call":
            arguments = event.get("arguments") or {}
            call = PeerCall(
                A.KIND_TOOL, str(event.get("tool_name") or ""), arguments, time_of(position)
            )
            run.calls.append(call)
            if call_id is not None:
                open_calls.setdefault(call_id, call)
        elif kind in _ANSWERS and call_id is not None and call_id in open_calls:
            call = open_calls.pop(call_id)
            call.end_ns = time_of(position)
            if kind == "tool_response":
                call.output = event.get("response")
            else:
                call.error = _error(event.get("response"))
        elif kind == "error" and call_id is None:
            run.failure = _error(event.get("response"))
    unanswered = [call for call in run.calls if not call.finished]
    if unanswered and run.problem is None:
        run.problem = f"tool call {unanswered[0].name!r} has no recorded response"
