"""The OpenAI Agents SDK's model calls: ``Model.get_response`` and ``Model.stream_response``
recorded as LLM calls, and answered from the recording during a replay.

Used by :mod:`sftrace.integrations.openai_agents`, which documents what is recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from agents import FunctionTool, Handoff, ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseOutputItem, ResponseStreamEvent
from pydantic import TypeAdapter

from sftrace._errors import BundleError
from sftrace._record.boundary import BoundaryCall
from sftrace._record.llm import llm_spec
from sftrace.integrations import openai as openai_integration
from sftrace.integrations._common import (
    JSON,
    ClassPatches,
    Options,
    StreamRecorder,
    areplayed_items,
    ending,
    input_json,
    inside_sdk_call,
    recording_run,
    refuse_other_shape,
    substitute_stream,
    summary,
    wire_json,
)

# Built the way the openai SDK builds its objects from the JSON of an HTTP body.
_construct = openai_integration.RESPONSES.sdk.construct
_USAGE = TypeAdapter(Usage)

patches = ClassPatches()


def _provider(model: Model) -> str:
    if type(model).__module__.startswith("agents.models.openai"):
        return "openai"
    return type(model).__name__


def _tool(tool: Any) -> JSON:
    if isinstance(tool, FunctionTool):
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.params_json_schema,
            "strict": tool.strict_json_schema,
        }
    return {"type": type(tool).__name__, "name": getattr(tool, "name", None)}


def _handoff(handoff: Handoff[Any, Any]) -> JSON:
    return {
        "tool_name": handoff.tool_name,
        "tool_description": handoff.tool_description,
        "input_json_schema": handoff.input_json_schema,
    }


# A prompt-caching hint, not part of what the model answers; the SDK makes up a new one for
# every run ("agents-sdk:run:<uuid>"), so it is left out of the recorded request.
_CACHE_KEY = "prompt_cache_key"


def _settings(settings: Any) -> JSON:
    to_json_dict = getattr(settings, "to_json_dict", None)
    values = to_json_dict() if callable(to_json_dict) else dataclasses.asdict(settings)
    found = {k: v for k, v in values.items() if v is not None and k != _CACHE_KEY}
    extra = found.get("extra_args")
    if isinstance(extra, dict) and _CACHE_KEY in extra:
        extra = {k: v for k, v in extra.items() if k != _CACHE_KEY}
        if extra:
            found["extra_args"] = extra
        else:
            del found["extra_args"]
    return found


def request(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A model call's request, as recorded and compared (see the integration's docs)."""
    schema = arguments.get("output_schema")
    found: dict[str, Any] = {
        "system_instructions": arguments.get("system_instructions"),
        "input": arguments.get("input"),
        "model_settings": _settings(arguments["model_settings"]),
        "tools": [_tool(tool) for tool in arguments.get("tools") or ()],
        "output_schema": None if schema is None or schema.is_plain_text() else schema.json_schema(),
        "handoffs": [_handoff(handoff) for handoff in arguments.get("handoffs") or ()],
    }
    for key in ("previous_response_id", "conversation_id", "prompt"):
        if arguments.get(key) is not None:
            found[key] = arguments[key]
    return found


def _begin(
    options: Options, model: Model, original: Callable[..., Any], args: Any, kwargs: Any
) -> BoundaryCall | None:
    run = recording_run()
    if run is None:
        return None
    bound = inspect.signature(original).bind(model, *args, **kwargs)
    provider, name = _provider(model), str(getattr(model, "model", None) or type(model).__name__)
    recorded = input_json(request(bound.arguments), options, what=f"{provider}/{name} request")
    return BoundaryCall(run, llm_spec(provider, name, options.policy, None), recorded)


def _response_output(response: ModelResponse) -> JSON:
    return {
        "output": [wire_json(item) for item in response.output],
        "usage": wire_json(_USAGE.dump_python(response.usage, mode="json")),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def _restore_response(output: JSON) -> ModelResponse:
    if not (
        isinstance(output, dict)
        and isinstance(output.get("output"), list)
        and isinstance(output.get("usage"), dict)
    ):
        raise BundleError(
            "a model response asks for a response, but the recorded one is not a model "
            "response (it has no 'output' list and 'usage'): was the bundle edited? "
            "Re-record the run"
        )
    return ModelResponse(
        output=[_construct(ResponseOutputItem, item) for item in output["output"]],
        usage=_USAGE.validate_python(output["usage"]),
        response_id=output.get("response_id"),
        request_id=output.get("request_id"),
    )


def _stream_summary(chunks: list[JSON]) -> dict[str, Any]:
    model = usage = None
    for event in chunks:
        response = event.get("response") if isinstance(event, dict) else None
        if isinstance(response, dict):
            model = response.get("model", model)
            if isinstance(response.get("usage"), dict):
                usage = response["usage"]
    return summary(model, usage)


def _refuse_other_shape(call: BoundaryCall, *, streamed: bool) -> None:
    refuse_other_shape(
        call,
        streamed=streamed,
        response_key="output",
        streamed_by="Runner.run_streamed",
        plain_by="Runner.run",
    )


def _get_response(original: Any, options: Options) -> Any:
    @functools.wraps(original)
    async def get_response(self: Model, *args: Any, **kwargs: Any) -> ModelResponse:
        call = _begin(options, self, original, args, kwargs)
        if call is None:
            return await original(self, *args, **kwargs)  # type: ignore[no-any-return]
        with ending(call):
            if not call.runs_body:
                _refuse_other_shape(call, streamed=False)
                restored: ModelResponse = await call.asubstitute(_restore_response)
                return restored
            with inside_sdk_call():
                response: ModelResponse = await original(self, *args, **kwargs)
            output = _response_output(response)
            call.finish(output)
            return response

    return get_response


async def _recorded_stream(call: BoundaryCall, source: Any) -> AsyncIterator[Any]:
    """Yield the model's events, recording each; the real model runs marked as inside an
    instrumented call (an instrumented OpenAI client under it records nothing twice)."""
    call.detach()
    with StreamRecorder(call, _stream_summary) as recorder:
        iterator = source.__aiter__()
        try:
            while True:
                try:
                    with inside_sdk_call():
                        event = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                recorder.add(event)
                try:
                    yield event
                except BaseException:
                    recorder.stopped()
                    raise
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()


def _stream_response(original: Any, options: Options) -> Any:
    @functools.wraps(original)
    async def stream_response(self: Model, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        call = _begin(options, self, original, args, kwargs)
        if call is None:
            async for event in original(self, *args, **kwargs):
                yield event
            return
        if not call.runs_body:
            with ending(call) as end:
                _refuse_other_shape(call, streamed=True)
                _, replay = substitute_stream(
                    call,
                    end,
                    lambda chunk: _construct(ResponseStreamEvent, chunk),
                    what="a streamed model response",
                )
            async for event in areplayed_items(replay):
                yield event
            return
        async for event in _recorded_stream(call, original(self, *args, **kwargs)):
            yield event

    return stream_response


def patch_model_class(cls: type[Model], options: Options) -> None:
    """Record ``cls``'s ``get_response`` and ``stream_response`` (until ``patches.restore()``)."""
    for name, make in (("get_response", _get_response), ("stream_response", _stream_response)):
        owner = next((klass for klass in cls.__mro__ if name in vars(klass)), None)
        if owner is None or owner is Model:
            continue
        patches.patch(owner, name, functools.partial(make, options=options))
