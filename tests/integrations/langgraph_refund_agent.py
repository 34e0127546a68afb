"""A LangGraph refund agent as users build it: a model node, a tool node, a conditional
loop, and a guard after the graph. ``handle`` trusts the tools' outcome (the recorded
bug: a 45-day-old order was refunded); ``handle_fixed`` flags refunds of orders older
than the 30-day policy for review. The chat model is scripted and refuses every call
unless a test gives it replies, so a replay that reached it would fail.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from scripted_chat_model import ScriptedChatModel

from sftrace.integrations.langchain import wrap_chat_model, wrap_tools

BODIES: list[str] = []
MODEL = ScriptedChatModel(replies=[], is_offline=True)


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order: its age in days and amount."""
    BODIES.append("lookup_order")
    return {"order_id": order_id, "age_days": 45, "amount": 80.0}


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    BODIES.append("issue_refund")
    return f"refunded {amount} on {order_id}"


TOOLS = wrap_tools([lookup_order, issue_refund])


def _graph() -> Any:
    bound = wrap_chat_model(MODEL).bind_tools(TOOLS)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def _run(question: str) -> list[Any]:
    return list(_graph().invoke({"messages": [HumanMessage(question)]})["messages"])


def _outcome(messages: list[Any]) -> dict[str, Any]:
    refunded = any(
        isinstance(m, ToolMessage) and str(m.content).startswith("refunded") for m in messages
    )
    final = messages[-1]
    reply = final.content if isinstance(final, AIMessage) else ""
    return {"decision": "refunded" if refunded else "denied", "reply": reply}


def _age(messages: list[Any]) -> int:
    import json

    for message in messages:
        if isinstance(message, ToolMessage) and message.name == "lookup_order":
            return int(json.loads(str(message.content))["age_days"])
    return 0


def handle(request: dict[str, Any]) -> dict[str, Any]:
    return _outcome(_run(request["question"]))


def handle_fixed(request: dict[str, Any]) -> dict[str, Any]:
    messages = _run(request["question"])
    outcome = _outcome(messages)
    if outcome["decision"] == "refunded" and _age(messages) > 30:
        outcome["decision"] = "needs_review"
    return outcome


def handle_reworded(request: dict[str, Any]) -> dict[str, Any]:
    """A deliberate change: the question sent to the model is reworded."""
    return _outcome(_run(request["question"] + " Please hurry."))


def script_replies() -> list[AIMessage]:
    usage = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
    return [
        AIMessage(
            content="",
            tool_calls=[{"name": "lookup_order", "args": {"order_id": "A-7"}, "id": "c1"}],
            usage_metadata=usage,
        ),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "issue_refund", "args": {"order_id": "A-7", "amount": 80.0}, "id": "c2"}
            ],
            usage_metadata=usage,
        ),
        AIMessage(content="Your refund of 80.0 is on its way.", usage_metadata=usage),
    ]
