"""``llm_request`` / ``allm_request``, and the manual ``session.llm_call`` form."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import threading
import typing
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from sftrace._internal import warn_once
from sftrace._model import attributes as A
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import Serializer
from sftrace._model.text import shorten
from sftrace._record.boundary import BoundaryCall, BoundarySpec, Restore, call_async, call_sync
from sftrace._record.intercept import Action
from sftrace._record.run import ActiveRun, current_run, imported_object, qualified_name
from sftrace._record.tool import type_restorer
from sftrace._record.unrecorded import recordable_input

T = TypeVar("T")

_specs: dict[tuple[str, str, str, int], BoundarySpec] = {}
_specs_lock = threading.Lock()


def llm_spec(
    provider: str, model: str, replay_policy: ReplayPolicy | str, serializer: Serializer | None
) -> BoundarySpec:
    if not isinstance(provider, str) or not provider:
        from sftrace._errors import ConfigError

        raise ConfigError(f"provider must be a non-empty string such as 'openai', got {provider!r}")
    if not isinstance(model, str) or not model:
        from sftrace._errors import ConfigError

        raise ConfigError(f"model must be a non-empty string such as 'gpt-4o', got {model!r}")
    key = (provider, model, str(replay_policy), id(serializer))
    spec = _specs.get(key)
    if spec is None or spec.serializer is not serializer:
        policy = ReplayPolicy.parse(replay_policy, parameter="replay_policy")
        spec = BoundarySpec.llm(provider, model, policy, serializer)
        with _specs_lock:
            if len(_specs) > 4096:
                _specs.clear()
            _specs[key] = spec
    return spec


def _keep(value: Any) -> Any:
    return value


# The classes a response is of when it is plain JSON: nothing to record of them.
_JSON_TYPES: frozenset[type] = frozenset({dict, list, str, int, float, bool, type(None)})


class ResponseType:
    """The :class:`~sftrace._record.boundary.ResultType` of LLM calls: the class of a
    response that is a pydantic model or a dataclass (an SDK's ``ChatCompletion``) is
    recorded by its name (``sftrace.output.type``); a replay rebuilds the recorded JSON
    as ``explicit`` (``response_type=``) when given, else as the recorded class when a
    module already imported holds it: nothing a bundle names is imported (as for
    exception classes). When there is no such class, or the JSON does not validate, the
    replay answers with the JSON, saying so once.
    """

    __slots__ = ("explicit",)

    def __init__(self, explicit: Any = None) -> None:
        self.explicit = explicit

    def name(self, value: Any) -> str | None:
        cls = type(value)
        if cls in _JSON_TYPES:
            return None
        if dataclasses.is_dataclass(cls) or _is_model(cls):
            return qualified_name(cls)
        return None

    def restore(self, value: Any, name: str | None) -> Any:
        if self.explicit is not None:
            return _restorer(self.explicit)(value)
        if name is None:  # plain JSON, or recorded before sftrace.output.type
            return value
        found = imported_object(name)
        if isinstance(found, type) and (dataclasses.is_dataclass(found) or _is_model(found)):
            return _restorer(found)(value)
        shown = shorten(repr(name), 200)
        warn_once(
            f"rebuilding an LLM response as {shown}",
            f"the recorded LLM response is a {shown}, which no module imported by now holds "
            f"as a pydantic model or a dataclass (a replay imports nothing a bundle names), "
            f"so the replay answers with its JSON; import it before the replay, or pass "
            f"response_type= to llm_request",
        )
        return value


RECORDED_TYPE = ResponseType()
"""Records the class of a response; a replay rebuilds the recorded class."""


def _is_model(cls: type) -> bool:
    """Whether ``cls`` is a pydantic (v2) model class, importing nothing."""
    main = sys.modules.get("pydantic.main")
    model = getattr(main, "BaseModel", None)
    # a model of its own, not BaseModel itself (which no response is: a crafted bundle)
    return (
        isinstance(cls, type)
        and isinstance(model, type)
        and issubclass(cls, model)
        and cls is not model
    )


def _restorer(annotation: Any) -> Restore:
    """:func:`type_restorer` for a response, built once per type."""
    try:
        return _cached_restorer(annotation)
    except TypeError:  # unhashable (an Annotated with a list, say): built each time
        return _new_restorer(annotation)


def _new_restorer(annotation: Any) -> Restore:
    shown = getattr(annotation, "__qualname__", None) or repr(annotation)
    return type_restorer(annotation, f"an LLM response as {shown}")


_cached_restorer = functools.lru_cache(maxsize=256)(_new_restorer)


def response_type_of(response_type: Any) -> ResponseType:
    """The :class:`ResponseType` for ``llm_request(response_type=)`` (checked)."""
    if response_type is None:
        return RECORDED_TYPE
    if not isinstance(response_type, type) and typing.get_origin(response_type) is None:
        from sftrace._errors import ConfigError

        raise ConfigError(
            f"response_type must be a class (a pydantic model, a dataclass) or a type such "
            f"as list[Model], got {response_type!r}"
        )
    return ResponseType(response_type)


def llm_request(
    *,
    provider: str,
    model: str,
    input: Any,
    call: Callable[[], T],
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    serializer: Serializer | None = None,
    cost_usd: float | None = None,
    response_type: Any = None,
) -> T:
    """Record one LLM call: ``input`` (the request) and what ``call()`` returns.

    During a frozen replay ``call`` is not invoked: the recorded response is returned
    instead, as the object ``call()`` returned when it was a pydantic model or a
    dataclass (an SDK's ``ChatCompletion``), rebuilt from its JSON when a module already
    imported holds its class, and otherwise as its JSON. Token usage and the response
    model are taken from the response when it has a ``usage``
    (``input_tokens``/``prompt_tokens``...) and a ``model``.

    Args:
        provider: the GenAI provider name (``"openai"``, ``"anthropic"``...).
        model: the requested model.
        input: the request (messages, parameters), recorded as JSON and matched on replay.
        call: makes the real request and returns the response.
        replay_policy: ``"frozen"`` (default), ``"live"``, ``"forbidden"``, ``"manual"``
            or ``"derived"``.
        serializer: converts values JSON cannot hold.
        cost_usd: what the call cost, in US dollars (added up in the manifest's totals).
        response_type: what a replay rebuilds the recorded response as, instead of the
            class recorded of it: a pydantic model, a dataclass, or any type pydantic
            can validate (``list[Model]``), as a tool's return annotation.
    """
    spec = llm_spec(provider, model, replay_policy, serializer)
    cost = check_cost(cost_usd)
    result_type = response_type_of(response_type)
    run = current_run()
    if run is None:
        return call()
    input_json = recordable_input(
        run, input, serializer or run.serializer, what="llm_request input"
    )
    return call_sync(
        run, spec, input_json, call, _keep, _cost_attributes(cost), result_type=result_type
    )


async def allm_request(
    *,
    provider: str,
    model: str,
    input: Any,
    call: Callable[[], Awaitable[T]],
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    serializer: Serializer | None = None,
    cost_usd: float | None = None,
    response_type: Any = None,
) -> T:
    """The async twin of :func:`llm_request`: awaits ``call()``."""
    spec = llm_spec(provider, model, replay_policy, serializer)
    cost = check_cost(cost_usd)
    result_type = response_type_of(response_type)
    run = current_run()
    if run is None:
        return await call()
    input_json = recordable_input(
        run, input, serializer or run.serializer, what="allm_request input"
    )
    return await call_async(
        run, spec, input_json, call, _keep, _cost_attributes(cost), result_type=result_type
    )


def check_cost(cost_usd: Any) -> float | None:
    """``cost_usd`` checked: None, or a finite number of dollars >= 0."""
    if cost_usd is None:
        return None
    if (
        isinstance(cost_usd, bool)
        or not isinstance(cost_usd, int | float)
        or not math.isfinite(cost_usd)
        or cost_usd < 0
    ):
        from sftrace._errors import ConfigError

        raise ConfigError(f"cost_usd must be a number of US dollars >= 0, got {cost_usd!r}")
    return float(cost_usd)


def _cost_attributes(cost: float | None) -> dict[str, Any] | None:
    return None if cost is None else {A.COST_USD: cost}


class LLMCallHandle:
    """Handle of a manual LLM call (``with session.llm_call(...) as handle``).

    During a replay ``handle.replayed`` is True and ``handle.output`` holds the recorded
    response (rebuilt as its recorded class, as ``llm_request`` rebuilds it): use it
    instead of calling the model. Otherwise call the model and pass the response to
    :meth:`set_output`.
    """

    def __init__(self, call: BoundaryCall | None) -> None:
        self._call = call
        self._output_set = False
        self.replayed = False
        self.output: Any = None

    def set_output(
        self,
        value: Any,
        *,
        model: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        total_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """Record the response, and what is known about the model, tokens and cost."""
        self.output = value
        self._output_set = True
        call = self._call
        if call is None:
            return
        call.finish(value, result_type=RECORDED_TYPE)
        span = call.span
        extra: dict[str, Any] = {}
        if model is not None:
            extra[A.GEN_AI_RESPONSE_MODEL] = model
        if prompt_tokens is not None:
            extra[A.GEN_AI_USAGE_INPUT_TOKENS] = prompt_tokens
        if completion_tokens is not None:
            extra[A.GEN_AI_USAGE_OUTPUT_TOKENS] = completion_tokens
        if total_tokens is not None:
            extra[A.USAGE_TOTAL_TOKENS] = total_tokens
        if cost_usd is not None:
            extra[A.COST_USD] = float(cost_usd)
        if extra:
            span.set_attributes(extra)


class ManualLLMCall:
    """Context manager behind ``session.llm_call``."""

    def __init__(
        self,
        run: ActiveRun | None,
        *,
        provider: str,
        model: str,
        input: Any,
        replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ) -> None:
        self._run = run
        self._spec = llm_spec(provider, model, replay_policy, None)
        self._input = input
        self._call: BoundaryCall | None = None

    def __enter__(self) -> LLMCallHandle:
        if self._run is None:
            return LLMCallHandle(None)
        input_json = recordable_input(
            self._run, self._input, self._run.serializer, what="llm_call input"
        )
        call = self._call = BoundaryCall(self._run, self._spec, input_json)
        handle = LLMCallHandle(call)
        decision = call.decision
        if decision is not None and decision.action is not Action.EXECUTE:
            if decision.action is Action.RAISE:
                self._fail_and_close(decision.error)
            elif decision.action is Action.RETURN and decision.recorded is not None:
                handle.replayed = True
                handle.output = call.substitute(_keep, result_type=RECORDED_TYPE)
        return handle

    def _fail_and_close(self, error: BaseException | None) -> None:
        assert error is not None
        assert self._call is not None
        self._call.fail(error)
        self._call.close()
        self._call = None
        raise error

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        call = self._call
        if call is None:
            return
        try:
            if exc is not None:
                call.fail(exc)
        finally:
            call.close()
