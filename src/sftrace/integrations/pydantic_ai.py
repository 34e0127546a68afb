"""Record and replay Pydantic AI agents on OpenAI models (``pip install "sftrace[pydantic-ai]"``).

::

    from pydantic_ai import Agent
    from sftrace import record, replay
    from sftrace.integrations.pydantic_ai import instrument

    agent = Agent("openai:gpt-4o", tools=[parcel_status])
    instrument(agent)
    with record("support-agent", output="run.sftrace"):
        agent.run_sync("Where is parcel 42?")
    with replay("run.sftrace"):  # no HTTP request, no tool body runs
        agent.run_sync("Where is parcel 42?")

:func:`instrument` prepares one ``pydantic_ai.Agent`` whose model is an
``OpenAIChatModel`` or ``OpenAIResponsesModel`` (a model name such as
``"openai:gpt-4o"`` is resolved to one, and kept on the agent):

- **Model calls** are recorded by :func:`sftrace.integrations.openai.instrument` on the
  OpenAI client the model's provider holds (what is recorded and compared is described
  there): Pydantic AI calls ``chat.completions.create`` / ``responses.create``, plain or
  streamed, on it. A replay returns the SDK's objects to Pydantic AI, which builds its
  own messages (``ModelResponse``, ``ToolCallPart``...) from them as it does live.
- **Function tools** of the agent's function toolsets (``tools=[...]``, ``@agent.tool``,
  ``@agent.tool_plain``, ``FunctionToolset``) registered before :func:`instrument` are
  recorded as tool spans named by the tool: the input is the validated arguments, the
  output what the function returned. During a frozen replay the function does not run:
  the recorded value is returned (rebuilt as the function's annotated return type), or
  the recorded exception raised again (a ``ModelRetry`` makes Pydantic AI ask the model
  again, as it did when recorded).

Not covered: other model classes (Anthropic, Gemini...: instrument their SDK clients with
the matching integration), tools registered after :func:`instrument`, MCP toolsets (see
:mod:`sftrace.integrations.mcp`). Pydantic AI's own OpenTelemetry spans (Logfire's
``instrument_pydantic_ai()``) are recorded with sftrace's, which nest inside them, but
not replayed (docs/integrations.md, "Beside Logfire").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic_ai import Agent
from pydantic_ai.models import infer_model
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.toolsets import FunctionToolset

from sftrace._errors import ConfigError
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundarySpec, call_async
from sftrace._record.run import current_run
from sftrace._record.tool import return_restorer
from sftrace.integrations import openai as openai_integration
from sftrace.integrations._common import WRAPPED, Options, input_json, is_wrapped

__all__ = ["instrument"]

AgentT = TypeVar("AgentT", bound=Agent[Any, Any])


def instrument(
    agent: AgentT,
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: Iterable[str] = (),
) -> AgentT:
    """Record ``agent``'s model and function tool calls inside ``record()``; answer them
    inside ``replay()``. Returns ``agent`` itself; idempotent.

    Args:
        agent: a ``pydantic_ai.Agent`` on an OpenAI model.
        replay_policy: ``"frozen"`` (default), ``"live"``, ``"forbidden"``, ``"manual"``
            for its model and tool calls.
        ignore_fields: JSON paths left out of the recorded model requests and tool
            inputs, and so of replay matching (``"messages.*.name"``).
    """
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"instrument() expects a pydantic_ai.Agent, got {type(agent).__qualname__}"
        )
    model = None if agent.model is None else infer_model(agent.model)
    if not isinstance(model, OpenAIChatModel | OpenAIResponsesModel):
        raise ConfigError(
            f"instrument() records Pydantic AI agents on OpenAIChatModel or "
            f"OpenAIResponsesModel, got {type(model).__qualname__} ({agent.model!r}); "
            f"give the agent an OpenAI model, or instrument its SDK client directly"
        )
    agent.model = model
    ignore = tuple(ignore_fields)
    openai_integration.instrument(model.client, replay_policy=replay_policy, ignore_fields=ignore)
    options = Options(replay_policy=replay_policy, ignore_fields=ignore)
    for toolset in agent.toolsets:
        if isinstance(toolset, FunctionToolset):
            for tool in toolset.tools.values():
                _wrap_tool(tool, options)
    return agent


def _wrap_tool(tool: Any, options: Options) -> None:
    """Record the calls of one ``pydantic_ai.Tool`` (in place; idempotent). The wrapping is
    around its function schema's ``call``: Pydantic AI validates the arguments, handles
    ``ModelRetry`` and builds the tool's return part around it as before."""
    schema = tool.function_schema
    inner = schema.call
    if is_wrapped(inner):
        return
    spec = BoundarySpec.tool(tool.name, options.policy, None)
    restore = return_restorer(schema.function)
    what = f"tool {tool.name!r} input"

    async def call(args_dict: dict[str, Any], ctx: Any) -> Any:
        run = current_run()
        if run is None:
            return await inner(args_dict, ctx)
        recorded_input = input_json(args_dict, options, what=what)
        return await call_async(run, spec, recorded_input, lambda: inner(args_dict, ctx), restore)

    setattr(call, WRAPPED, inner)
    schema.call = call
