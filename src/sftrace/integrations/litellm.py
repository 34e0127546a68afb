"""Record and replay LiteLLM calls (``pip install "sftrace[litellm]"``).

::

    import litellm
    from sftrace import record, replay
    from sftrace.integrations.litellm import instrument

    instrument()
    with record("support-agent", output="run.sftrace"):
        litellm.completion(model="openai/gpt-4o", messages=[...])
    with replay("run.sftrace"):  # no request is sent, to any provider
        litellm.completion(model="openai/gpt-4o", messages=[...])

:func:`instrument` replaces ``litellm.completion`` and ``litellm.acompletion`` (call them
through the module, or import them after ``instrument()``: a name imported before,
``from litellm import completion``, keeps the function it was bound to) until
:func:`uninstrument`. Streaming (``stream=True``) is recorded too. Outside
``record()``/``replay()`` LiteLLM behaves exactly as before.

Recorded, per call (an LLM span):
    the real provider and model as LiteLLM resolves them (``openai/gpt-4o`` is provider
    ``openai``, model ``gpt-4o``; ``custom_llm_provider=`` is honoured), the request, the
    response and its token usage.

The request, as recorded and compared by a strict replay:
    every argument of the call (``model`` as written, ``messages``, ``tools``,
    ``temperature``, ``stream``, ``response_format``...) as canonical JSON, except what
    configures the transport rather than the request: ``api_key``, ``api_base``,
    ``base_url``, ``api_version``, ``client``, ``shared_session``, ``timeout``,
    ``extra_headers``, ``num_retries``, ``max_retries``, ``metadata``,
    ``litellm_call_id``, ``litellm_logging_obj`` (secrets, addresses and ids that change
    from environment to environment), ``stream=False``, and the JSON paths given as
    ``ignore_fields``.

The response, as recorded:
    a ``ModelResponse`` as its JSON, with where LiteLLM sent it and the cost it computed
    (``_hidden_params``: ``custom_llm_provider``, ``response_cost``, ``api_base`` without
    user, password or query, ``model_id``, ``litellm_model_name``,
    ``provider_response_model``). A stream is ``{"chunks": [...], "complete": ...,
    "model": ..., "usage": ..., "stream": ...}``: every ``ModelResponseStream`` chunk in
    order, each with the same ``_hidden_params`` (``stream_options={"include_usage":
    True}`` adds the usage on the last one), and the stream's own ``model``,
    ``custom_llm_provider`` (the routed ``gpt-4o``, ``openai``) and ``_hidden_params``.

During a frozen replay:
    nothing is sent. ``completion``/``acompletion`` return a ``ModelResponse`` equal to the
    recorded one (a None ``logprobs`` included); with ``stream=True`` a
    ``CustomStreamWrapper`` with the recorded ``model``, ``custom_llm_provider`` and
    ``_hidden_params`` (a stream recorded before they were: where LiteLLM routes the call)
    yielding the recorded chunks as ``ModelResponseStream`` objects (``for``/``async
    for``), so ``litellm.stream_chunk_builder`` works on them as before.

Not recorded: LiteLLM's other endpoints (``embedding``, ``responses``, ``text_completion``,
the ``Router``). A provider error is recorded with LiteLLM's exception type and raised
again as that type when it can be rebuilt, else as :class:`sftrace.RecordedDependencyError`.
LiteLLM fetches its model-cost map from the internet when imported unless
``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set: set it in tests (sftrace's own do).
"""

from __future__ import annotations

import functools
import inspect
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import litellm
from litellm import CustomStreamWrapper, ModelResponse
from litellm.types.utils import ModelResponseStream

from sftrace._internal import internal_error
from sftrace._model.calls import CallFailure
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import loads
from sftrace._record.boundary import BoundaryCall
from sftrace._record.failure import ErrorCodec, ErrorDetails, register_error_codec
from sftrace._record.llm import llm_spec
from sftrace.integrations._common import (
    JSON,
    ClassPatches,
    Ending,
    Options,
    StreamRecorder,
    StreamReplay,
    arecord_items,
    areplayed_items,
    await_recorded_cancellation,
    ending,
    inside_sdk_call,
    materialize,
    record_items,
    recording_run,
    replayed_items,
    request_json,
    substitute_stream,
    summary,
    wire_json,
)
from sftrace.integrations._sdk_streams import first_model, last_usage

__all__ = ["instrument", "uninstrument"]

