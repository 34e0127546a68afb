"""Record and replay calls made to MCP servers (``pip install "sftrace[mcp]"``).

::

    from mcp import Client
    from sftrace import record, replay
    from sftrace.integrations.mcp import instrument

    client = instrument(Client(server))         # an mcp.Client or an mcp.ClientSession
    with record("mcp-agent", output="run.sftrace"):
        async with client:
            await client.call_tool("forecast", {"city": "Lisbon"})
    with replay("run.sftrace"):                  # no connection, no request
        async with client:
            await client.call_tool("forecast", {"city": "Lisbon"})

:func:`instrument` records one ``mcp.Client`` or ``mcp.ClientSession``. Every call below
is a tool span (``sftrace.kind = "tool"``) named as listed, with ``mcp.method.name`` set:

=========================  ======================  ========================================
method                     recorded name           input (as matched by a strict replay)
=========================  ======================  ========================================
``call_tool(name, args)``  the tool's ``name``     ``args`` (``{}`` when None)
``list_tools()``           ``mcp:tools/list``      ``{}``, or ``{"cursor": ...}`` for a page
``list_prompts()``         ``mcp:prompts/list``    as for ``list_tools``
``list_resources()``       ``mcp:resources/list``  as for ``list_tools``
``read_resource(uri)``     ``mcp:resources/read``  ``{"uri": uri}``
``get_prompt(name, args)`` ``mcp:prompts/get``     ``{"name": name, "arguments": args}``
``initialize()``           ``mcp:initialize``      ``{}`` (``ClientSession`` only)
=========================  ======================  ========================================

Timeouts, progress callbacks, ``meta``, ``cache_mode`` and the input-required resume
arguments are not part of the input. The output is the result as the server sent it (the
pydantic model's JSON with MCP's field names, ``isError`` and ``_meta`` included). A
result with ``isError: true`` is a result, not an exception: it is recorded and replayed
as one, and its span carries ``error.type = "tool_error"``. An exception (``MCPError`` for
a JSON-RPC error, a timeout...) is recorded as the call's failure and raised again, as the
same class with the same ``code``, ``message`` and ``data``, by a replay.

During a frozen replay the calls return real ``CallToolResult``, ``ListToolsResult``,
``ReadResourceResult``, ``GetPromptResult``... objects built from the recording, and
nothing is sent. An ``mcp.Client`` entered (``async with client``) inside a replay does
not connect: no subprocess is started, no URL is opened; if the replay decides to run
one of its calls for real (``replay_policy="live"``, ``allow_live_tools``...) it connects
then. Reading ``client.session`` (or ``server_info``, ``protocol_version``...) of a
client that was not connected raises :class:`sftrace.ReplayError`. A ``ClientSession``
is opened by the application over its own transport; sftrace then sends nothing on it:
``initialize()`` installs the recorded handshake result (``session.adopt``) instead.
"""

from __future__ import annotations

import functools
import inspect
import threading
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import mcp.types as mcp_types
from mcp import Client, ClientSession

from sftrace._errors import ConfigError, ReplayError
from sftrace._internal import internal_error
from sftrace._model.policy import ReplayPolicy
from sftrace._record.boundary import BoundaryCall, BoundarySpec
from sftrace._record.run import current_run
from sftrace.integrations._common import (
    WRAPPED,
    Options,
    ending,
    input_json,
    inside_sdk_call,
    recording_run,
    wire_json,
)

__all__ = ["instrument"]

C = TypeVar("C", Client, ClientSession)

METHOD_ATTRIBUTE = "mcp.method.name"
RESOURCE_URI_ATTRIBUTE = "mcp.resource.uri"
PROMPT_NAME_ATTRIBUTE = "gen_ai.prompt.name"
ERROR_TYPE_ATTRIBUTE = "error.type"
_INSTRUMENTED = "_sftrace_mcp_options"


@dataclass(frozen=True, slots=True)
class Described:
    """One MCP call as recorded: its name, input, span name and extra span attributes."""

    name: str
    input: Any
    span_name: str
    attributes: Mapping[str, Any]


def _cursor(arguments: Mapping[str, Any]) -> dict[str, Any]:
    cursor = arguments.get("cursor")
    params = arguments.get("params")
    if cursor is None and params is not None:
        cursor = getattr(params, "cursor", None)
    return {} if cursor is None else {"cursor": cursor}


