"""Recording LangChain tools: a copy of a ``BaseTool`` whose runs are tool spans.

:func:`traced_tool` makes the copy behind
:func:`sftrace.integrations.langchain.wrap_tool`: its ``_run`` / ``_arun`` record the
arguments the model chose (the fields of the tool's ``tool_call_schema``) and the tool's
return value, and during a replay answer from the recording without running the tool; a
recorded ``ToolException`` is raised again as one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.messages.tool import ToolOutputMixin
from langchain_core.tools import BaseTool, ToolException

from sftrace._errors import RecordedDependencyError
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundarySpec, call_async, call_sync
from sftrace._record.run import current_run
from sftrace.integrations._common import Options, request_json

# The wrapped tool whose body is running: its async path may call its own sync _run (in an
# executor that copies the context), which must not be recorded a second time. Other tools
# and SDK calls made by the tool's code are recorded, as children of its span.
_running_tool: ContextVar[int | None] = ContextVar("sftrace_running_tool", default=None)

# Whether the wrapped tool's current run makes a ToolMessage of its result: LangChain does
# when the run has a tool call id (a model's tool call); without one the caller gets the
# result itself.
_makes_message: ContextVar[bool] = ContextVar("sftrace_tool_makes_message", default=False)

# Keyword arguments LangChain passes to a tool's _run besides the model's arguments.
_PLUMBING = frozenset({"run_manager", "callbacks", "config"})


def _visible_arguments(tool: BaseTool) -> frozenset[str] | None:
    """The argument names the model fills in (injected arguments excluded)."""
    try:
        schema = tool.tool_call_schema
        if isinstance(schema, dict):
            return frozenset(schema.get("properties", {}))
        fields: Any = getattr(schema, "model_fields", None) or getattr(schema, "__fields__", {})
        return frozenset(fields)
    except Exception:
        return None


def _tool_input(
    visible: frozenset[str] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    recorded = {
        key: value
        for key, value in kwargs.items()
        if key not in _PLUMBING and (visible is None or key in visible)
    }
    if args:
        recorded["args"] = list(args)
    return recorded


def _tool_restorer(tool: BaseTool) -> Any:
    def restore(value: Any) -> Any:
        if tool.response_format == "content_and_artifact" and isinstance(value, list):
            return tuple(value)
        return value

    return restore


def _is_message_content(content: Any) -> bool:
    """Whether LangChain puts ``content`` into a ToolMessage as it is (text, content blocks)
    or passes it on (a ToolMessage, a LangGraph Command), rather than making text of it."""
    if isinstance(content, str | ToolOutputMixin):
        return True
    if (
        isinstance(content, list)
        and content
        and all(isinstance(item, ToolOutputMixin) for item in content)
    ):
        return True
    return isinstance(content, Sequence) and all(
        isinstance(item, str) or (isinstance(item, dict) and "type" in item) for item in content
    )


class _ToolMessageText:
    """The ToolMessage content LangChain makes of a result with ``str()`` (see
    ``langchain_core.tools.base._stringify``), which its recorded JSON would not give:
    recorded, and during a replay the tool answers with it (LangChain takes a ``str`` as it
    is), so the next model call sees the same message."""

    def __init__(self, tool: BaseTool) -> None:
        self.with_artifact = tool.response_format == "content_and_artifact"

    def text(self, value: Any) -> str | None:
        if not _makes_message.get():
            return None
        content = value
        if self.with_artifact:
            if not (isinstance(value, tuple) and len(value) == 2):
                return None
            content = value[0]
        if _is_message_content(content):
            return None
        try:
            json.dumps(content, ensure_ascii=False)
        except Exception:
            return str(content)
        return None  # the recorded JSON gives the same json.dumps text

    def restore(self, value: Any, text: str) -> Any:
        if not _makes_message.get():  # the caller gets the result itself, not a message
            return value
        if self.with_artifact:
            if isinstance(value, tuple) and len(value) == 2:
                return (text, value[1])
            return value
        return text


def _reraise_tool_exception(error: RecordedDependencyError) -> None:
    """A recorded ``ToolException`` comes back as one, so error handling replays too."""
    if error.type_name.rpartition(".")[2] == "ToolException":
        raise ToolException(error.recorded_message) from error


_NO_OPTIONS = Options(replay_policy=ReplayPolicy.FROZEN, ignore_fields=())

# Set on the copies traced_tool makes (to their BoundarySpec).
_MARKER = "__sftrace_tool__"


def is_traced_tool(tool: BaseTool) -> bool:
    """Whether ``tool`` is a copy :func:`traced_tool` made (so it records already)."""
    return getattr(tool, _MARKER, None) is not None


def traced_tool(tool: BaseTool, policy: ReplayPolicy) -> BaseTool:
    """A copy of ``tool`` whose runs are recorded as tool spans and answered from the
    recording during a replay (see ``wrap_tool``, which checks its arguments)."""
    spec = BoundarySpec.tool(tool.name, policy, None)
    copy = tool.model_copy()
    visible = _visible_arguments(tool)
    restore = _tool_restorer(copy)
    message_text = _ToolMessageText(copy)
    what = f"tool {tool.name!r} input"
    run_sync, run_async = copy._run, copy._arun
    key = id(copy)

    @functools.wraps(run_sync)
    def traced_run(*args: Any, **kwargs: Any) -> Any:
        run = current_run()
        if run is None or _running_tool.get() == key:
            return run_sync(*args, **kwargs)
        input_json = request_json(_tool_input(visible, args, kwargs), _NO_OPTIONS, what=what)

        def body() -> Any:
            token = _running_tool.set(key)
            try:
                return run_sync(*args, **kwargs)
            finally:
                _running_tool.reset(token)

        try:
            return call_sync(run, spec, input_json, body, restore, result_text=message_text)
        except RecordedDependencyError as error:
            _reraise_tool_exception(error)
            raise

    @functools.wraps(run_async)
    async def traced_arun(*args: Any, **kwargs: Any) -> Any:
        run = current_run()
        if run is None or _running_tool.get() == key:
            return await run_async(*args, **kwargs)
        input_json = request_json(_tool_input(visible, args, kwargs), _NO_OPTIONS, what=what)

        async def body() -> Any:
            token = _running_tool.set(key)
            try:
                return await run_async(*args, **kwargs)
            finally:
                _running_tool.reset(token)

        try:
            return await call_async(run, spec, input_json, body, restore, result_text=message_text)
        except RecordedDependencyError as error:
            _reraise_tool_exception(error)
            raise

    tool_run, tool_arun = copy.run, copy.arun

    @functools.wraps(tool_run)
    def run_noting_message(*args: Any, **kwargs: Any) -> Any:
        token = _makes_message.set(kwargs.get("tool_call_id") is not None)
        try:
            return tool_run(*args, **kwargs)
        finally:
            _makes_message.reset(token)

    @functools.wraps(tool_arun)
    async def arun_noting_message(*args: Any, **kwargs: Any) -> Any:
        token = _makes_message.set(kwargs.get("tool_call_id") is not None)
        try:
            return await tool_arun(*args, **kwargs)
        finally:
            _makes_message.reset(token)

    # BaseTool is a pydantic model: instance attributes go around its __setattr__.
    object.__setattr__(copy, "_run", traced_run)
    object.__setattr__(copy, "_arun", traced_arun)
    object.__setattr__(copy, "run", run_noting_message)
    object.__setattr__(copy, "arun", arun_noting_message)
    object.__setattr__(copy, _MARKER, spec)
    return copy
