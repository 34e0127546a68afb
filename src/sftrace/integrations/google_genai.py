"""Record and replay Google GenAI calls (``pip install "sftrace[google-genai]"``).

::

    from google import genai
    from sftrace import record, replay
    from sftrace.integrations.google_genai import instrument

    client = instrument(genai.Client())
    with record("support-agent", output="run.sftrace"):
        client.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    with replay("run.sftrace"):  # no request is sent
        client.models.generate_content(model="gemini-2.5-flash", contents="Hi")

:func:`instrument` records one ``google.genai.Client``: ``client.models.generate_content``
and ``generate_content_stream``, and their async twins on ``client.aio.models``. Outside
``record()``/``replay()`` the client behaves exactly as before.

Recorded, per call (an LLM span):
    provider ``gcp.gemini`` (the Gemini Developer API) or ``gcp.vertex_ai`` (a client
    made with ``vertexai=True``/``enterprise=True``), the requested model, the request,
    the response, and its token usage from ``usage_metadata`` (``prompt_token_count``,
    ``candidates_token_count``, ``total_token_count``).

The request, as recorded and compared by a strict replay:
    ``model``, ``contents`` and ``config`` as canonical JSON (the SDK's pydantic types as
    their set fields, ``None`` fields left out; a Python function given as a tool by its
    qualified name; a class given as ``response_schema`` by its name and JSON schema),
    minus ``config.http_options`` and the client's own transport settings (API key,
    base URL, headers, timeouts: never recorded), and the JSON paths given as
    ``ignore_fields``.

The response, as recorded:
    a ``GenerateContentResponse`` as its JSON (``None`` fields left out). A stream is
    ``{"chunks": [...], "complete": ..., "model": ..., "usage": ...}``: every chunk in
    order, whether the caller read the stream to its end, the ``model_version`` and the
    last chunk's usage.

During a frozen replay:
    nothing is sent. ``generate_content`` returns a real ``GenerateContentResponse``
    (``.text``, ``.function_calls``, ``.parsed`` as the ``response_schema`` class when it
    is a pydantic model); ``generate_content_stream`` yields the recorded chunks as
    ``GenerateContentResponse`` objects (``for``, or ``async for`` on ``client.aio``).

Not recorded: the other endpoints (``chats`` built on ``generate_content`` are; embeddings,
images, files, caches, live sessions are not). With automatic function calling (Python
functions as ``tools``) the SDK's whole loop, the functions' runs included, is one recorded
call, and a replay returns its final answer without running the functions. A recorded API
error is raised again as the SDK's own ``google.genai.errors`` type (``ClientError`` for a
429) with its code and body.
"""

from __future__ import annotations

import contextlib
import enum
import functools
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

import pydantic
from google import genai
from google.genai import errors, types

from sftrace._errors import ConfigError
from sftrace._model import attributes as A
from sftrace._model.calls import CallFailure
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import loads
from sftrace._record.boundary import BoundaryCall
from sftrace._record.failure import ErrorCodec, ErrorDetails, register_error_codec
from sftrace._record.llm import llm_spec
from sftrace.integrations._common import (
    JSON,
    Options,
    StreamRecorder,
    arecord_items,
    ending,
    input_json,
    inside_sdk_call,
    record_items,
    recorded_chunks,
    recording_run,
    summary,
    type_serializer,
)

__all__ = ["instrument"]

ClientT = TypeVar("ClientT", bound=genai.Client)
GEMINI = "gcp.gemini"
VERTEX_AI = "gcp.vertex_ai"
_INSTRUMENTED = "__sftrace_instrumented__"
_METHODS = ("generate_content", "generate_content_stream")
# usage_metadata's counts under the names an LLM span's usage is read from.
_USAGE_KEYS = (
    ("prompt_token_count", "prompt_tokens"),
    ("candidates_token_count", "completion_tokens"),
    ("total_token_count", "total_tokens"),
)


