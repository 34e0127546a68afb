"""Record and replay calls made with the Anthropic SDK (``pip install "sftrace[anthropic]"``).

::

    from anthropic import Anthropic
    from sftrace import record
    from sftrace.integrations.anthropic import instrument

    client = instrument(Anthropic())
    with record("support-agent", output="run.sftrace"):
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=512,
                                    messages=[...]) as stream:
            for text in stream.text_stream:
                print(text, end="")

:func:`instrument` records one ``Anthropic``/``AsyncAnthropic`` client (and the copies
it makes of itself with ``client.with_options(...)``); :func:`instrument_all` records
every client until :func:`uninstrument_all`. Instrumented methods: ``messages.create``
(with or without ``stream=True``) and ``messages.stream``. Outside ``record()``/
``replay()`` an instrumented client behaves exactly as before.

Recorded, per call (an LLM span):
    provider ``anthropic``, the requested model, the request, the response and its token
    usage.

The request, as recorded and compared by a strict replay:
    every keyword argument of the call (``model``, ``max_tokens``, ``messages``,
    ``system``, ``tools``, ``temperature``, ``metadata``, ``extra_body``...) as canonical
    JSON (sorted keys, pydantic objects as their fields), except ``extra_headers``,
    ``extra_query`` and ``timeout`` (transport options: secrets, request ids, trace
    headers, deadlines), arguments left at ``NOT_GIVEN``/``omit``, ``stream=False`` (the
    default), and the JSON paths given as ``ignore_fields`` (``"metadata.user_id"``).
    ``messages.stream(...)`` is recorded as ``messages.create(..., stream=True)`` (the
    same HTTP request), with an ``output_format`` type recorded as its JSON schema. The
    replay compares this JSON for equality with the recorded one and reports the
    differing paths when it is not equal.

The response, as recorded:
    a non-streamed ``Message`` is its JSON as the API sent it, plus ``_request_id``
    when the SDK had one. A streamed response is ``{"chunks": [...], "complete": ...,
    "model": ..., "usage": ...}``: every raw stream event in order, whether the caller
    read the stream to its end, and the usage of ``message_start`` updated by
    ``message_delta`` (input and output tokens). A stream that raised keeps the events
    read before the exception, which is the call's error.

During a frozen replay:
    nothing is sent. ``messages.create`` returns a real ``Message`` built from the
    recorded JSON the way the SDK builds it from an HTTP body; with ``stream=True`` an
    ``anthropic.Stream``/``AsyncStream`` yielding the recorded events as the SDK's own
    event types; ``messages.stream(...)`` the SDK's own ``MessageStreamManager`` over
    them, so ``text_stream``, ``get_final_message()``, ``get_final_text()`` and
    iteration work as with the API. ``.response`` of a replayed stream is a placeholder
    200 response with the recorded ``request-id``. After its recorded events a replayed
    stream ends as the recorded one did: it ends, raises the recorded exception, or
    (the recorded caller stopped reading there) diverges if read further.

Not recorded: ``with_raw_response``/``with_streaming_response`` calls (logged once;
they reach the network during a replay too), ``client.beta.messages`` and other
endpoints. A recorded API error is raised again during replay as
:class:`sftrace.RecordedDependencyError` naming the SDK's exception type. Consume or
close a stream inside the ``record()`` block: its span ends with the stream.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from typing import Any, TypeVar

from anthropic import NOT_GIVEN, AsyncStream, Stream
from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager
from anthropic.resources.messages import AsyncMessages, Messages
from anthropic.types import Message, RawMessageStreamEvent

from sftrace._errors import ConfigError
from sftrace._model.policy import ReplayPolicy
from sftrace.integrations._common import JSON, ClassPatches, Options, recording_run, summary
from sftrace.integrations._sdk import Endpoint, call_async, call_sync
from sftrace.integrations._sdk_patching import (
    instrument_client,
    instrument_create,
    instrument_create_class,
    patch_resource,
)
from sftrace.integrations._sdk_streams import declare_sdk

__all__ = ["instrument", "instrument_all", "uninstrument_all"]

ClientT = TypeVar("ClientT")
PROVIDER = "anthropic"


def _summary(chunks: list[JSON]) -> dict[str, Any]:
    """Model and usage of a streamed message: ``message_start``, then ``message_delta``."""
    model = None
    usage: dict[str, Any] | None = None
    for event in chunks:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            model = message.get("model")
            if isinstance(message.get("usage"), dict):
                usage = dict(message["usage"])
        elif kind == "message_delta" and isinstance(event.get("usage"), dict):
            usage = usage or {}
            usage.update({k: v for k, v in event["usage"].items() if v is not None})
    return summary(model, usage)


_SDK = declare_sdk(
    __name__, "anthropic", stream=Stream, async_stream=AsyncStream, request_id_header="request-id"
)

MESSAGES = Endpoint(
    sdk=_SDK,
    name="messages.create",
    path="v1/messages",
    response_type=Message,
    event_type=RawMessageStreamEvent,
    summarize=_summary,
)


# --- messages.stream -------------------------------------------------------------------


@functools.cache
def _takes_output_format(manager: type) -> bool:
    return "output_format" in inspect.signature(manager).parameters


def _manager(manager: type, request: Any, kwargs: dict[str, Any]) -> Any:
    if _takes_output_format(manager):
        return manager(request, output_format=kwargs.get("output_format", NOT_GIVEN))
    return manager(request)


def _stream_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments ``messages.stream`` takes, from the recorded request's."""
    return {key: value for key, value in kwargs.items() if key != "stream"}


