"""Calls recorded by hand (``session.record_tool_call`` / ``session.record_llm_call``).

For code that cannot be decorated or wrapped. A call recorded by hand goes through the
same boundary as a decorated one (:class:`~sftrace._record.boundary.BoundaryCall`), so
its span is the one ``@trace_tool`` or ``llm_request`` would have written, and a replay
answers a later decorated call of the same name and input from it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Final

from sftrace._errors import ConfigError
from sftrace._model import attributes as A
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import dumps
from sftrace._record.boundary import (
    BoundaryCall,
    BoundarySpec,
    ResultType,
    llm_response_attributes,
)
from sftrace._record.llm import RECORDED_TYPE, check_cost, llm_spec
from sftrace._record.run import ActiveRun

# "Not given" (``None`` is a value: it is recorded as JSON null).
UNSET: Final[Any] = type("Unset", (), {"__repr__": lambda self: "UNSET"})()

_USAGE_KEYS: Final = frozenset(
    {"input_tokens", "prompt_tokens", "output_tokens", "completion_tokens", "total_tokens"}
)
_MAX_AGENT_VERSION: Final = 200


def check_agent_version(agent_version: Any) -> str | None:
    """``agent_version`` checked: None, or a non-empty one-line string."""
    if agent_version is None:
        return None
    if (
        not isinstance(agent_version, str)
        or not agent_version.strip()
        or len(agent_version) > _MAX_AGENT_VERSION
        or any(ch in agent_version for ch in "\r\n")
    ):
        raise ConfigError(
            f"agent_version must be a non-empty one-line string of at most "
            f"{_MAX_AGENT_VERSION} characters (e.g. '1.4.2' or a commit hash), got "
            f"{agent_version!r}"
        )
    return agent_version


def record_tool_call(
    run: ActiveRun,
    name: Any,
    arguments: Any,
    *,
    result: Any,
    error: Any,
    duration_s: Any,
) -> None:
    """``session.record_tool_call``: one tool call, as ``@trace_tool(name=name)`` records it."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"record_tool_call: name must be a non-empty string, got {name!r}")
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise ConfigError(
            f"record_tool_call: arguments must be a dict of parameter name to value (as "
            f"@trace_tool records them), got {arguments!r}"
        )
    _check_outcome("record_tool_call", "result", result, error)
    start, end = _times(run, "record_tool_call", duration_s)
    spec = BoundarySpec.tool(name, ReplayPolicy.FROZEN, None)
    input_json = dumps(dict(arguments), serializer=run.serializer, what=f"tool {name!r} input")
    _record(run, spec, input_json, result, error, None, start, end)


def record_llm_call(
    run: ActiveRun,
    *,
    provider: Any,
    model: Any,
    input: Any,
    output: Any,
    error: Any,
    usage: Any,
    cost_usd: Any,
    duration_s: Any,
) -> None:
    """``session.record_llm_call``: one LLM call, as ``llm_request`` records it."""
    spec = llm_spec(provider, model, ReplayPolicy.FROZEN, None)
    _check_outcome("record_llm_call", "output", output, error)
    extra = _usage_attributes(usage)
    cost = check_cost(cost_usd)
    if cost is not None:
        extra[A.COST_USD] = cost
    start, end = _times(run, "record_llm_call", duration_s)
    input_json = dumps(input, serializer=run.serializer, what="record_llm_call input")
    _record(run, spec, input_json, output, error, extra, start, end, RECORDED_TYPE)


def _record(
    run: ActiveRun,
    spec: BoundarySpec,
    input_json: str,
    value: Any,
    error: BaseException | None,
    extra: dict[str, Any] | None,
    start: int,
    end: int,
    result_type: ResultType | None = None,
) -> None:
    """What ``call_sync`` does, with a result or error given instead of a body to run.

    In a replay the call was made already: a recorded answer is noted as the answer
    (a recorded failure too, without raising it); a call the recording cannot answer
    raises the divergence, as a decorated call would.
    """
    call = BoundaryCall(run, spec, input_json, start_time=start)
    try:
        decision = call.decision
        if decision is not None and decision.recorded_failure:
            assert decision.error is not None
            call.fail(decision.error)
        elif not call.runs_body:
            call.substitute(_keep)
        elif error is not None:
            call.fail(error)
        else:
            call.finish(None if value is UNSET else value, extra, result_type=result_type)
    except BaseException as exc:
        call.fail(exc)
        raise
    finally:
        call.close(end_time=end)


def _keep(value: Any) -> Any:
    return value


def _check_outcome(what: str, field: str, value: Any, error: Any) -> None:
    if error is not None and not isinstance(error, BaseException):
        raise ConfigError(
            f"{what}: error must be an exception instance (e.g. TimeoutError('slow')), "
            f"got {error!r}"
        )
    if error is not None and value is not UNSET:
        raise ConfigError(f"{what}: give either {field}= or error=, not both")


def _times(run: ActiveRun, what: str, duration_s: Any) -> tuple[int, int]:
    """The call's start and end (nanoseconds): it ends now and lasted ``duration_s``,
    but started no earlier than its run (a call never starts before its parent)."""
    end = time.time_ns()
    if duration_s is None:
        return end, end
    if (
        isinstance(duration_s, bool)
        or not isinstance(duration_s, int | float)
        or not math.isfinite(duration_s)
        or duration_s < 0
    ):
        raise ConfigError(
            f"{what}: duration_s must be a number of seconds >= 0, got {duration_s!r}"
        )
    run_start = getattr(run.span, "start_time", None) or 0
    return max(end - round(duration_s * 1e9), min(run_start, end)), end


def _usage_attributes(usage: Any) -> dict[str, Any]:
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise ConfigError(f"record_llm_call: usage must be a dict of token counts, got {usage!r}")
    unknown = sorted(str(key) for key in usage if key not in _USAGE_KEYS)
    if unknown:
        raise ConfigError(
            f"record_llm_call: unknown usage keys {unknown}; use {sorted(_USAGE_KEYS)}"
        )
    for key, count in usage.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(
                f"record_llm_call: usage[{key!r}] must be a token count (an int >= 0), "
                f"got {count!r}"
            )
    return llm_response_attributes({"usage": dict(usage)})


__all__ = ["UNSET", "check_agent_version", "record_llm_call", "record_tool_call"]
