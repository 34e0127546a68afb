"""A LangChain chat model answering from a script, for tests and scenario agents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCallChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """A chat model answering from a script; streams each reply word by word.

    ``offline()`` makes any call fail (listed in ``refused``), to prove a replay never
    reaches the model.
    """

    replies: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)
    is_offline: bool = False

    def offline(self) -> None:
        self.is_offline = True

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "fakeai", "ls_model_name": "scripted-1", "ls_model_type": "chat"}

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        if self.is_offline:
            self.refused.append(str(messages[-1].content))
            raise AssertionError("the model was called during a replay")
        self.calls.append(messages)
        return self.replies[len(self.calls) - 1]

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        reply = self._next(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)], llm_output={"n": 1})

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._next(messages)
        words = str(reply.content).split(" ") if reply.content else []
        for number, word in enumerate(words):
            text = word if number == 0 else " " + word
            yield ChatGenerationChunk(message=AIMessageChunk(content=text))
        tool_chunks: list[ToolCallChunk] = [
            {
                "name": call["name"],
                "args": json.dumps(call["args"]),
                "id": call["id"],
                "index": index,
                "type": "tool_call_chunk",
            }
            for index, call in enumerate(reply.tool_calls)
        ]
        last = AIMessageChunk(
            content="", tool_call_chunks=tool_chunks, usage_metadata=reply.usage_metadata
        )
        yield ChatGenerationChunk(message=last)