def _listing(method: str) -> Callable[[Mapping[str, Any]], Described]:
    def describe(arguments: Mapping[str, Any]) -> Described:
        return Described(f"mcp:{method}", _cursor(arguments), method, {METHOD_ATTRIBUTE: method})

    return describe


def _call_tool(arguments: Mapping[str, Any]) -> Described:
    name = str(arguments["name"])
    arguments_json = arguments.get("arguments") or {}
    return Described(name, arguments_json, f"tools/call {name}", {METHOD_ATTRIBUTE: "tools/call"})


def _read_resource(arguments: Mapping[str, Any]) -> Described:
    uri = str(arguments["uri"])
    return Described(
        "mcp:resources/read",
        {"uri": uri},
        f"resources/read {uri}",
        {METHOD_ATTRIBUTE: "resources/read", RESOURCE_URI_ATTRIBUTE: uri},
    )


def _get_prompt(arguments: Mapping[str, Any]) -> Described:
    name = str(arguments["name"])
    return Described(
        "mcp:prompts/get",
        {"name": name, "arguments": arguments.get("arguments") or {}},
        f"prompts/get {name}",
        {METHOD_ATTRIBUTE: "prompts/get", PROMPT_NAME_ATTRIBUTE: name},
    )


def _initialize(arguments: Mapping[str, Any]) -> Described:
    return Described("mcp:initialize", {}, "initialize", {METHOD_ATTRIBUTE: "initialize"})


@dataclass(frozen=True, slots=True)
class Method:
    """An instrumented method: how a call is described and its result type rebuilt."""

    describe: Callable[[Mapping[str, Any]], Described]
    result_type: type[Any]


_METHODS: dict[str, Method] = {
    "call_tool": Method(_call_tool, mcp_types.CallToolResult),
    "list_tools": Method(_listing("tools/list"), mcp_types.ListToolsResult),
    "list_prompts": Method(_listing("prompts/list"), mcp_types.ListPromptsResult),
    "list_resources": Method(_listing("resources/list"), mcp_types.ListResourcesResult),
    "read_resource": Method(_read_resource, mcp_types.ReadResourceResult),
    "get_prompt": Method(_get_prompt, mcp_types.GetPromptResult),
}
_SESSION_METHODS: dict[str, Method] = {
    **_METHODS,
    "initialize": Method(_initialize, mcp_types.InitializeResult),
}


def _bind(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call's arguments by parameter name (defaults applied)."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def _begin(
    options: Options, method: Method, function: Callable[..., Any], args: Any, kwargs: Any
) -> BoundaryCall | None:
    """The recording (or replaying) call for one MCP call; None when it just runs."""
    run = recording_run()
    if run is None:
        return None
    described = method.describe(_bind(function, args, kwargs))
    spec = BoundarySpec.tool(described.name, options.policy, None)
    spec = replace(
        spec, span_name=described.span_name, attributes={**spec.attributes, **described.attributes}
    )
    recorded_input = input_json(described.input, options, what=f"MCP {described.name!r} input")
    return BoundaryCall(run, spec, recorded_input)


def _finish(call: BoundaryCall, result: Any) -> None:
    try:
        output = wire_json(result)
        if isinstance(output, dict) and output.get("isError") is True:
            call.span.set_attribute(ERROR_TYPE_ATTRIBUTE, "tool_error")
    except Exception as exc:  # never break the host: record what can be recorded
        internal_error("recording an MCP result", exc)
        output = None
    call.finish(output)


def _restorer(method: Method, owner: Any) -> Callable[[Any], Any]:
    def restore(output: Any) -> Any:
        if not isinstance(output, dict):
            return output
        result = method.result_type.model_validate(output)
        if isinstance(owner, ClientSession) and isinstance(result, mcp_types.InitializeResult):
            owner.adopt(result)  # the negotiated state, as the real handshake installs it
        return result

    return restore


