"""LangChain tools whose result LangChain turns into ToolMessage text with str(): a replay
sends the next model call the same message as the recorded run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel
from roundtrip import record_then_replay
from scripted_chat_model import ScriptedChatModel

from sftrace import load_bundle
from sftrace.integrations.langchain import wrap_chat_model, wrap_tools

PLACED = datetime(2025, 1, 2, tzinfo=UTC)


class Order(BaseModel):
    order_id: str
    total: float


@dataclass
class Parcel:
    order_id: str
    placed: datetime


RESULTS: dict[str, Any] = {
    "datetime": {"order_id": "9", "placed": PLACED},
    "set": {"tags": {"late"}},
    "pydantic": Order(order_id="9", total=9.5),
    "dataclass": Parcel(order_id="9", placed=PLACED),
    "dict": {"order_id": "9", "late": True},
    "str": "order 9 is late",
    "list": ["late", 9],
}
# What LangChain could not json.dumps: recorded as text too.
AS_TEXT = {"datetime", "set", "pydantic", "dataclass"}


def tools_for(kind: str) -> list[BaseTool]:
    @tool
    def lookup(order_id: str) -> Any:
        """Look up an order."""
        return RESULTS[kind]

    @tool
    def lookup_order(order_id: str) -> Order:
        """Look up an order."""
        return Order(order_id=order_id, total=9.5)

    if kind == "pydantic-annotated":
        lookup_order.name = "lookup"
        return wrap_tools([lookup_order])
    return wrap_tools([lookup])


def scripted() -> ScriptedChatModel:
    ask = AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": "9"}, "id": "c9"}])
    return ScriptedChatModel(replies=[ask, AIMessage("done")])


def agent_for(model: Any, tools: list[BaseTool], is_async: bool = False) -> Any:
    bound = wrap_chat_model(model).bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    compiled = graph.compile()
    question = {"messages": [HumanMessage("Where is order 9?")]}
    if is_async:
        return lambda: asyncio.run(compiled.ainvoke(question))["messages"]
    return lambda: compiled.invoke(question)["messages"]


def tool_message(messages: list[Any]) -> ToolMessage:
    (found,) = [m for m in messages if isinstance(m, ToolMessage)]
    return found


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", [*RESULTS, "pydantic-annotated"])
def test_tool_message_content_replays_as_recorded(
    tmp_path: Path, kind: str, is_async: bool
) -> None:
    """Whatever the tool returns, the replayed ToolMessage (and so the next model call,
    which the replay checks against the recording) has the recorded content."""
    model = scripted()
    path = tmp_path / "run.sftrace"
    recorded, replayed, _ = record_then_replay(
        path, model, agent_for(model, tools_for(kind), is_async)
    )
    assert tool_message(replayed).content == tool_message(recorded).content
    if kind in AS_TEXT or kind == "pydantic-annotated":
        assert tool_message(recorded).content == str(RESULTS[kind.partition("-")[0]])
    (call,) = [c for c in load_bundle(path).calls if c.kind == "tool"]
    text = call.attributes.get("sftrace.output.text")
    assert text == (tool_message(recorded).content if kind.partition("-")[0] in AS_TEXT else None)


def test_content_and_artifact_tool_replays_content_and_artifact(tmp_path: Path) -> None:
    @tool(response_format="content_and_artifact")
    def lookup(order_id: str) -> tuple[Any, Any]:
        """Look up an order."""
        return {"order_id": order_id, "placed": PLACED}, {"rows": [1, 2]}

    model = scripted()
    recorded, replayed, _ = record_then_replay(
        tmp_path / "run.sftrace", model, agent_for(model, wrap_tools([lookup]))
    )
    assert tool_message(replayed).content == tool_message(recorded).content
    assert "datetime.datetime(2025" in str(tool_message(recorded).content)
    assert tool_message(replayed).artifact == tool_message(recorded).artifact == {"rows": [1, 2]}


def test_recorded_text_is_redacted(tmp_path: Path) -> None:
    """A secret under a sensitive key is redacted from the recorded text as from the output."""

    @tool
    def lookup(order_id: str) -> Any:
        """Look up an order."""
        return {"api_key": "k-0123456789abcdef", "placed": PLACED}

    model = scripted()
    path = tmp_path / "run.sftrace"
    record_then_replay(path, model, agent_for(model, wrap_tools([lookup])))
    (call,) = [c for c in load_bundle(path).calls if c.kind == "tool"]
    text = call.attributes["sftrace.output.text"]
    assert "datetime.datetime(2025" in text
    assert "k-0123456789abcdef" not in text
    assert "k-0123456789abcdef" not in path.joinpath("spans.jsonl").read_text()


def test_a_direct_invocation_still_gets_the_recorded_value(tmp_path: Path) -> None:
    """Without a tool call id LangChain hands the result itself back, not a message: the
    replay answers with the recorded value as before, never with the text."""
    (lookup,) = tools_for("datetime")
    model = scripted()

    def agent() -> Any:
        return lookup.invoke({"order_id": "9"})

    _, replayed, _ = record_then_replay(tmp_path / "run.sftrace", model, agent)
    assert replayed == {"order_id": "9", "placed": "2025-01-02T00:00:00+00:00"}
