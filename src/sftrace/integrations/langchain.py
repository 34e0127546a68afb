"""Record and replay LangChain chat models and tools (``pip install "sftrace[langchain]"``).

::

    from langchain_openai import ChatOpenAI
    from sftrace.integrations.langchain import wrap_chat_model, wrap_tools

    model = wrap_chat_model(ChatOpenAI(model="gpt-4o"))
    tools = wrap_tools([search, book])
    agent = build_my_langgraph_agent(model.bind_tools(tools), tools)

    with record("booking-agent", output="run.sftrace"):
        agent.invoke({"messages": [("user", "Book the cheapest flight to Lisbon")]})

:func:`wrap_chat_model` wraps any ``BaseChatModel`` in a :class:`TracedChatModel`: every
model call (``invoke``, ``ainvoke``, ``stream``, ``astream``, ``batch``, and the calls
LangGraph makes) becomes an LLM span, and during a frozen replay is answered from the
recording without calling the wrapped model. ``bind_tools`` and
``with_structured_output`` keep working and keep recording. :func:`wrap_tool` /
:func:`wrap_tools` return copies of ``BaseTool`` objects whose runs become tool spans,
answered from the recording during a replay (the tool does not run).

The wrapper sits where LangChain hands the call to the model integration (``_generate``,
``_agenerate``, ``_stream``, ``_astream``), so callbacks, tracing and LangGraph's
streaming behave the same when replayed: streamed chunks are replayed one by one.

A model call's request, as recorded and compared by a strict replay:
    ``{"messages": [...], "stop": [...], ...call keyword arguments}``: each message as its
    fields minus its ``id`` and minus fields left at their default (message ids are made
    up per run by LangChain and LangGraph, and not sent to providers), the stop words
    when given, and what the model was bound with or called with (``tools``,
    ``tool_choice``...), minus the JSON paths given as ``ignore_fields``.

A model call's response, as recorded:
    ``{"generations": [{"message": ..., "generation_info": ...}], "llm_output": ...,
    "usage": ..., "model": ...}`` for a call, ``{"chunks": [{"message": ...,
    "generation_info": ...}], "complete": ..., "usage": ..., "model": ...}`` for a stream;
    messages in LangChain's ``message_to_dict`` form (tool calls included); ``usage`` is the
    messages' ``usage_metadata`` (summed over chunks). Replays rebuild the same
    ``AIMessage``/``AIMessageChunk`` objects. LangChain then gives messages that have no
    id a fresh ``lc_run-...`` id, as it does on every run.

A tool call's input is the arguments the model chose (the fields of the tool's
``tool_call_schema``; injected arguments such as LangGraph state are left out), its
output the tool's return value; a replayed ``ToolException`` is raised again as a
``ToolException`` so ``handle_tool_error`` behaves as recorded. Tool outputs are replayed
as their JSON (``content_and_artifact`` pairs as tuples), so a tool returning objects JSON
cannot hold (a LangGraph ``Command``) should stay unwrapped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    messages_from_dict,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.tools import BaseTool, ToolException
from pydantic import ConfigDict

from sftrace._errors import ConfigError, RecordedDependencyError
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundaryCall, BoundarySpec, call_async, call_sync
from sftrace._record.llm import llm_spec
from sftrace._record.run import ActiveRun, current_run
from sftrace.integrations._common import (
    JSON,
    Options,
    StreamRecorder,
    arecord_items,
    ending,
    record_items,
    recorded_chunks,
    request_json,
    summary,
)

__all__ = ["TracedChatModel", "wrap_chat_model", "wrap_tool", "wrap_tools"]

S = TypeVar("S")


# --- messages <-> JSON ------------------------------------------------------------------


def _request_message(message: BaseMessage) -> JSON:
    """A message as compared in requests: its type and non-default fields, no id."""
    fields = message.model_dump(exclude={"id"}, exclude_defaults=True)
    return {"type": message.type, **fields}


def _message_json(message: BaseMessage) -> JSON:
    """A response message in LangChain's ``message_to_dict`` form, defaults left out."""
    return {"type": message.type, "data": message.model_dump(exclude_defaults=True)}


def _message(value: JSON) -> BaseMessage:
    return messages_from_dict([value])[0]


def _usage(messages: Iterable[BaseMessage]) -> dict[str, Any] | None:
    """``usage_metadata`` summed over messages (input, output and total tokens)."""
    total: dict[str, Any] | None = None
    for message in messages:
        usage = getattr(message, "usage_metadata", None)
        if not usage:
            continue
        total = total or {}
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
    return total


