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
call, and a replay returns its final answer without running the functions: for
``generate_content`` and for a chat's ``send_message``/``send_message_stream`` (which run
the loop themselves; a replay also appends the recorded turn to the chat's history). A recorded API
error is raised again as the SDK's own ``google.genai.errors`` type (``ClientError`` for a
429) with its code and body.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, TypeVar

import pydantic
from google import genai
from google.genai import _transformers, chats, errors, types

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
    ClassPatches,
    Ending,
    Options,
    StreamRecorder,
    StreamReplay,
    arecord_items,
    areplayed_items,
    await_recorded_cancellation,
    ending,
    input_json,
    inside_sdk_call,
    record_items,
    recording_run,
    replayed_items,
    substitute_stream,
    summary,
    type_serializer,
)

__all__ = ["instrument"]

ClientT = TypeVar("ClientT", bound=genai.Client)
GEMINI = "gcp.gemini"
VERTEX_AI = "gcp.vertex_ai"
_INSTRUMENTED = "__sftrace_instrumented__"
_METHODS = ("generate_content", "generate_content_stream")
# On an instrumented client's ``models``: the (options, provider) its chats record with.
_CHAT_SETTINGS = "_sftrace_chat_settings"
_CHAT_METHODS = ("send_message", "send_message_stream")
_CHAT_PATCHES = ClassPatches()
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
        # A chat made from this client (``client.chats.create``) sends through ``models``:
        # its AFC turns are recorded with these settings (see ``_chat_settings``).
        setattr(models, _CHAT_SETTINGS, (options, provider))
    _patch_chats()
    setattr(client, _INSTRUMENTED, True)
    return client


# --- calls -----------------------------------------------------------------------------


