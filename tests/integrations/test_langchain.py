"""The LangChain integration: chat models, tools and a LangGraph agent, recorded and replayed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool, ToolException, tool
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from roundtrip import record_then_replay
from scripted_chat_model import ScriptedChatModel

from sftrace import ConfigError, ReplayMismatchError, load_bundle, record, replay
from sftrace.integrations.langchain import TracedChatModel, wrap_chat_model, wrap_tool, wrap_tools


def usage(inputs: int, outputs: int) -> Any:
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}


def answer(text: str = "Order 9 is late, sorry.") -> AIMessage:
    return AIMessage(content=text, usage_metadata=usage(20, 6))


def asks_for_lookup() -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": "lookup", "args": {"order_id": "9"}, "id": "call_9"}],
        usage_metadata=usage(10, 3),
    )


def comparable(value: Any) -> Any:
    """Messages and chunks without their ids (LangChain makes those up on every run)."""
    if isinstance(value, list | tuple):
        return [comparable(item) for item in value]
    if isinstance(value, BaseMessage):
        return (type(value).__name__, value.model_dump(exclude={"id"}))
    return value


# --- the chat model ---------------------------------------------------------------------


def run_model(model: Any, how: str) -> Any:
    prompt = [HumanMessage("Where is order 9?")]
    if how == "invoke":
        return model.invoke(prompt)
    if how == "ainvoke":
        return asyncio.run(model.ainvoke(prompt))
    if how == "stream":
        return list(model.stream(prompt))

    async def collect() -> list[Any]:
        return [chunk async for chunk in model.astream(prompt)]

    return asyncio.run(collect())


@pytest.mark.parametrize("reply", [answer, asks_for_lookup], ids=["text", "tool-call"])
@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
def test_model_calls_replay_equal_messages_without_calling_the_model(
    tmp_path: Path, how: str, reply: Callable[[], AIMessage]
) -> None:
    """invoke/ainvoke/stream/astream replay the same messages (tool calls, usage) offline."""
    inner = ScriptedChatModel(replies=[reply()])
    model = wrap_chat_model(inner)
    recorded, replayed, session = record_then_replay(
        tmp_path / "run.sftrace", inner, lambda: run_model(model, how)
    )
    assert comparable(replayed) == comparable(recorded)
    if how in ("invoke", "ainvoke"):
        assert replayed.tool_calls == reply().tool_calls
        assert replayed.usage_metadata == reply().usage_metadata
    else:
        assert all(isinstance(chunk, AIMessageChunk) for chunk in replayed)
        merged = sum(replayed[1:], replayed[0])
        assert merged.tool_calls == reply().tool_calls
        assert merged.usage_metadata == reply().usage_metadata
    call = load_bundle(tmp_path / "run.sftrace").calls[0]
    assert (call.provider, call.name) == ("fakeai", "scripted-1")
    assert call.input == {"messages": [{"type": "human", "content": "Where is order 9?"}]}
    expected = reply().usage_metadata
    assert expected is not None
    assert call.attributes["gen_ai.usage.input_tokens"] == expected["input_tokens"]
    assert call.attributes["gen_ai.usage.output_tokens"] == expected["output_tokens"]
    assert [m.action for m in session.matched] == ["substituted"]


def test_changed_prompt_is_a_strict_mismatch(tmp_path: Path) -> None:
    """A replayed model call with other messages raises ReplayMismatchError, model not called."""
    inner = ScriptedChatModel(replies=[answer()])
    model = wrap_chat_model(inner)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        model.invoke("Where is order 9?")
    inner.offline()
    with replay(path), pytest.raises(ReplayMismatchError) as raised:
        model.invoke("Where is order 10?")
    assert raised.value.differences == [
        ("$.messages[0].content", "Where is order 9?", "Where is order 10?")
    ]


@pytest.mark.parametrize(
    ("recorded_how", "replayed_how", "reason"),
    [
        ("stream", "invoke", "was streamed in the recording (stream/astream) but not"),
        ("astream", "ainvoke", "was streamed in the recording (stream/astream) but not"),
        ("invoke", "stream", "was not streamed in the recording (invoke/ainvoke) but is"),
        ("ainvoke", "astream", "was not streamed in the recording (invoke/ainvoke) but is"),
    ],
)
def test_a_model_streamed_one_way_and_replayed_the_other_diverges(
    tmp_path: Path, recorded_how: str, replayed_how: str, reason: str
) -> None:
    """Streaming is not in the compared request, but a recorded response of the other
    shape cannot answer the call: the replay diverges there (not a KeyError, not a
    'was the bundle edited?' BundleError)."""
    inner = ScriptedChatModel(replies=[answer()])
    model = wrap_chat_model(inner)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        run_model(model, recorded_how)
    inner.offline()
    with replay(path) as session, pytest.raises(ReplayMismatchError) as raised:
        run_model(model, replayed_how)
    assert session.divergence is raised.value
    assert raised.value.call_number == 1
    message = str(raised.value)
    assert message.startswith("replay diverged at call 1: call 1 (llm fakeai/scripted-1) ")
    assert reason in message


def test_bound_tools_keep_recording_and_are_part_of_the_request(tmp_path: Path) -> None:
    """bind_tools on the wrapper binds to the wrapper; the tools are in the recorded request."""
    inner = ScriptedChatModel(replies=[asks_for_lookup()])
    model = wrap_chat_model(inner)
    bound = model.bind_tools([lookup], tool_choice="auto")
    assert isinstance(bound, RunnableBinding)
    assert bound.bound is model
    with record("agent", output=tmp_path / "run.sftrace"):
        bound.invoke("Where is order 9?")
    request = load_bundle(tmp_path / "run.sftrace").calls[0].input
    assert request["tools"] == [convert_to_openai_tool(lookup)]
    assert request["tool_choice"] == "auto"


def test_wrapper_reads_through_and_wraps_once() -> None:
    """Wrapping is idempotent and attributes of the wrapped model stay readable."""
    inner = ScriptedChatModel(replies=[answer()])
    model = wrap_chat_model(inner)
    assert wrap_chat_model(model) is model
    assert isinstance(model, TracedChatModel)
    assert model.replies == inner.replies
    assert model._llm_type == "scripted"
    with pytest.raises(ConfigError, match="BaseChatModel"):
        wrap_chat_model(object())  # type: ignore[arg-type]


class RunNames(BaseTracer):
    """A tracer, as LangSmith's is: the name of each run it is told about."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def _start_trace(self, run: Run) -> None:
        super()._start_trace(run)
        self.names.append(run.name)

    def _persist_run(self, run: Run) -> None:
        pass