# Arguments that configure where and how the request goes, not what it asks.
TRANSPORT_ARGUMENTS = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "client",
        "shared_session",
        "timeout",
        "extra_headers",
        "num_retries",
        "max_retries",
        "metadata",
        "litellm_call_id",
        "litellm_logging_obj",
    }
)
_HIDDEN = "_hidden_params"
# What LiteLLM keeps beside a response, a chunk or a stream (``_hidden_params``) that is
# recorded and given back: where the call went and what it cost. Left out: what changes
# from run to run (timings, ``litellm_call_id``) and the provider's response headers.
_KEPT_HIDDEN = (
    "custom_llm_provider",
    "response_cost",
    "api_base",
    "model_id",
    "litellm_model_name",
    "provider_response_model",
)
# The recorded stream's own attributes: the provider and model LiteLLM routed it to.
_STREAM = "stream"
_STREAM_ATTRIBUTES = ("model", "custom_llm_provider")
_patches = ClassPatches()
# LiteLLM prefixes its exceptions' messages with their name ("litellm.RateLimitError: ").
_MESSAGE_PREFIX = re.compile(r"^litellm\.\w+: ")


def instrument(
    *, replay_policy: ReplayPolicy | str = "frozen", ignore_fields: Iterable[str] = ()
) -> None:
    """Record ``litellm.completion`` and ``litellm.acompletion`` calls made inside
    ``record()`` and answer them from the recording inside ``replay()``. Idempotent;
    :func:`uninstrument` undoes it.

    Args:
        replay_policy: how a replay treats these calls (``"frozen"``: answered from the
            recording; ``"live"``: made for real in live and hybrid replays).
        ignore_fields: JSON paths of the request left out of what is recorded and
            compared (``"messages.*.name"``, ``"user"``).
    """
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    register_error_codec(ErrorCodec(name="litellm", describe=_describe, rebuild=_rebuild))
    module = cast(type, litellm)  # a module's functions patch like a class's methods
    _patches.patch(module, "completion", functools.partial(_wrap, options=options, is_async=False))
    _patches.patch(module, "acompletion", functools.partial(_wrap, options=options, is_async=True))


def uninstrument() -> None:
    """Give ``litellm.completion`` and ``litellm.acompletion`` back their own functions."""
    _patches.restore()


def _wrap(function: Any, *, options: Options, is_async: bool) -> Any:
    signature = inspect.signature(function)
    if is_async:

        @functools.wraps(function)
        async def acompletion(*args: Any, **kwargs: Any) -> Any:
            return await _call_async(options, _arguments(signature, args, kwargs), function)

        return acompletion

    @functools.wraps(function)
    def completion(*args: Any, **kwargs: Any) -> Any:
        return _call_sync(options, _arguments(signature, args, kwargs), function)

    return completion


def _arguments(signature: inspect.Signature, args: Any, kwargs: Any) -> dict[str, Any]:
    """The call's arguments by name (``completion("gpt-4o", messages)`` included)."""
    if not args:
        return dict(kwargs)
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return dict(kwargs)  # the real call raises the TypeError
    extra = bound.pop("kwargs", None)
    return {**bound, **(extra if isinstance(extra, dict) else {})}


def _provider(kwargs: dict[str, Any]) -> tuple[str, str]:
    """The provider and model LiteLLM routes the call to."""
    model = str(kwargs.get("model") or "unknown")
    try:
        resolved, provider, _, _ = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base") or kwargs.get("base_url"),
        )
        return str(provider), str(resolved)
    except Exception:  # an unknown provider: LiteLLM raises when the call is made
        return str(kwargs.get("custom_llm_provider") or "litellm"), model


def _begin(options: Options, kwargs: dict[str, Any]) -> tuple[BoundaryCall, dict[str, Any]] | None:
    run = recording_run()
    if run is None:
        return None
    kwargs = materialize(kwargs)
    provider, model = _provider(kwargs)
    request = {key: value for key, value in kwargs.items() if key not in TRANSPORT_ARGUMENTS}
    input_json = request_json(request, options, what=f"litellm {provider} completion request")
    return BoundaryCall(run, llm_spec(provider, model, options.policy, None), input_json), kwargs