def _begin(
    options: Options, provider: str, kwargs: dict[str, Any], *, stream: bool, chat: str = ""
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
    if chat:
        request["chat"] = chat
    what = f"google-genai {provider} {chat or 'generate_content'} request"
    name = model if isinstance(model, str) and model else "unknown"
    spec = llm_spec(provider, name, options.policy, None)
    return BoundaryCall(run, spec, input_json(request, options, what=what))


class _Turn:
    """How one recorded call is made, recorded and answered: ``generate_content`` (the
    SDK's own AFC loop inside), or a chat's ``send_message`` running AFC (see
    ``_ChatTurn``)."""

    def __init__(self, kwargs: dict[str, Any], *, stream: bool) -> None:
        self.kwargs = kwargs
        self.stream = stream

    def output(self, response: Any) -> JSON:
        return _response_json(response)

    def recorder(self, call: BoundaryCall) -> StreamRecorder:
        return StreamRecorder(call, _summarize, convert=_response_json)

    def items(self, source: Iterable[Any], recorder: StreamRecorder) -> Iterable[Any]:
        return source

    def aitems(self, source: Any, recorder: StreamRecorder) -> Any:
        return source

    def restore(self, output: JSON) -> Any:
        return _response(self.kwargs, output)

    def replayed(self, end: Ending, *, is_async: bool) -> Any:
        """The recorded stream, as the SDK's responses (see ``StreamReplay``)."""
        _, replay = self._substitute(end, "google-genai generate_content_stream")
        return areplayed_items(replay) if is_async else replayed_items(replay)

    def _substitute(self, end: Ending, what: str) -> tuple[JSON, StreamReplay]:
        return substitute_stream(
            end.call, end, lambda chunk: _response(self.kwargs, chunk), what=what
        )


def _replayed(end: Ending, turn: _Turn, *, is_async: bool) -> Any:
    """The recorded answer to a call a replay does not make."""
    if turn.stream:
        return turn.replayed(end, is_async=is_async)
    return end.call.substitute(turn.restore)


def _call_sync(call: BoundaryCall, turn: _Turn, original: Any) -> Any:
    """Answer ``call`` from the recording, or run ``original()`` and record it."""
    with ending(call) as end:
        if not call.runs_body:
            return _replayed(end, turn, is_async=False)
        if turn.stream:
            end.hand_off()
            recorder = turn.recorder(call)
            return record_items(turn.items(original(), recorder), recorder)
        with inside_sdk_call():
            response = original()
        call.finish(turn.output(response), _usage_attributes(response))
        return response


async def _call_async(call: BoundaryCall, turn: _Turn, original: Any) -> Any:
    """The async twin of :func:`_call_sync` (``original()`` is awaited)."""
    with ending(call) as end:
        if not call.runs_body:
            await await_recorded_cancellation(call)
            return _replayed(end, turn, is_async=True)
        with inside_sdk_call():
            response = await original()
        if turn.stream:
            end.hand_off()
            recorder = turn.recorder(call)
            return arecord_items(turn.aitems(response, recorder), recorder)
        call.finish(turn.output(response), _usage_attributes(response))
        return response


def _wrap_sync(original: Any, options: Options, provider: str, *, stream: bool) -> Any:
    @functools.wraps(original)
    def wrapper(**kwargs: Any) -> Any:
        call = _begin(options, provider, kwargs, stream=stream)
        if call is None:
            return original(**kwargs)
        return _call_sync(call, _Turn(kwargs, stream=stream), lambda: original(**kwargs))

    setattr(wrapper, _INSTRUMENTED, True)
    return wrapper


def _wrap_async(original: Any, options: Options, provider: str, *, stream: bool) -> Any:
    @functools.wraps(original)
    async def wrapper(**kwargs: Any) -> Any:
        call = _begin(options, provider, kwargs, stream=stream)
        if call is None:
            return await original(**kwargs)
        return await _call_async(call, _Turn(kwargs, stream=stream), lambda: original(**kwargs))

    setattr(wrapper, _INSTRUMENTED, True)
    return wrapper


# --- chats -------------------------------------------------------------------------------
#
# A chat (``client.chats.create(...)``) runs automatic function calling itself: its
# ``send_message`` calls ``models.generate_content`` once a round with AFC disabled and
# runs the functions in between. With AFC in play the whole turn is one recorded call, as
# ``generate_content`` with AFC is: recorded as the chat's request (its curated history,
# the message, its config) marked ``"chat": "send_message"`` (or ``send_message_stream``),
# its final response (or every chunk of every round) and what the turn appended to the
# chat's history. A replay answers it without running the functions, and appends the
# recorded history to the chat. A turn without AFC stays the one ``generate_content``
# call it makes.


def _patch_chats() -> None:
    """Patch the SDK's chat classes (once): their turns record only when the chat sends
    through an instrumented client (see ``_chat_call``)."""
    for cls, is_async in ((chats.Chat, False), (chats.AsyncChat, True)):
        for name in _CHAT_METHODS:
            make = functools.partial(_wrap_chat, stream=name != _CHAT_METHODS[0], is_async=is_async)
            _CHAT_PATCHES.patch(cls, name, make)


def _wrap_chat(original: Any, *, stream: bool, is_async: bool) -> Any:
    if is_async:

        @functools.wraps(original)
        async def async_method(self: Any, message: Any, config: Any = None) -> Any:
            begun = _chat_call(self, message, config, stream=stream)
            if begun is None:
                return await original(self, message, config)
            call, turn = begun
            return await _call_async(call, turn, lambda: original(self, message, config))

        return async_method

    @functools.wraps(original)
    def method(self: Any, message: Any, config: Any = None) -> Any:
        begun = _chat_call(self, message, config, stream=stream)
        if begun is None:
            return original(self, message, config)
        call, turn = begun
        return _call_sync(call, turn, lambda: original(self, message, config))

    return method


def _chat_call(
    chat: Any, message: Any, config: Any, *, stream: bool
) -> tuple[BoundaryCall, _ChatTurn] | None:
    """The recorded call a chat's turn is, or None when it is not one: the chat's client
    is not instrumented, the turn runs no function, no run records it, or a replay
    answers from a bundle that recorded chats' AFC rounds as separate calls (made before
    chats' turns were recorded whole: each round is then answered as it was recorded)."""
    settings = getattr(getattr(chat, "_modules", None), _CHAT_SETTINGS, None)
    if settings is None:
        return None
    method_config = config if config else chat._config
    if not _runs_functions(method_config):
        return None
    run = recording_run()
    if run is None or not _records_chat_turns(run.replay):
        return None
    options, provider = settings
    kwargs = {
        "model": chat._model,
        "contents": [*chat.get_history(curated=True), _transformers.t_content(message)],
        "config": method_config,
    }
    name = _CHAT_METHODS[1] if stream else _CHAT_METHODS[0]
    call = _begin(options, provider, kwargs, stream=stream, chat=name)
    if call is None:
        return None
    return call, _ChatTurn(chat, kwargs, stream=stream)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _runs_functions(config: Any) -> bool:
    """Whether the SDK's automatic function calling may run a Python function given as a
    tool in ``config``."""
    tools = _field(config, "tools") or ()
    if not any(callable(tool) and not isinstance(tool, type) for tool in tools):
        return False
    afc = _field(config, "automatic_function_calling")
    if afc is None:
        return True
    if _field(afc, "disable"):
        return False
    maximum = _field(afc, "maximum_remote_calls")
    return maximum is None or int(maximum) > 0


_CHAT_MARKS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _records_chat_turns(replay: Any) -> bool:
    """False when ``replay`` answers from a bundle whose chats' AFC rounds were recorded
    as separate ``generate_content`` calls (no call in it is a chat's turn)."""
    if replay is None:
        return True
    with contextlib.suppress(TypeError):  # not weakly referenceable: look again
        known = _CHAT_MARKS.get(replay)
        if known is not None:
            return known
    recorded = getattr(replay, "calls", None)
    if not isinstance(recorded, list):
        return True
    found = any(
        call.provider in (GEMINI, VERTEX_AI) and '"chat":"send_message' in call.input_json
        for call in recorded
    )
    with contextlib.suppress(TypeError):
        _CHAT_MARKS[replay] = found
    return found


class _ChatTurn(_Turn):
    """A chat's turn with AFC as one call; its recorded output holds what the turn
    appended to the chat's history (``history``: all of it, ``curated``: the valid
    turns), which a replay appends again."""

    def __init__(self, chat: Any, kwargs: dict[str, Any], *, stream: bool) -> None:
        super().__init__(kwargs, stream=stream)
        self.chat = chat
        self.start = (len(chat.get_history()), len(chat.get_history(curated=True)))

    def appended(self) -> dict[str, JSON]:
        full, curated = self.start
        return {
            "history": [_response_json(c) for c in self.chat.get_history()[full:]],
            "curated": [_response_json(c) for c in self.chat.get_history(curated=True)[curated:]],
        }

    def output(self, response: Any) -> JSON:
        return {"response": _response_json(response), **self.appended()}

    def items(self, source: Iterable[Any], recorder: StreamRecorder) -> Iterator[Any]:
        # The rounds' generate_content_stream calls are made as the stream is read.
        iterator = iter(source)
        while True:
            with inside_sdk_call():
                try:
                    item = next(iterator)
                except StopIteration:
                    break
            yield item
        recorder.extra.update(self.appended())

    async def aitems(self, source: Any, recorder: StreamRecorder) -> AsyncIterator[Any]:
        iterator = source.__aiter__()
        while True:
            with inside_sdk_call():
                try:
                    item = await iterator.__anext__()
                except StopAsyncIteration:
                    break
            yield item
        recorder.extra.update(self.appended())

    def restore(self, output: JSON) -> Any:
        if not isinstance(output, dict):
            return output
        self.extend(output)
        return _response(self.kwargs, output.get("response"))

    def replayed(self, end: Ending, *, is_async: bool) -> Any:
        output, replay = self._substitute(end, "google-genai chat send_message_stream")
        return self._areplayed(replay, output) if is_async else self._replayed(replay, output)

    def _replayed(self, replay: StreamReplay, output: dict[str, Any]) -> Iterator[Any]:
        yield from replayed_items(replay)
        self.extend(output)

    async def _areplayed(self, replay: StreamReplay, output: dict[str, Any]) -> AsyncIterator[Any]:
        async for item in areplayed_items(replay):
            yield item
        self.extend(output)

    def extend(self, output: dict[str, Any]) -> None:
        """Append the recorded turn to the chat's history, as the live turn did."""
        for key, curated in (("history", False), ("curated", True)):
            contents = output.get(key)
            if isinstance(contents, list):
                history = self.chat.get_history(curated=curated)
                history.extend(types.Content.model_validate(c) for c in contents)


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