def model_run_names(model: Any) -> tuple[list[str], list[str]]:
    """The names a tracer and ``astream_events`` give the model's runs."""
    tracer = RunNames()
    model.invoke("Where is order 9?", config={"callbacks": [tracer]})

    async def events() -> list[str]:
        return [
            event["name"]
            async for event in model.astream_events("Where is order 9?", version="v2")
            if event["event"].startswith("on_chat_model_")
        ]

    return tracer.names, sorted(set(asyncio.run(events())))


@pytest.mark.parametrize("name", [None, "triage"], ids=["class-name", "named"])
def test_the_wrapper_keeps_the_models_name_for_callbacks_and_events(
    tmp_path: Path, name: str | None
) -> None:
    """Callbacks, LangSmith and ``astream_events`` name the model's runs as unwrapped
    (apps filter events by ``ev["name"]``), in and out of a recording."""
    replies = [answer()] * 4
    unwrapped = model_run_names(ScriptedChatModel(replies=replies, name=name))
    expected = name or "ScriptedChatModel"
    assert unwrapped == ([expected], [expected])
    model = wrap_chat_model(ScriptedChatModel(replies=replies, name=name))
    assert model_run_names(model) == unwrapped
    with record("agent", output=tmp_path / "run.sftrace"):
        assert model_run_names(model) == unwrapped
    assert model.bind_tools([lookup]).get_name() == expected


