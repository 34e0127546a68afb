"""LangChain messages, chat results and stream chunks as the JSON sftrace records, and back.

What a chat model call's request and response look like once recorded is described in
:mod:`sftrace.integrations.langchain`; this module converts between LangChain's objects
and that JSON, and reads the model name and token usage out of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from sftrace._errors import BundleError
from sftrace.integrations._common import JSON, summary


def request_message(message: BaseMessage) -> JSON:
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


def result_output(result: ChatResult) -> JSON:
    messages = [generation.message for generation in result.generations]
    return {
        "generations": [
            {"message": _message_json(g.message), "generation_info": g.generation_info}
            for g in result.generations
        ],
        "llm_output": result.llm_output,
        **_summary(messages, result.llm_output),
    }


def restore_result(output: JSON) -> ChatResult:
    if not (isinstance(output, dict) and isinstance(output.get("generations"), list)):
        raise BundleError(
            "a chat model call asks for a result, but the recorded one is not a chat "
            "result (it has no 'generations' list): was the bundle edited? Re-record the run"
        )
    return ChatResult(
        generations=[
            ChatGeneration(message=_message(g["message"]), generation_info=g["generation_info"])
            for g in output["generations"]
        ],
        llm_output=output.get("llm_output"),
    )


def chunk_json(chunk: ChatGenerationChunk) -> JSON:
    return {"message": _message_json(chunk.message), "generation_info": chunk.generation_info}


def restore_chunk(value: JSON) -> ChatGenerationChunk:
    message = _message(value["message"])
    assert isinstance(message, BaseMessageChunk)
    return ChatGenerationChunk(message=message, generation_info=value.get("generation_info"))


def chunks_summary(chunks: list[JSON]) -> dict[str, Any]:
    return _summary([_message(chunk["message"]) for chunk in chunks])