def _sync_stream(resource: Any, stream: Any, options: Options, provider: str) -> Any:
    """``messages.stream`` recording its request as ``messages.create(stream=True)``."""

    @functools.wraps(stream)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if recording_run() is None:
            return stream(*args, **kwargs)

        def real_request(request: dict[str, Any]) -> Any:
            manager = stream(*args, **_stream_kwargs(request))
            return manager._MessageStreamManager__api_request()

        def api_request() -> Any:
            return call_sync(
                MESSAGES, resource, provider, options, {**kwargs, "stream": True}, real_request
            )

        return _manager(MessageStreamManager, api_request, kwargs)

    return traced


def _async_stream(resource: Any, stream: Any, options: Options, provider: str) -> Any:
    """The async twin of :func:`_sync_stream`."""

    @functools.wraps(stream)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if recording_run() is None:
            return stream(*args, **kwargs)

        async def real_request(request: dict[str, Any]) -> Any:
            manager = stream(*args, **_stream_kwargs(request))
            return await manager._AsyncMessageStreamManager__api_request

        request = call_async(
            MESSAGES, resource, provider, options, {**kwargs, "stream": True}, real_request
        )
        return _manager(AsyncMessageStreamManager, request, kwargs)

    return traced


def _stream_method(function: Any, options: Options, *, is_async: bool) -> Any:
    make = _async_stream if is_async else _sync_stream

    @functools.wraps(function)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return make(self, functools.partial(function, self), options, PROVIDER)(*args, **kwargs)

    return method


# --- instrumenting -----------------------------------------------------------------------


def _patch(client: Any, options: Options) -> None:
    resource = client.messages
    is_async = isinstance(resource, AsyncMessages)
    instrument_create(resource, MESSAGES, options, PROVIDER, is_async=is_async)
    make = _async_stream if is_async else _sync_stream
    patch_resource(resource, "stream", lambda bound: make(resource, bound, options, PROVIDER))


def instrument(
    client: ClientT,
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> ClientT:
    """Record this client's calls inside ``record()``; answer them inside ``replay()``.

    Returns the same client. Idempotent: instrumenting a client twice records each call
    once (the first call's settings stay). Clients made from it with
    ``client.with_options(...)`` are instrumented too.

    Args:
        client: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` (or any client
            whose ``messages`` is the SDK's messages resource).
        replay_policy: what a replay does with these calls: ``"frozen"`` (default:
            answered from the recording), ``"live"``, ``"forbidden"``, ``"manual"``.
        ignore_fields: JSON paths of request fields left out of the recorded request
            and so of replay matching, e.g. ``["metadata.user_id"]``; ``*`` matches every
            key or list item.
    """
    if not isinstance(getattr(client, "messages", None), Messages | AsyncMessages):
        raise ConfigError(
            f"instrument() expects an anthropic.Anthropic or anthropic.AsyncAnthropic "
            f"client, got {type(client).__qualname__}; for OpenAI use "
            f"sftrace.integrations.openai"
        )
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    return instrument_client(client, options, _patch)


_patches = ClassPatches()


def instrument_all(
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> None:
    """Record every Anthropic client's calls, existing and future, until
    :func:`uninstrument_all`.

    Patches the SDK's messages resource classes. Calling it again replaces the settings.
    Arguments as for :func:`instrument`; clients also instrumented one by one record each
    call once.
    """
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    _patches.restore()
    for cls, is_async in ((Messages, False), (AsyncMessages, True)):
        instrument_create_class(_patches, cls, MESSAGES, options, PROVIDER, is_async=is_async)
        _patches.patch(
            cls, "stream", functools.partial(_stream_method, options=options, is_async=is_async)
        )


def uninstrument_all() -> None:
    """Undo :func:`instrument_all` (clients passed to :func:`instrument` keep recording)."""
    _patches.restore()