class BreakingChatModel(ScriptedChatModel):
    """A scripted model whose stream breaks after its first chunk."""

    def _stream(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> Any:
        yield next(super()._stream(messages, *args, **kw))
        raise ConnectionError("stream cut")


@pytest.mark.parametrize("how", ["stream", "astream"])
def test_stream_failing_midway_records_the_chunks_read_and_the_failure(
    tmp_path: Path, how: str
) -> None:
    """A stream that raises while being read ends its call as that failure, with the chunks
    read before it (complete: false); a replay yields them, then raises the failure."""
    inner = BreakingChatModel(replies=[answer()])
    model = wrap_chat_model(inner)
    prompt = [HumanMessage("Where is order 9?")]
    got: list[str] = []

    async def aread() -> None:
        async for chunk in model.astream(prompt):
            got.append(str(chunk.content))

    def agent() -> str:
        got.clear()
        try:
            if how == "stream":
                got.extend(str(chunk.content) for chunk in model.stream(prompt))
            else:
                asyncio.run(aread())
        except ConnectionError as exc:
            return f"kept {got} ({exc})"
        return "complete"

    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(path, inner, agent)
    assert replayed == recorded == "kept ['Order'] (stream cut)"
    (call,) = load_bundle(path).calls
    assert call.error is not None
    assert (call.error.type, call.error.message) == ("ConnectionError", "stream cut")
    assert call.output["complete"] is False
    assert len(call.output["chunks"]) == 1


def test_outside_a_recording_the_model_runs_as_usual(spans: InMemorySpanExporter) -> None:
    """No record()/replay(): the wrapped model answers, nothing is recorded."""
    inner = ScriptedChatModel(replies=[answer(), answer()])
    model = wrap_chat_model(inner)
    assert model.invoke("hi").content == answer().content
    assert "".join(str(c.content) for c in model.stream("hi")) == answer().content
    assert len(inner.calls) == 2
    assert spans.get_finished_spans() == ()


# --- tools ------------------------------------------------------------------------------

LOOKUPS: list[str] = []


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    LOOKUPS.append(order_id)
    return f"order {order_id} is late"


@tool
def cancel(order_id: str) -> str:
    """Cancel an order."""
    LOOKUPS.append(f"cancel {order_id}")
    raise ToolException(f"order {order_id} has shipped")


cancel.handle_tool_error = True


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_wrapped_tools_replay_without_running(tmp_path: Path, is_async: bool) -> None:
    """Tool results, and handled ToolExceptions, come back from the recording."""
    LOOKUPS.clear()
    tools = wrap_tools([lookup, cancel])

    def agent() -> list[Any]:
        calls = [
            {"name": "lookup", "args": {"order_id": "9"}, "id": "c1", "type": "tool_call"},
            {"name": "cancel", "args": {"order_id": "9"}, "id": "c2", "type": "tool_call"},
        ]
        if is_async:

            async def run_all() -> list[Any]:
                return [await t.ainvoke(c) for t, c in zip(tools, calls, strict=True)]

            return asyncio.run(run_all())
        return [t.invoke(c) for t, c in zip(tools, calls, strict=True)]

    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        recorded = agent()
    ran = list(LOOKUPS)
    with replay(path) as session:
        replayed = agent()
    session.verify_complete()
    assert LOOKUPS == ran == ["9", "cancel 9"]
    assert comparable(replayed) == comparable(recorded)
    assert isinstance(replayed[1], ToolMessage)
    assert replayed[1].status == "error"
    assert replayed[1].content == "order 9 has shipped"
    calls = load_bundle(path).calls
    assert [(c.label, c.input) for c in calls] == [
        ("tool lookup", {"order_id": "9"}),
        ("tool cancel", {"order_id": "9"}),
    ]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_calls_inside_a_wrapped_tool_are_recorded_once_each(tmp_path: Path, is_async: bool) -> None:
    """A tool calling another wrapped tool records both (nested), each exactly once."""
    LOOKUPS.clear()
    inner_tool = wrap_tool(lookup)

    @tool
    def triage(order_id: str) -> str:
        """Triage an order."""
        return "escalate: " + str(inner_tool.invoke({"order_id": order_id}))

    outer_tool = wrap_tool(triage)
    path = tmp_path / "run.sftrace"
    with record("agent", output=path):
        if is_async:
            result = asyncio.run(outer_tool.ainvoke({"order_id": "9"}))
        else:
            result = outer_tool.invoke({"order_id": "9"})
    assert result == "escalate: order 9 is late"
    calls = load_bundle(path).calls
    assert [call.label for call in calls] == ["tool triage", "tool lookup"]
    assert calls[1].parent_span_id == calls[0].span_id
    with replay(path) as session:
        replayed = outer_tool.invoke({"order_id": "9"})
    assert replayed == result
    assert LOOKUPS == ["9"]
    session.verify_complete()


def test_wrap_tool_returns_a_copy_and_is_idempotent() -> None:
    """The original tool is untouched; wrapping a wrapped tool returns it."""
    wrapped = wrap_tool(lookup)
    assert wrapped is not lookup
    assert wrap_tool(wrapped) is wrapped
    assert (wrapped.name, wrapped.description) == (lookup.name, lookup.description)
    assert isinstance(wrapped, BaseTool)
    with pytest.raises(ConfigError, match="BaseTool"):
        wrap_tool(len)  # type: ignore[arg-type]


# --- a LangGraph agent -----------------------------------------------------------------------


def build_agent(model: BaseChatModel, tools: list[BaseTool]) -> Any:
    """A ReAct-style LangGraph agent: the model node, a tool node, a conditional loop."""
    bound = model.bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


@pytest.mark.parametrize("mode", ["invoke", "stream-messages"])
def test_langgraph_agent_records_and_replays(tmp_path: Path, mode: str) -> None:
    """A LangGraph tool-calling agent replays offline: same messages, tools not run."""
    LOOKUPS.clear()
    inner = ScriptedChatModel(replies=[asks_for_lookup(), answer()])
    tools = wrap_tools([lookup])
    agent = build_agent(wrap_chat_model(inner), tools)
    question = {"messages": [HumanMessage("Where is order 9?")]}

    def run() -> Any:
        if mode == "invoke":
            return agent.invoke(question)["messages"]
        return [
            chunk.content
            for chunk, _ in agent.stream(question, stream_mode="messages")
            if isinstance(chunk, AIMessageChunk)
        ]

    recorded, replayed, session = record_then_replay(tmp_path / "run.sftrace", inner, run)
    assert comparable(replayed) == comparable(recorded)
    assert LOOKUPS == ["9"]
    if mode == "invoke":
        assert [type(m).__name__ for m in replayed] == [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "AIMessage",
        ]
        assert replayed[-1].content == answer().content
    else:
        assert "".join(replayed) == answer().content
    # Streaming the graph's messages makes LangChain stream the model: recorded as chunks.
    outputs = [c.output for c in load_bundle(tmp_path / "run.sftrace").calls if c.kind == "llm"]
    assert all(("chunks" in output) == (mode == "stream-messages") for output in outputs)
    assert [m.recorded.label for m in session.matched] == [
        "llm fakeai/scripted-1",
        "tool lookup",
        "llm fakeai/scripted-1",
    ]