def _model_from(messages: Iterable[BaseMessage], llm_output: Any = None) -> str | None:
    for message in messages:
        metadata = getattr(message, "response_metadata", None) or {}
        name = metadata.get("model_name") or metadata.get("model")
        if isinstance(name, str):
            return name
    if isinstance(llm_output, dict) and isinstance(llm_output.get("model_name"), str):
        return str(llm_output["model_name"])
    return None


def _summary(messages: list[BaseMessage], llm_output: Any = None) -> dict[str, Any]:
    return summary(_model_from(messages, llm_output), _usage(messages))


def _result_output(result: ChatResult) -> JSON:
    messages = [generation.message for generation in result.generations]
    return {
        "generations": [
            {"message": _message_json(g.message), "generation_info": g.generation_info}
            for g in result.generations
        ],
        "llm_output": result.llm_output,
        **_summary(messages, result.llm_output),
    }


def _restore_result(output: JSON) -> ChatResult:
    return ChatResult(
        generations=[
            ChatGeneration(message=_message(g["message"]), generation_info=g["generation_info"])
            for g in output["generations"]
        ],
        llm_output=output.get("llm_output"),
    )


def _chunk_json(chunk: ChatGenerationChunk) -> JSON:
    return {"message": _message_json(chunk.message), "generation_info": chunk.generation_info}


def _chunk(value: JSON) -> ChatGenerationChunk:
    message = _message(value["message"])
    assert isinstance(message, BaseMessageChunk)
    return ChatGenerationChunk(message=message, generation_info=value.get("generation_info"))


def _chunks_summary(chunks: list[JSON]) -> dict[str, Any]:
    return _summary([_message(chunk["message"]) for chunk in chunks])


# --- the chat model wrapper -----------------------------------------------------------------


@functools.cache
def _accepts_run_manager(cls: type, method: str) -> bool:
    try:
        return "run_manager" in inspect.signature(getattr(cls, method)).parameters
    except (TypeError, ValueError):
        return True


def _streams(model: BaseChatModel) -> bool:
    cls = type(model)
    return cls._stream is not BaseChatModel._stream or cls._astream is not BaseChatModel._astream


class TracedChatModel(BaseChatModel):
    """A chat model whose calls are recorded, and answered from the recording in replays.

    Make one with :func:`wrap_chat_model`. Reading an attribute the wrapper does not have
    (``temperature``, ``model_name``...) reads it from the wrapped model.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    """The wrapped model, called when a call is recorded (never in a frozen replay)."""
    provider: str | None = None
    """The recorded provider name; default: the model's LangSmith ``ls_provider``."""
    recorded_model: str | None = None
    """The recorded model name; default: the model's ``ls_model_name``."""
    replay_policy: ReplayPolicy = ReplayPolicy.FROZEN
    ignore_fields: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # type: ignore[misc]
        except AttributeError:
            if name.startswith("_") or name == "inner" or "inner" not in self.__dict__:
                raise
            return getattr(self.__dict__["inner"], name)

    # -- what LangChain asks a model about itself: the wrapped model's answers ---------
    @property
    def _llm_type(self) -> str:
        return self.inner._llm_type

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(self.inner._identifying_params)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return self.inner._get_ls_params(stop=stop, **kwargs)

    def _should_stream(self, *, async_api: bool, run_manager: Any = None, **kwargs: Any) -> bool:
        return bool(
            self.inner._should_stream(async_api=async_api, run_manager=run_manager, **kwargs)
        )

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way the wrapped model does, to this (recording) wrapper."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        bound = self.inner.bind_tools(tools, **kwargs)
        if isinstance(bound, RunnableBinding) and bound.bound is self.inner:
            return RunnableBinding(bound=self, kwargs=bound.kwargs, config=bound.config)
        raise ConfigError(
            f"{type(self.inner).__qualname__}.bind_tools() did not return a binding of the "
            f"model itself ({type(bound).__qualname__}); sftrace cannot record it: wrap the "
            f"model returned by bind_tools() instead"
        )

    # -- recording ----------------------------------------------------------------------
    def _names(self, stop: list[str] | None, kwargs: dict[str, Any]) -> tuple[str, str]:
        provider, model = self.provider, self.recorded_model
        if provider is None or model is None:
            try:
                params = self.inner._get_ls_params(stop=stop, **kwargs)
            except Exception:
                params = {}
            provider = provider or params.get("ls_provider") or self.inner._llm_type
            model = model or params.get("ls_model_name") or self.inner._llm_type
        return str(provider), str(model)

    def _begin(
        self, run: ActiveRun, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
    ) -> BoundaryCall:
        provider, model = self._names(stop, kwargs)
        options = Options(replay_policy=self.replay_policy, ignore_fields=self.ignore_fields)
        request: dict[str, Any] = {"messages": [_request_message(m) for m in messages]}
        if stop is not None:
            request["stop"] = stop
        request.update(kwargs)
        input_json = request_json(request, options, what=f"{provider}/{model} request")
        return BoundaryCall(run, llm_spec(provider, model, options.policy, None), input_json)

    def _inner_kwargs(self, method: str, run_manager: Any, kwargs: dict[str, Any]) -> Any:
        if run_manager is not None and _accepts_run_manager(type(self.inner), method):
            return {**kwargs, "run_manager": run_manager}
        return kwargs

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call_kwargs = self._inner_kwargs("_generate", run_manager, kwargs)
        run = current_run()
        if run is None:
            return self.inner._generate(messages, stop=stop, **call_kwargs)
        call = self._begin(run, messages, stop, kwargs)
        with ending(call):
            if not call.runs_body:
                return _replayed_result(call)
            result = self.inner._generate(messages, stop=stop, **call_kwargs)
            call.finish(_result_output(result))
            return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call_kwargs = self._inner_kwargs("_agenerate", run_manager, kwargs)
        run = current_run()
        if run is None:
            return await self.inner._agenerate(messages, stop=stop, **call_kwargs)
        call = self._begin(run, messages, stop, kwargs)
        with ending(call):
            if not call.runs_body:
                return _replayed_result(call)
            result = await self.inner._agenerate(messages, stop=stop, **call_kwargs)
            call.finish(_result_output(result))
            return result


