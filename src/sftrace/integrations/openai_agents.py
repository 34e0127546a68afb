"""Record and replay runs of the OpenAI Agents SDK (``pip install "sftrace[openai-agents]"``).

::

    from agents import Agent, Runner, set_default_openai_client
    from openai import AsyncOpenAI
    from sftrace import record, replay
    from sftrace.integrations.openai_agents import instrument

    client = AsyncOpenAI()
    set_default_openai_client(client)
    agent = instrument(Agent(name="triage", handoffs=[weather_agent], tools=[...]))

    with record("triage", output="run.sftrace"):
        result = Runner.run_sync(agent, "Weather in Lisbon?")
    with replay("run.sftrace"):                    # no HTTP request, no tool body runs
        result = Runner.run_sync(agent, "Weather in Lisbon?")

:func:`instrument` prepares an agent and every agent it can hand off to (its handoffs,
theirs, and so on):

- **Model calls** are recorded where the runner asks a model for a response: the
  ``get_response`` and ``stream_response`` methods of the SDK's model classes
  (``OpenAIResponsesModel``, ``OpenAIChatCompletionsModel``, and the class of each
  agent's own ``Model`` object), patched on the class the first time :func:`instrument`
  runs, until :func:`uninstrument_all`. Each call is an LLM span (provider ``openai``
  for the SDK's OpenAI models, else the model class's name; the model name). The
  request, as recorded and compared by a strict replay, is ``{"system_instructions",
  "input", "model_settings", "tools", "output_schema", "handoffs", ...}``: the input
  items as JSON, the model settings that are set, each function tool as ``{"type",
  "name", "description", "parameters", "strict"}`` (other tools by type and name),
  the output type's JSON schema, each handoff's tool name, description and schema, and
  ``previous_response_id``/``conversation_id``/``prompt`` when given. The response is
  ``{"output": [...], "usage": {...}, "response_id", "request_id"}`` (the output items
  as the Responses API's JSON, the SDK's ``Usage``), or for a stream ``{"chunks":
  [...], "complete", "model", "usage"}`` (every Responses API event). A replay returns
  a real ``ModelResponse`` (or yields the recorded events as the SDK's event types)
  without calling the model: no HTTP request, whatever the provider. Whether the call
  streams is not in the compared request; a replay that streams a call recorded
  without streaming (``Runner.run_streamed`` replaying a ``Runner.run`` recording), or
  the reverse, diverges at that call.
- **Function tools** (``@function_tool``, ``FunctionTool``) are recorded as tool spans
  named by the tool's name: the input is the arguments the model chose (the tool call's
  JSON arguments), the output what the function returned. During a frozen replay the
  function does not run: the recorded value is returned (rebuilt as the function's
  annotated return type, a pydantic model or a dataclass for instance), or the recorded
  exception is raised again inside the SDK's tool error handling, which turns it into the
  same message for the model as when it was recorded.

Handoffs are the model's tool calls, answered from the recorded model responses; the SDK
performs them as recorded (an ``on_handoff`` callback is the application's code and runs).

Why here and not in a tracing processor: the SDK's ``TracingProcessor`` is told about
spans after the fact and cannot answer a call, so it can record but never replay. The
model interface and the tool invoker are where the runner waits for an answer, so a
replay can give it one; the model interface rather than the OpenAI client because the
SDK streams Responses API calls through ``with_streaming_response`` (a raw HTTP
response), and because it works the same for every model provider.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any, TypeVar

from agents import Agent, FunctionTool, Handoff, OpenAIChatCompletionsModel, OpenAIResponsesModel
from agents.models.interface import Model

from sftrace._errors import ConfigError
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundarySpec, call_async
from sftrace._record.run import current_run
from sftrace._record.tool import return_restorer
from sftrace.integrations._agents_model import patch_model_class, patches
from sftrace.integrations._common import WRAPPED, Options, input_json, is_wrapped

__all__ = ["instrument", "uninstrument_all"]

A = TypeVar("A", bound=Agent[Any])


def _agents(agent: Agent[Any]) -> Iterator[Agent[Any]]:
    """``agent`` and every agent reachable through handoffs, each once."""
    seen: set[int] = set()
    pending: list[Agent[Any]] = [agent]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for handoff in current.handoffs:
            if isinstance(handoff, Agent):
                pending.append(handoff)
            elif isinstance(handoff, Handoff):
                # The SDK keeps the target of handoff(agent) as a weak reference.
                reference = getattr(handoff, "_agent_ref", None)
                target = reference() if callable(reference) else None
                if isinstance(target, Agent):
                    pending.append(target)


def _tool_input(raw: str) -> Any:
    """The arguments the model chose, as JSON (the raw text when it is not JSON)."""
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {"input": raw}


def _restorer(tool: FunctionTool) -> Any:
    try:
        function = tool.__wrapped__  # the Python function given to @function_tool
    except AttributeError:
        return lambda value: value
    return return_restorer(function)


def _wrap_tool(tool: FunctionTool, options: Options) -> None:
    """Record ``tool``'s invocations (in place; idempotent).

    ``@function_tool`` tools invoke through the SDK's failure-handling invoker; the
    recording wraps what it calls (``_invoke_tool_impl``), so the SDK's error handling,
    argument preparation and ``tool.__wrapped__`` stay as they are. Other tools get
    their ``on_invoke_tool`` wrapped.
    """
    invoker = tool.on_invoke_tool
    owner: Any = invoker if hasattr(invoker, "_invoke_tool_impl") else tool
    attribute = "_invoke_tool_impl" if owner is invoker else "on_invoke_tool"
    inner = getattr(owner, attribute)
    if is_wrapped(inner):
        return
    spec = BoundarySpec.tool(tool.name, options.policy, None)
    restore = _restorer(tool)
    what = f"tool {tool.name!r} input"

    async def invoke(context: Any, raw: str) -> Any:
        run = current_run()
        if run is None:
            return await inner(context, raw)
        recorded_input = input_json(_tool_input(raw), options, what=what)
        return await call_async(run, spec, recorded_input, lambda: inner(context, raw), restore)

    functools.update_wrapper(invoke, inner)  # keeps the SDK's markers on the function
    setattr(invoke, WRAPPED, inner)
    setattr(owner, attribute, invoke)


def instrument(
    agent: A,
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: tuple[str, ...] | list[str] = (),
) -> A:
    """Record the model and tool calls of runs of ``agent`` (and the agents it hands off to)
    inside ``record()``; answer them inside ``replay()``. Returns ``agent`` itself.

    Idempotent (the first settings stay). Outside ``record()``/``replay()`` the agents
    and models behave exactly as before. Model calls are recorded on the model classes,
    so they keep the ``replay_policy``/``ignore_fields`` of the first ``instrument()``
    call until :func:`uninstrument_all`; tools keep those of the agent they belong to.

    Args:
        agent: an ``agents.Agent``.
        replay_policy: ``"frozen"`` (default), ``"live"``, ``"forbidden"``, ``"manual"``
            for its model and tool calls.
        ignore_fields: JSON paths left out of the recorded model requests and tool
            inputs, and so of replay matching (``"input.*.id"``, ``"model_settings"``).
    """
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"instrument() expects an agents.Agent, got {type(agent).__qualname__}; for an "
            f"OpenAI client use sftrace.integrations.openai.instrument"
        )
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    model_classes: list[type[Model]] = [OpenAIResponsesModel, OpenAIChatCompletionsModel]
    for each in _agents(agent):
        for tool in each.tools:
            if isinstance(tool, FunctionTool):
                _wrap_tool(tool, options)
        if isinstance(each.model, Model):
            model_classes.append(type(each.model))
    for cls in model_classes:
        patch_model_class(cls, options)
    return agent


def uninstrument_all() -> None:
    """Stop recording model calls (restore the model classes :func:`instrument` patched).

    Function tools instrumented stay instrumented (they record only inside a run).
    """
    patches.restore()
