"""Record and replay calls made through LLM SDKs and frameworks.

Each integration is a module of its own, imported only when you use it, and needs its
optional extra:

- :mod:`sftrace.integrations.openai` (``pip install "sftrace[openai]"``):
  ``chat.completions.create`` and ``responses.create`` of ``OpenAI``/``AsyncOpenAI``
  clients, streamed or not.
- :mod:`sftrace.integrations.anthropic` (``pip install "sftrace[anthropic]"``):
  ``messages.create`` and ``messages.stream`` of ``Anthropic``/``AsyncAnthropic``.
- :mod:`sftrace.integrations.langchain` (``pip install "sftrace[langchain]"``): any
  LangChain chat model and tool, hence LangGraph agents.
- :mod:`sftrace.integrations.mcp` (``pip install "sftrace[mcp]"``): ``mcp.Client`` and
  ``mcp.ClientSession`` calls to MCP servers (tools, resources, prompts).
- :mod:`sftrace.integrations.openai_agents` (``pip install "sftrace[openai-agents]"``):
  runs of OpenAI Agents SDK agents (model calls, function tools, handoffs).

Importing ``sftrace`` or this package imports none of these SDKs. What is recorded and
compared is described in ``docs/integrations.md``.
"""

from __future__ import annotations

__all__: list[str] = []