class _StreamingTracedChatModel(TracedChatModel):
    """A :class:`TracedChatModel` around a model that streams: streams are recorded too."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call_kwargs = self._inner_kwargs("_stream", run_manager, kwargs)
        run = current_run()
        if run is None:
            yield from self.inner._stream(messages, stop=stop, **call_kwargs)
            return
        call = self._begin(run, messages, stop, kwargs)
        if not call.runs_body:
            yield from _replayed_chunks(call)
            return
        recorder, source = _open_stream(
            call, lambda: self.inner._stream(messages, stop=stop, **call_kwargs)
        )
        yield from record_items(source, recorder)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call_kwargs = self._inner_kwargs("_astream", run_manager, kwargs)
        run = current_run()
        if run is None:
            async for chunk in self.inner._astream(messages, stop=stop, **call_kwargs):
                yield chunk
            return
        call = self._begin(run, messages, stop, kwargs)
        if not call.runs_body:
            for chunk in _replayed_chunks(call):
                yield chunk
            return
        recorder, source = _open_stream(
            call, lambda: self.inner._astream(messages, stop=stop, **call_kwargs)
        )
        async for chunk in arecord_items(source, recorder):
            yield chunk


def _replayed_result(call: BoundaryCall) -> ChatResult:
    """The recorded result of a call a replay does not make."""
    restored: ChatResult = call.substitute(_restore_result)
    return restored


def _open_stream(call: BoundaryCall, open_source: Callable[[], S]) -> tuple[StreamRecorder, S]:
    """Open the wrapped model's stream for a recorded call. The recorder ends the call
    with the stream, or here if the stream cannot be opened."""
    call.detach()
    recorder = StreamRecorder(call, _chunks_summary, convert=_chunk_json)
    try:
        return recorder, open_source()
    except BaseException as exc:
        recorder.fail(exc)
        raise


def _replayed_chunks(call: BoundaryCall) -> list[ChatGenerationChunk]:
    """The recorded chunks of a replayed stream (the call's span ends here)."""
    with ending(call):
        output = call.substitute(lambda value: value)
        return [_chunk(chunk) for chunk in recorded_chunks(output, what="a chat model stream")]


def wrap_chat_model(
    model: BaseChatModel,
    *,
    provider: str | None = None,
    model_name: str | None = None,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> TracedChatModel:
    """Wrap a LangChain chat model so its calls are recorded and replayed.

    Returns ``model`` itself if it is already wrapped.

    Args:
        model: any ``BaseChatModel`` (``ChatOpenAI``, ``ChatAnthropic``, a fake...).
        provider: the provider name recorded (and matched); default: the model's own
            (``ls_provider``), e.g. ``"openai"``.
        model_name: the model name recorded (and matched); default: the model's own.
        replay_policy: ``"frozen"`` (default), ``"live"``, ``"forbidden"``, ``"manual"``.
        ignore_fields: JSON paths of request fields left out of the recorded request
            and of matching, e.g. ``["messages.*.response_metadata"]``.
    """
    if isinstance(model, TracedChatModel):
        return model
    if not isinstance(model, BaseChatModel):
        raise ConfigError(
            f"wrap_chat_model() expects a langchain_core BaseChatModel, got "
            f"{type(model).__qualname__}"
        )
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    cls = _StreamingTracedChatModel if _streams(model) else TracedChatModel
    return cls(
        inner=model,
        provider=provider,
        recorded_model=model_name,
        replay_policy=options.policy,
        ignore_fields=tuple(str(path) for path in options.ignore),
    )


# --- tools ----------------------------------------------------------------------------------

# The wrapped tool whose body is running: its async path may call its own sync _run (in an
# executor that copies the context), which must not be recorded a second time. Other tools
# and SDK calls made by the tool's code are recorded, as children of its span.
_running_tool: ContextVar[int | None] = ContextVar("sftrace_running_tool", default=None)

# Keyword arguments LangChain passes to a tool's _run besides the model's arguments.
_PLUMBING = frozenset({"run_manager", "callbacks", "config"})


def _visible_arguments(tool: BaseTool) -> frozenset[str] | None:
    """The argument names the model fills in (injected arguments excluded)."""
    try:
        schema = tool.tool_call_schema
        if isinstance(schema, dict):
            return frozenset(schema.get("properties", {}))
        fields: Any = getattr(schema, "model_fields", None) or getattr(schema, "__fields__", {})
        return frozenset(fields)
    except Exception:
        return None


def _tool_input(
    visible: frozenset[str] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    recorded = {
        key: value
        for key, value in kwargs.items()
        if key not in _PLUMBING and (visible is None or key in visible)
    }
    if args:
        recorded["args"] = list(args)
    return recorded


def _tool_restorer(tool: BaseTool) -> Any:
    def restore(value: Any) -> Any:
        if tool.response_format == "content_and_artifact" and isinstance(value, list):
            return tuple(value)
        return value

    return restore


def _reraise_tool_exception(error: RecordedDependencyError) -> None:
    """A recorded ``ToolException`` comes back as one, so error handling replays too."""
    if error.type_name.rpartition(".")[2] == "ToolException":
        raise ToolException(error.recorded_message) from error


def wrap_tool(
    tool: BaseTool, *, replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN
) -> BaseTool:
    """A copy of ``tool`` whose runs are recorded as tool spans and answered from the
    recording during a replay (the tool's code does not run). Idempotent.

    Args:
        tool: any LangChain ``BaseTool`` (``@tool`` functions, ``StructuredTool``...).
        replay_policy: ``"frozen"`` (default), ``"live"``, ``"forbidden"``, ``"manual"``
            or ``"derived"``.
    """
    if not isinstance(tool, BaseTool):
        raise ConfigError(
            f"wrap_tool() expects a langchain_core BaseTool, got {type(tool).__qualname__}"
        )
    if getattr(tool, "__sftrace_tool__", None) is not None:
        return tool
    policy = ReplayPolicy.parse(replay_policy, parameter="replay_policy")
    spec = BoundarySpec.tool(tool.name, policy, None)
    copy = tool.model_copy()
    visible = _visible_arguments(tool)
    restore = _tool_restorer(copy)
    what = f"tool {tool.name!r} input"
    run_sync, run_async = copy._run, copy._arun
    key = id(copy)

    @functools.wraps(run_sync)
    def traced_run(*args: Any, **kwargs: Any) -> Any:
        run = current_run()
        if run is None or _running_tool.get() == key:
            return run_sync(*args, **kwargs)
        input_json = request_json(_tool_input(visible, args, kwargs), _NO_OPTIONS, what=what)

        def body() -> Any:
            token = _running_tool.set(key)
            try:
                return run_sync(*args, **kwargs)
            finally:
                _running_tool.reset(token)

        try:
            return call_sync(run, spec, input_json, body, restore)
        except RecordedDependencyError as error:
            _reraise_tool_exception(error)
            raise

    @functools.wraps(run_async)
    async def traced_arun(*args: Any, **kwargs: Any) -> Any:
        run = current_run()
        if run is None or _running_tool.get() == key:
            return await run_async(*args, **kwargs)
        input_json = request_json(_tool_input(visible, args, kwargs), _NO_OPTIONS, what=what)

        async def body() -> Any:
            token = _running_tool.set(key)
            try:
                return await run_async(*args, **kwargs)
            finally:
                _running_tool.reset(token)

        try:
            return await call_async(run, spec, input_json, body, restore)
        except RecordedDependencyError as error:
            _reraise_tool_exception(error)
            raise

    # BaseTool is a pydantic model: instance attributes go around its __setattr__.
    object.__setattr__(copy, "_run", traced_run)
    object.__setattr__(copy, "_arun", traced_arun)
    object.__setattr__(copy, "__sftrace_tool__", spec)
    return copy


_NO_OPTIONS = Options(replay_policy=ReplayPolicy.FROZEN, ignore_fields=())


def wrap_tools(
    tools: Iterable[BaseTool], *, replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN
) -> list[BaseTool]:
    """:func:`wrap_tool` applied to each tool."""
    return [wrap_tool(tool, replay_policy=replay_policy) for tool in tools]