def _call_sync(options: Options, kwargs: dict[str, Any], function: Callable[..., Any]) -> Any:
    begun = _begin(options, kwargs)
    if begun is None:
        return function(**kwargs)
    call, kwargs = begun
    with ending(call) as end:
        if not call.runs_body:
            return _replayed(end, kwargs)
        with inside_sdk_call():
            response = function(**kwargs)
        if isinstance(response, CustomStreamWrapper):
            end.hand_off()
            return _RecordingStream(response, _stream_recorder(call, response))
        call.finish(_response_output(response))
        return response


async def _call_async(
    options: Options, kwargs: dict[str, Any], function: Callable[..., Awaitable[Any]]
) -> Any:
    begun = _begin(options, kwargs)
    if begun is None:
        return await function(**kwargs)
    call, kwargs = begun
    with ending(call) as end:
        if not call.runs_body:
            await await_recorded_cancellation(call)
            return _replayed(end, kwargs)
        with inside_sdk_call():
            response = await function(**kwargs)
        if isinstance(response, CustomStreamWrapper):
            end.hand_off()
            return _RecordingStream(response, _stream_recorder(call, response))
        call.finish(_response_output(response))
        return response


def _as_json(value: Any) -> JSON:
    """A LiteLLM object with every field: LiteLLM rebuilds equal objects from it (its
    constructors fill defaults that the JSON of set fields only would lose)."""
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    return wire_json(value)


def _stream_recorder(call: BoundaryCall, stream: CustomStreamWrapper) -> StreamRecorder:
    """The recorder of LiteLLM's ``stream``: its chunks, and the stream's own state once
    read (LiteLLM fills in its cost as the chunks go by)."""

    def summarize(chunks: list[JSON]) -> dict[str, Any]:
        found = summary(first_model(chunks), last_usage(chunks))
        state = {
            name: value
            for name in _STREAM_ATTRIBUTES
            if isinstance(value := getattr(stream, name, None), str)
        }
        state |= _kept_hidden(stream)
        return {**found, _STREAM: state} if state else found

    return StreamRecorder(call, summarize, convert=_response_output)


def _response_output(response: Any) -> JSON:
    """A ``ModelResponse`` or stream chunk as recorded: its JSON, and what LiteLLM kept
    beside it (``_KEPT_HIDDEN``)."""
    try:
        output = _as_json(response)
        if isinstance(output, dict):
            output |= _kept_hidden(response)
        return output
    except Exception as exc:
        internal_error("recording a LiteLLM response", exc)
        return None


def _kept_hidden(value: Any) -> dict[str, Any]:
    """``{"_hidden_params": {...}}``: the ``_KEPT_HIDDEN`` entries ``value`` holds, or {}."""
    hidden = getattr(value, _HIDDEN, None)
    if not isinstance(hidden, dict):
        return {}
    kept = {key: hidden[key] for key in _KEPT_HIDDEN if key in hidden and _plain(hidden[key])}
    if isinstance(kept.get("api_base"), str):
        kept["api_base"] = _address(kept["api_base"])
    return {_HIDDEN: kept} if kept else {}


def _address(url: str) -> str:
    """A URL without what may hold credentials (``user:password@``, the query, the
    fragment), which the run's redaction only catches when it knows their form."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return ""


def _plain(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _replayed(end: Ending, kwargs: dict[str, Any]) -> Any:
    """The recorded answer to a call a replay does not make, as LiteLLM's own objects."""
    call = end.call
    if not kwargs.get("stream"):
        return call.substitute(_restore)
    output, replay = substitute_stream(
        call,
        end,
        functools.partial(_restore, cls=ModelResponseStream),
        what="litellm completion(stream=True)",
    )
    state = output.get(_STREAM) if isinstance(output, dict) else None
    return _ReplayStream(replay, state if isinstance(state, dict) else None, kwargs)


def _restore(output: JSON, cls: type[Any] = ModelResponse) -> Any:
    """A recorded response (a ``ModelResponse``) or chunk (``cls``: ``ModelResponseStream``)
    as that object, with what LiteLLM kept beside it."""
    if not isinstance(output, dict):
        return output
    data = dict(output)
    hidden = data.pop(_HIDDEN, None)
    response = cls(**data)
    _refill(response, data)
    if isinstance(hidden, dict):
        response._hidden_params.update(hidden)
    return response


