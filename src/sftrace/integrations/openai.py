"""Record and replay calls made with the OpenAI Python SDK (``pip install "sftrace[openai]"``).

::

    from openai import OpenAI
    from sftrace import record, replay
    from sftrace.integrations.openai import instrument

    client = instrument(OpenAI())
    with record("support-agent", output="run.sftrace"):
        client.chat.completions.create(model="gpt-4o", messages=[...])
    with replay("run.sftrace"):  # no HTTP request is sent
        client.chat.completions.create(model="gpt-4o", messages=[...])

:func:`instrument` records one ``OpenAI``/``AsyncOpenAI`` (or Azure) client and the
copies it makes of itself (``client.with_options(...)``); :func:`instrument_all`
records every client, until :func:`uninstrument_all`. Instrumented methods:
``chat.completions.create`` and ``responses.create``, with or without ``stream=True``,
and the helpers built on them (``chat.completions.stream``, ``responses.stream``).
Outside ``record()``/``replay()`` an instrumented client behaves exactly as before.

Recorded, per call (an LLM span):
    provider (``openai``, or ``azure.ai.openai`` for Azure clients), the requested model,
    the request, the response and its token usage.

The request, as recorded and compared by a strict replay:
    every keyword argument of the call (``messages``/``input``, ``model``, ``tools``,
    ``temperature``, ``stream``, ``extra_body``...) as canonical JSON (sorted keys,
    pydantic objects as their fields), except ``extra_headers``, ``extra_query`` and
    ``timeout`` (transport options: secrets, request ids, trace headers, deadlines),
    arguments left at ``NOT_GIVEN``/``omit``, ``stream=False`` (the default), and the
    JSON paths given as ``ignore_fields`` (``"metadata.request_id"``,
    ``"messages.*.name"``). The replay compares this JSON for equality with the recorded
    one and reports the differing paths when it is not equal.

The response, as recorded:
    a non-streamed response is its JSON as the API sent it (API field names, fields the
    API did not send left out), plus ``_request_id`` when the SDK had one. A streamed
    response is ``{"chunks": [...], "complete": ..., "model": ..., "usage": ...}``: every
    chunk (``ChatCompletionChunk``, or Responses API event) in order, whether the caller
    read the stream to its end, and the usage of the final chunk (send
    ``stream_options={"include_usage": True}`` to get it for chat completions) or of the
    ``response.completed`` event. A stream that raised keeps the chunks read before the
    exception, which is the call's error.

During a frozen replay:
    nothing is sent. ``create`` returns a real ``ChatCompletion``/``Response`` built from
    the recorded JSON the way the SDK builds it from an HTTP body; with ``stream=True`` it
    returns an ``openai.Stream``/``openai.AsyncStream`` yielding the recorded chunks as
    the SDK's own chunk types (iteration, ``with``, ``close()``; ``.response`` is a
    placeholder 200 response with the recorded ``x-request-id``). After its recorded
    chunks a replayed stream ends as the recorded one did: it ends, raises the recorded
    exception, or (the recorded caller stopped reading there) diverges if read further.

Not recorded: calls made through ``with_raw_response``/``with_streaming_response``
(logged once; they reach the network during a replay too), ``chat.completions.parse``,
``responses.parse`` and other endpoints. A recorded API error is raised again during
replay as :class:`sftrace.RecordedDependencyError` naming the SDK's exception type.
Consume or close a stream inside the ``record()`` block: its span ends with the stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from openai import AsyncOpenAI, AsyncStream, OpenAI, Stream
from openai.resources.chat import AsyncCompletions, Completions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sftrace._errors import ConfigError
from sftrace._model.policy import ReplayPolicy
from sftrace.integrations._common import JSON, ClassPatches, Options, summary
from sftrace.integrations._sdk import Endpoint
from sftrace.integrations._sdk_patching import (
    instrument_client,
    instrument_create,
    instrument_create_class,
)
from sftrace.integrations._sdk_streams import declare_sdk, first_model, last_usage

try:  # the Responses API arrived in openai 1.66
    from openai.resources.responses import AsyncResponses, Responses
    from openai.types.responses import Response, ResponseStreamEvent
except ImportError:  # pragma: no cover - older SDKs
    Responses = AsyncResponses = Response = ResponseStreamEvent = None  # type: ignore[assignment,misc]

__all__ = ["instrument", "instrument_all", "uninstrument_all"]

ClientT = TypeVar("ClientT", OpenAI, AsyncOpenAI)
PROVIDER = "openai"
_SDK = declare_sdk(
    __name__, "openai", stream=Stream, async_stream=AsyncStream, request_id_header="x-request-id"
)


def _chat_summary(chunks: list[JSON]) -> dict[str, Any]:
    return summary(first_model(chunks), last_usage(chunks))


_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def _responses_summary(chunks: list[JSON]) -> dict[str, Any]:
    model = usage = None
    for event in chunks:
        if not isinstance(event, dict) or not isinstance(event.get("response"), dict):
            continue
        response = event["response"]
        model = response.get("model", model)
        if event.get("type") in _FINAL_EVENTS and isinstance(response.get("usage"), dict):
            usage = response["usage"]
    return summary(model, usage)


CHAT = Endpoint(
    sdk=_SDK,
    name="chat.completions.create",
    path="chat/completions",
    response_type=ChatCompletion,
    event_type=ChatCompletionChunk,
    summarize=_chat_summary,
)
RESPONSES = Endpoint(
    sdk=_SDK,
    name="responses.create",
    path="responses",
    response_type=Response,
    event_type=ResponseStreamEvent,
    summarize=_responses_summary,
)


def _resources(client: OpenAI | AsyncOpenAI) -> list[tuple[Any, Endpoint]]:
    found: list[tuple[Any, Endpoint]] = [(client.chat.completions, CHAT)]
    if Responses is not None:
        found.append((client.responses, RESPONSES))
    return found


def _patch(client: Any, options: Options) -> None:
    is_async = isinstance(client, AsyncOpenAI)
    for resource, endpoint in _resources(client):
        instrument_create(resource, endpoint, options, PROVIDER, is_async=is_async)


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
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (Azure clients included).
        replay_policy: what a replay does with these calls: ``"frozen"`` (default:
            answered from the recording), ``"live"``, ``"forbidden"``, ``"manual"``.
        ignore_fields: JSON paths of request fields left out of the recorded request
            and so of replay matching, e.g. ``["metadata.trace_id", "user"]``; ``*``
            matches every key or list item.
    """
    if not isinstance(client, OpenAI | AsyncOpenAI):
        raise ConfigError(
            f"instrument() expects an openai.OpenAI or openai.AsyncOpenAI client, got "
            f"{type(client).__qualname__}; for Anthropic use sftrace.integrations.anthropic"
        )
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    return instrument_client(client, options, _patch)


_patches = ClassPatches()


def instrument_all(
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> None:
    """Record every OpenAI client's calls, existing and future, until :func:`uninstrument_all`.

    Patches the SDK's resource classes. Calling it again replaces the settings. Arguments
    as for :func:`instrument`; clients also instrumented one by one record each call once.
    """
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    _patches.restore()
    classes: list[tuple[type, Endpoint, bool]] = [
        (Completions, CHAT, False),
        (AsyncCompletions, CHAT, True),
    ]
    if Responses is not None:
        classes += [(Responses, RESPONSES, False), (AsyncResponses, RESPONSES, True)]
    for cls, endpoint, is_async in classes:
        instrument_create_class(_patches, cls, endpoint, options, PROVIDER, is_async=is_async)


def uninstrument_all() -> None:
    """Undo :func:`instrument_all` (clients passed to :func:`instrument` keep recording)."""
    _patches.restore()