def instrument(
    client: ClientT,
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> ClientT:
    """Record this client's ``generate_content`` calls inside ``record()``; answer them
    inside ``replay()``. Returns the same client; instrumenting it twice records each call
    once (the first settings stay).

    Args:
        client: a ``google.genai.Client`` (its ``client.aio`` is instrumented with it).
        replay_policy: what a replay does with these calls: ``"frozen"`` (default:
            answered from the recording), ``"live"``, ``"forbidden"``, ``"manual"``.
        ignore_fields: JSON paths of the request left out of what is recorded and
            compared, e.g. ``["config.labels", "contents.*.role"]``.
    """
    if not isinstance(client, genai.Client):
        raise ConfigError(
            f"instrument() expects a google.genai.Client, got {type(client).__qualname__}"
        )
    if getattr(client, _INSTRUMENTED, False):
        return client
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    register_error_codec(ErrorCodec(name="google-genai", describe=_describe, rebuild=_rebuild))
    provider = VERTEX_AI if client.vertexai else GEMINI
    for models, is_async in ((client.models, False), (client.aio.models, True)):
        for name in _METHODS:
            original = getattr(models, name)
            wrap = _wrap_async if is_async else _wrap_sync
            setattr(models, name, wrap(original, options, provider, stream=name != _METHODS[0]))
    setattr(client, _INSTRUMENTED, True)
    return client


# --- calls -----------------------------------------------------------------------------


def _begin(
    options: Options, provider: str, kwargs: dict[str, Any], *, stream: bool
) -> BoundaryCall | None:
    run = recording_run()
    if run is None:
        return None
    model = kwargs.get("model")
    request: dict[str, Any] = {"model": model, "contents": _plain(kwargs.get("contents"))}
    config = _plain(kwargs.get("config"))
    if isinstance(config, dict):
        config.pop("http_options", None)  # the transport, not the request
    if config:
        request["config"] = config
    if stream:
        request["stream"] = True
    what = f"google-genai {provider} generate_content request"
    name = model if isinstance(model, str) and model else "unknown"
    spec = llm_spec(provider, name, options.policy, None)
    return BoundaryCall(run, spec, input_json(request, options, what=what))


def _wrap_sync(original: Any, options: Options, provider: str, *, stream: bool) -> Any:
    @functools.wraps(original)
    def wrapper(**kwargs: Any) -> Any:
        call = _begin(options, provider, kwargs, stream=stream)
        if call is None:
            return original(**kwargs)
        with ending(call) as end:
            if not call.runs_body:
                restore = functools.partial(_restore, kwargs, stream=stream, is_async=False)
                return call.substitute(restore)
            if stream:
                end.hand_off()
                return record_items(original(**kwargs), _recorder(call))
            with inside_sdk_call():
                response = original(**kwargs)
            call.finish(_response_json(response), _usage_attributes(response))
            return response

    setattr(wrapper, _INSTRUMENTED, True)
    return wrapper


def _wrap_async(original: Any, options: Options, provider: str, *, stream: bool) -> Any:
    @functools.wraps(original)
    async def wrapper(**kwargs: Any) -> Any:
        call = _begin(options, provider, kwargs, stream=stream)
        if call is None:
            return await original(**kwargs)
        with ending(call) as end:
            if not call.runs_body:
                restore = functools.partial(_restore, kwargs, stream=stream, is_async=True)
                return await call.asubstitute(restore)
            with inside_sdk_call():
                response = await original(**kwargs)
            if stream:
                end.hand_off()
                return arecord_items(response, _recorder(call))
            call.finish(_response_json(response), _usage_attributes(response))
            return response

    setattr(wrapper, _INSTRUMENTED, True)
    return wrapper


def _recorder(call: BoundaryCall) -> StreamRecorder:
    return StreamRecorder(call, _summarize, convert=_response_json)


# --- JSON ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A request value as plain data: pydantic types as their set fields (no ``None``),
    Python functions (tools) by name, enums by value, classes by name and JSON schema."""
    if isinstance(value, pydantic.BaseModel):
        return _plain(value.model_dump(exclude_none=True))
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, type):
        return type_serializer(value)
    if callable(value) and not isinstance(value, type):
        module = getattr(value, "__module__", None) or ""
        name = getattr(value, "__qualname__", None) or type(value).__qualname__
        return {"python_function": f"{module}.{name}".lstrip(".")}
    return value


def _response_json(response: Any) -> JSON:
    if isinstance(response, pydantic.BaseModel):
        return response.model_dump(mode="json", exclude_none=True)
    return response


def _usage(response: Any) -> dict[str, int] | None:
    metadata = response.get("usage_metadata") if isinstance(response, dict) else None
    if not isinstance(metadata, dict):
        return None
    usage = {
        ours: metadata[theirs]
        for theirs, ours in _USAGE_KEYS
        if isinstance(metadata.get(theirs), int)
    }
    return usage or None


def _usage_attributes(response: Any) -> dict[str, Any]:
    found = summary(getattr(response, "model_version", None), _usage(_response_json(response)))
    usage = found.get("usage") or {}
    attributes: dict[str, Any] = {}
    if "model" in found:
        attributes[A.GEN_AI_RESPONSE_MODEL] = found["model"]
    for key, attribute in (
        ("prompt_tokens", A.GEN_AI_USAGE_INPUT_TOKENS),
        ("completion_tokens", A.GEN_AI_USAGE_OUTPUT_TOKENS),
        ("total_tokens", A.USAGE_TOTAL_TOKENS),
    ):
        if key in usage:
            attributes[attribute] = usage[key]
    return attributes


def _summarize(chunks: list[JSON]) -> dict[str, Any]:
    model = usage = None
    for chunk in chunks:
        if isinstance(chunk, dict):
            model = chunk.get("model_version", model)
            usage = _usage(chunk) or usage
    return summary(model, usage)


# --- replay ----------------------------------------------------------------------------


def _restore(kwargs: dict[str, Any], output: JSON, *, stream: bool, is_async: bool) -> Any:
    """The recorded answer as the SDK's own ``GenerateContentResponse`` objects."""
    if not stream:
        return _response(kwargs, output)
    what = "google-genai generate_content_stream"
    items = [_response(kwargs, chunk) for chunk in recorded_chunks(output, what=what)]
    return _replayed_async(items) if is_async else iter(items)


async def _replayed_async(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def _response(kwargs: dict[str, Any], data: JSON) -> Any:
    if not isinstance(data, dict):
        return data
    data = dict(data)
    parsed = data.pop("parsed", None)  # validated as a bare BaseModel otherwise
    response = types.GenerateContentResponse.model_validate(data)
    if parsed is not None:
        response.parsed = parsed
        schema = _response_schema(kwargs.get("config"))
        if schema is not None:
            # a value the class refuses stays as it was recorded
            with contextlib.suppress(pydantic.ValidationError):
                response.parsed = schema.model_validate(parsed)
    return response


def _response_schema(config: Any) -> type[pydantic.BaseModel] | None:
    if isinstance(config, dict):
        schema = config.get("response_schema")
    else:
        schema = getattr(config, "response_schema", None)
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        return schema
    return None


# --- errors ----------------------------------------------------------------------------


def _describe(exc: BaseException) -> ErrorDetails | None:
    """An SDK error's HTTP code and response body, recorded beside its type."""
    if not isinstance(exc, errors.APIError):
        return None
    body = exc.details
    return ErrorDetails(
        status_code=exc.code if isinstance(exc.code, int) else None,
        body=body if isinstance(body, dict | list | str) else None,
    )


def _rebuild(failure: CallFailure) -> BaseException | None:
    """The SDK's own error for a recorded one (``except errors.ClientError``)."""
    module, _, name = failure.type.rpartition(".")
    if module != errors.__name__:
        return None
    cls = vars(errors).get(name)
    if not isinstance(cls, type) or not issubclass(cls, errors.APIError):
        return None
    body = loads(failure.body_json) if failure.body_json is not None else None
    code = failure.status_code if failure.status_code is not None else 0
    error: BaseException = cls(code, body if body is not None else {})
    return error
