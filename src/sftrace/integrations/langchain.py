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
streaming behave the same when replayed: streamed chunks are replayed one by one. The
model's runs keep the wrapped model's name there (callbacks, LangSmith, ``astream_events``).

A model call's request, as recorded and compared by a strict replay:
    ``{"messages": [...], "stop": [...], ...call keyword arguments}``: each message as its
    fields minus its ``id`` and minus fields left at their default (message ids are made
    up per run by LangChain and LangGraph, and not sent to providers), the stop words
    when given, and what the model was bound with or called with (``tools``,
    ``tool_choice``...), minus the JSON paths given as ``ignore_fields``. Whether the
    call streams is not in it: a replay that streams (``stream``/``astream``, LangGraph's
    ``stream_mode="messages"``) a call recorded without streaming, or the reverse,
    diverges at that call.

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
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.tools import BaseTool
from pydantic import ConfigDict

from sftrace._errors import ConfigError
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundaryCall
from sftrace._record.llm import llm_spec
from sftrace._record.run import ActiveRun, current_run
from sftrace.integrations._common import (
    Options,
    StreamRecorder,
    StreamReplay,
    arecord_items,
    areplayed_items,
    ending,
    record_items,
    refuse_other_shape,
    replayed_items,
    request_json,
    substitute_stream,
)
from sftrace.integrations._langchain_messages import (
    chunk_json,
    chunks_summary,
    request_message,
    restore_chunk,
    restore_result,
    result_output,
)
from sftrace.integrations._langchain_tools import is_traced_tool, traced_tool

__all__ = ["TracedChatModel", "wrap_chat_model", "wrap_tool", "wrap_tools"]

S = TypeVar("S")


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
    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        """The wrapped model's name (its ``name``, else its class's): the name callbacks,
        LangSmith runs and ``astream_events`` give the model's runs, as unwrapped."""
        return self.inner.get_name(suffix, name=name or self.name)

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
        request: dict[str, Any] = {"messages": [request_message(m) for m in messages]}
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
            call.finish(result_output(result))
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
                await call.await_recorded_cancellation()
                await call.ahold_answer()
                return _replayed_result(call)
            result = await self.inner._agenerate(messages, stop=stop, **call_kwargs)
            call.finish(result_output(result))
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
            yield from replayed_items(_replayed_stream(call))
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
            async for chunk in areplayed_items(_replayed_stream(call)):
                yield chunk
            return
        recorder, source = _open_stream(
            call, lambda: self.inner._astream(messages, stop=stop, **call_kwargs)
        )
        async for chunk in arecord_items(source, recorder):
            yield chunk


def _refuse_other_shape(call: BoundaryCall, *, streamed: bool) -> None:
    refuse_other_shape(
        call,
        streamed=streamed,
        response_key="generations",
        streamed_by="stream/astream",
        plain_by="invoke/ainvoke",
    )


def _replayed_result(call: BoundaryCall) -> ChatResult:
    """The recorded result of a call a replay does not make."""
    _refuse_other_shape(call, streamed=False)
    restored: ChatResult = call.substitute(restore_result)
    return restored


def _open_stream(call: BoundaryCall, open_source: Callable[[], S]) -> tuple[StreamRecorder, S]:
    """Open the wrapped model's stream for a recorded call. The recorder ends the call
    with the stream, or here if the stream cannot be opened."""
    call.detach()
    recorder = StreamRecorder(call, chunks_summary, convert=chunk_json)
    try:
        return recorder, open_source()
    except BaseException as exc:
        recorder.fail(exc)
        raise


def _replayed_stream(call: BoundaryCall) -> StreamReplay:
    """The recorded chunks of a replayed stream and how it ends (see ``StreamReplay``)."""
    with ending(call) as end:
        _refuse_other_shape(call, streamed=True)
        return substitute_stream(call, end, restore_chunk, what="a chat model stream")[1]


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
    if is_traced_tool(tool):
        return tool
    policy = ReplayPolicy.parse(replay_policy, parameter="replay_policy")
    return traced_tool(tool, policy)


def wrap_tools(
    tools: Iterable[BaseTool], *, replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN
) -> list[BaseTool]:
    """:func:`wrap_tool` applied to each tool."""
    return [wrap_tool(tool, replay_policy=replay_policy) for tool in tools]