def _refill(rebuilt: Any, recorded: JSON) -> None:
    """Set back the None fields LiteLLM's constructors drop from what was recorded
    (``Choices`` deletes a None ``logprobs``; LiteLLM sets it back on the responses it
    parses, so the recorded run read None where the rebuilt object would raise)."""
    if isinstance(recorded, list) and isinstance(rebuilt, list):
        for rebuilt_item, recorded_item in zip(rebuilt, recorded, strict=False):
            _refill(rebuilt_item, recorded_item)
    if not isinstance(recorded, dict) or not hasattr(rebuilt, "model_dump"):
        return
    for name, value in recorded.items():
        if not isinstance(name, str):
            continue
        try:
            if not hasattr(rebuilt, name):
                if value is None:
                    setattr(rebuilt, name, None)
            elif isinstance(value, (dict, list)):
                _refill(getattr(rebuilt, name), value)
        except Exception as exc:  # a field LiteLLM refuses: left as rebuilt
            internal_error("restoring a LiteLLM response field", exc)


class _RecordingStream(CustomStreamWrapper):  # type: ignore[misc]
    """LiteLLM's stream, iterated through: each chunk is recorded as the caller reads it."""

    def __init__(self, inner: CustomStreamWrapper, recorder: StreamRecorder) -> None:
        # The real stream's state is read through __getattr__; only the iteration is ours.
        self._sftrace_inner = inner
        self._sftrace_recorder = recorder
        self._sftrace_items: Iterator[Any] | None = None
        self._sftrace_aitems: AsyncIterator[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_sftrace"):
            raise AttributeError(name)
        return getattr(self._sftrace_inner, name)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._sftrace_items is None:
            self._sftrace_items = record_items(self._sftrace_inner, self._sftrace_recorder)
        return next(self._sftrace_items)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if self._sftrace_aitems is None:
            self._sftrace_aitems = arecord_items(self._sftrace_inner, self._sftrace_recorder)
        return await self._sftrace_aitems.__anext__()


class _ReplayStream(CustomStreamWrapper):  # type: ignore[misc]
    """A ``CustomStreamWrapper`` yielding recorded chunks and ending as the recorded stream
    did (see ``StreamReplay``); it sends nothing."""

    def __init__(
        self, replay: StreamReplay, state: dict[str, Any] | None, kwargs: dict[str, Any]
    ) -> None:
        # As recorded; a stream recorded before its state was: where LiteLLM routes it.
        if state is None:
            provider, model = _provider(kwargs)
            state = {"model": model, "custom_llm_provider": provider}
        self.model = state.get("model")
        self.custom_llm_provider = state.get("custom_llm_provider")
        hidden = state.get(_HIDDEN)
        self._hidden_params = dict(hidden) if isinstance(hidden, dict) else {}
        self.chunks = list(replay.items)
        self.completion_stream = None
        self.logging_obj = None
        self.sent_last_chunk = False
        # Started by the first read: only the one the caller iterates runs.
        self._sftrace_items = replayed_items(replay)
        self._sftrace_aitems = areplayed_items(replay)
        # A stream dropped before its end still ends its span.
        weakref.finalize(self, replay.close).atexit = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._sftrace_items)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        return await self._sftrace_aitems.__anext__()


# --- errors ---------------------------------------------------------------------------


def _describe(exc: BaseException) -> ErrorDetails | None:
    """A LiteLLM exception's HTTP status and response body, recorded beside its type."""
    if not type(exc).__module__.startswith("litellm."):
        return None
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    return ErrorDetails(
        status_code=status if isinstance(status, int) and not isinstance(status, bool) else None,
        body=body if isinstance(body, (dict, list, str)) else None,
    )


def _rebuild(failure: CallFailure) -> BaseException | None:
    """LiteLLM's own exception for a recorded one (``except litellm.RateLimitError``)."""
    if not failure.type.startswith("litellm."):
        return None
    cls = vars(litellm.exceptions).get(failure.type.rpartition(".")[2])
    if not isinstance(cls, type) or not issubclass(cls, Exception):
        return None
    parameters = inspect.signature(cls.__init__).parameters
    arguments: dict[str, Any] = {
        "message": _MESSAGE_PREFIX.sub("", failure.message, count=1),
        "llm_provider": "",
        "model": "",
    }
    status = failure.status_code
    if "status_code" in parameters:
        arguments["status_code"] = status if status is not None else 500
    if "response" in parameters and status is not None:
        import httpx

        request = httpx.Request("POST", "https://replay.sftrace.invalid/")
        arguments["response"] = httpx.Response(status, request=request)
    if "body" in parameters and failure.body_json is not None:
        arguments["body"] = loads(failure.body_json)
    if not all(name in parameters for name in arguments):
        return None
    error: BaseException = cls(**arguments)
    return error