def _wrap(
    owner: Any,
    name: str,
    method: Method,
    options: Options,
    connect: Callable[[], Awaitable[None]] | None,
) -> None:
    """Replace ``owner.<name>`` (on this instance only) by a recording wrapper."""
    function = getattr(owner, name)
    if getattr(function, WRAPPED, None) is not None:
        return

    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _begin(options, method, function, args, kwargs)
        if call is None:
            return await function(*args, **kwargs)
        with ending(call):
            if not call.runs_body:
                return await call.asubstitute(_restorer(method, owner))
            if connect is not None:
                await connect()
            with inside_sdk_call():
                result = await function(*args, **kwargs)
            _finish(call, result)
            return result

    setattr(wrapper, WRAPPED, function)
    setattr(owner, name, wrapper)


# --- mcp.Client: no connection during a replay ------------------------------------------


class _ReplayableClientMixin:
    """An ``mcp.Client`` that does not connect when entered inside a replay."""

    _sftrace_deferred: bool = False
    _session: ClientSession | None
    _entered: bool

    async def __aenter__(self) -> Any:
        run = current_run()
        if run is None or run.replay is None:
            return await super().__aenter__()  # type: ignore[misc]
        if self._entered:
            raise RuntimeError("Client is already entered; cannot reenter")
        self._entered = True
        self._sftrace_deferred = True
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._sftrace_deferred = False
        await super().__aexit__(*exc_info)  # type: ignore[misc]

    async def _sftrace_connect(self) -> None:
        """Connect a client entered during a replay, for a call the replay runs for real."""
        if self._sftrace_deferred and self._session is None:
            self._entered = False
            self._sftrace_deferred = False
            await super().__aenter__()  # type: ignore[misc]

    @property
    def session(self) -> ClientSession:
        if self._sftrace_deferred and self._session is None:
            raise ReplayError(
                "this mcp.Client was entered during a replay, so sftrace did not connect it "
                "to its server: its session, server_info, protocol_version and the methods "
                "sftrace does not record (complete, list_resource_templates...) are not "
                "available; use the recorded methods (call_tool, list_tools, read_resource, "
                "get_prompt...), or let the replay run a call live to connect it"
            )
        session: ClientSession = super().session  # type: ignore[misc]
        return session


_replayable_classes: dict[type[Client], type[Client]] = {}
_classes_lock = threading.Lock()


def _replayable(cls: type[Client]) -> type[Client]:
    """``cls`` with :class:`_ReplayableClientMixin` in front (same name and module)."""

    def body(namespace: dict[str, Any]) -> None:
        namespace["__module__"] = cls.__module__
        namespace["__qualname__"] = cls.__qualname__
        namespace["__doc__"] = cls.__doc__

    with _classes_lock:
        made = _replayable_classes.get(cls)
        if made is None:
            bases = (_ReplayableClientMixin, cls)
            made = _replayable_classes[cls] = types.new_class(cls.__name__, bases, exec_body=body)
        return made


def instrument(
    client: C,
    *,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    ignore_fields: tuple[str, ...] | list[str] = (),
) -> C:
    """Record this MCP client's calls inside ``record()``; answer them inside ``replay()``.

    Returns the same object. Idempotent (the first settings stay). Outside
    ``record()``/``replay()`` the client behaves exactly as before. Instrument an
    ``mcp.Client`` before entering it (``async with``); a ``ClientSession`` at any time.

    Args:
        client: an ``mcp.Client`` or ``mcp.ClientSession``.
        replay_policy: what a replay does with these calls: ``"frozen"`` (default:
            answered from the recording), ``"live"``, ``"forbidden"``, ``"manual"``,
            ``"derived"``.
        ignore_fields: JSON paths of input fields left out of the recording and so of
            replay matching, e.g. ``["request_id"]`` for a tool argument that changes
            from run to run; ``*`` matches every key or list item.
    """
    if getattr(client, _INSTRUMENTED, None) is not None:
        return client
    options = Options(replay_policy=replay_policy, ignore_fields=ignore_fields)
    if isinstance(client, Client):
        if not isinstance(client, _ReplayableClientMixin):
            client.__class__ = _replayable(type(client))
        connect = client._sftrace_connect  # type: ignore[attr-defined]
        for name, method in _METHODS.items():
            _wrap(client, name, method, options, connect)
    elif isinstance(client, ClientSession):
        for name, method in _SESSION_METHODS.items():
            _wrap(client, name, method, options, None)
    else:
        raise ConfigError(
            f"instrument() expects an mcp.Client or mcp.ClientSession, got "
            f"{type(client).__qualname__}"
        )
    setattr(client, _INSTRUMENTED, options)
    return client
