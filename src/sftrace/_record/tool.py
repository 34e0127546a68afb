"""``@trace_tool``: record a tool call, and answer it from the recording during replay."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

import orjson

from sftrace._internal import log_once, warn_once
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import Serializer
from sftrace._model.text import first_line
from sftrace._record.boundary import BoundarySpec, Restore, call_async, call_sync
from sftrace._record.run import current_run
from sftrace._record.unrecorded import recordable_input

F = TypeVar("F", bound=Callable[..., Any])

_P = inspect.Parameter


class ArgumentBinder:
    """Maps a call's arguments to parameter names (defaults applied, ``self``/``cls`` dropped).

    Simple signatures (no positional-only, ``*args`` or ``**kwargs``) take a fast path;
    anything else goes through ``inspect.Signature.bind``, which raises the same
    ``TypeError`` the function itself would for a bad call. A callable without an
    inspectable signature (builtins such as ``max``) is recorded as
    ``{"args": [...], "kwargs": {...}}``.

    The signature is the one ``inspect`` reports, which follows ``__wrapped__``: under a
    ``functools.wraps`` decorator that adds or removes arguments (one that supplies a
    ``db`` itself), a call the wrapper accepts may not bind to it. Such a call is recorded
    in the same ``{"args": [...], "kwargs": {...}}`` shape (``self``/``cls`` dropped), as
    the wrapper got it, rather than raising where the plain call would not; a replay binds
    the same way, so it matches. Only a call the wrapper's own signature refuses too
    raises the ``TypeError``.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.signature: inspect.Signature | None
        try:
            self.signature = signature = inspect.signature(func)
        except (ValueError, TypeError):
            self.signature = None
            signature = inspect.Signature()
        params = list(signature.parameters.values())
        self.drop = _self_or_cls(params)
        self.simple = all(p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY) for p in params)
        self.positional = tuple(p.name for p in params if p.kind is _P.POSITIONAL_OR_KEYWORD)
        self.names = frozenset(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not _P.empty}
        self.count = len(params)
        self.var_keyword = next((p.name for p in params if p.kind is _P.VAR_KEYWORD), None)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.signature is None:
            return _as_passed(args, kwargs)
        if self.simple and len(args) <= len(self.positional):
            bound = dict(zip(self.positional, args, strict=False))
            if kwargs:
                for key in kwargs:
                    if key not in self.names or key in bound:
                        return self._slow(args, kwargs)
                bound.update(kwargs)
            if len(bound) < self.count:
                for key, default in self.defaults.items():
                    bound.setdefault(key, default)
                if len(bound) < self.count:
                    return self._slow(args, kwargs)  # a missing argument: let bind() say so
        else:
            bound = self._slow(args, kwargs)
        if self.drop is not None:
            bound.pop(self.drop, None)
        return bound

    def _slow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        assert self.signature is not None
        try:
            bound_arguments = self.signature.bind(*args, **kwargs)
        except TypeError:
            as_passed = self._unbound(args, kwargs)
            if as_passed is None:
                raise
            return as_passed
        bound_arguments.apply_defaults()
        arguments = dict(bound_arguments.arguments)
        if self.drop is not None:
            arguments.pop(self.drop, None)
        if self.var_keyword is not None:
            extra: dict[str, Any] = arguments.pop(self.var_keyword, {})
            if extra.keys() & arguments.keys() or any(key.startswith("**") for key in extra):
                # A keyword named like ``*args`` or a positional-only parameter: merged,
                # f(1, 2) and f(1, rest=[2]) of ``f(x, *rest, **kw)`` would record one input.
                arguments["**" + self.var_keyword] = extra
            else:
                arguments.update(extra)
        return arguments

    def _unbound(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The input of a call that does not bind to ``self.signature``: as passed, when
        the wrapper's own signature accepts it (or cannot be inspected); else None (a bad
        call: the function itself would raise the ``TypeError``)."""
        try:
            own = inspect.signature(self.func, follow_wrapped=False)
        except (ValueError, TypeError):
            own = None
        if own is not None:
            try:
                own.bind(*args, **kwargs)
            except TypeError:
                return None
            params = list(own.parameters.values())
            if params and params[0].kind is _P.VAR_POSITIONAL:  # (*args, **kwargs)
                drop = self.drop is not None
            else:
                drop = _self_or_cls(params) is not None
            if drop and args:
                args = args[1:]
        return _as_passed(args, kwargs)


def _self_or_cls(params: list[inspect.Parameter]) -> str | None:
    """The name of a method's first parameter when it is ``self`` or ``cls`` (dropped
    from the recorded input), else None."""
    if (
        params
        and params[0].name in ("self", "cls")
        and params[0].kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
    ):
        return params[0].name
    return None


def _as_passed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The input of a call not bound to parameter names: its arguments as passed."""
    return {"args": list(args), "kwargs": kwargs}


def default_tool_name(func: Callable[..., Any]) -> str:
    """The name a tool is recorded under when ``trace_tool`` is given none.

    A function's ``__name__``; for a ``functools.partial`` (nested ones too) the name of
    the function it wraps; for a callable object, its class's qualified name. Never its
    ``repr()``: that holds a partial's bound arguments (an API key, in clear) and the
    object's address, which differs in every process, so a replay would never match.
    """
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__name__", None)
    if isinstance(name, str) and name:
        return name
    return type(func).__qualname__


def _is_async(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` gives a coroutine: an ``async def`` function or method (a
    ``functools.partial`` of one too), or a callable object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(func):
        return True
    if inspect.isroutine(func) or isinstance(func, functools.partial):
        return False
    return inspect.iscoroutinefunction(getattr(type(func), "__call__", None))  # noqa: B004


def _described(func: Callable[..., Any]) -> str:
    """``func`` in a message: its qualified name (partials and callable objects have
    none: their default tool name)."""
    qualname = getattr(func, "__qualname__", None)
    return qualname if isinstance(qualname, str) else default_tool_name(func)


# The same, as the text of a string annotation (``from __future__ import annotations``).
_PLAIN_RETURN_NAMES: frozenset[str] = frozenset(
    {"Any", "None", "object", "dict", "list", "str", "int", "float", "bool", "typing.Any"}
)
_PLAIN_RETURNS: frozenset[Any] = frozenset(
    {inspect.Signature.empty, Any, None, type(None), object, dict, list, str, int, float, bool}
)
_ANY_VALUE: frozenset[Any] = frozenset({Any, object})


def _holds_json_as_is(annotation: Any) -> bool:
    """True when a parsed JSON value needs no restoring to be of type ``annotation``: the
    plain types, and ``dict[str, Any]`` / ``list[Any]`` (pydantic would only copy it)."""
    if annotation in _PLAIN_RETURNS:
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        return len(args) == 2 and args[0] is str and args[1] in _ANY_VALUE
    if origin is list:
        return len(args) == 1 and args[0] in _ANY_VALUE
    return False


def return_restorer(func: Callable[..., Any]) -> Restore:
    """Rebuild a replayed JSON value as the function's annotated return type.

    Replayed values are the recorded JSON. When the function's return annotation is a
    pydantic model, a dataclass, or any type pydantic can validate (``list[Model]``,
    ``datetime``...), the value is validated into that type, so the agent gets the same
    kind of object it got when the run was recorded: ``bytes`` (recorded as base64 text)
    decoded, also inside dataclasses and containers; a pydantic model's fields as its own
    config says, as it dumped them. Built lazily, on first replay.
    """
    cached: list[Restore] = []

    def restore(value: Any) -> Any:
        if not cached:
            cached.append(_build_restorer(func))
        return cached[0](value)

    return restore


def _build_restorer(func: Callable[..., Any]) -> Restore:
    try:
        annotation = typing.get_type_hints(func).get("return", inspect.Signature.empty)
    except Exception as exc:
        try:
            annotation = inspect.signature(func).return_annotation
        except (ValueError, TypeError):  # no inspectable signature (a builtin)
            return _identity
        if isinstance(annotation, str):
            if annotation.strip() not in _PLAIN_RETURN_NAMES:
                warn_once(
                    f"resolving the return annotation of {_described(func)}",
                    f"the return annotation of {_described(func)}, {annotation!r}, cannot be "
                    f"resolved ({type(exc).__name__}: {first_line(str(exc))}), so its replay "
                    f"returns the recorded JSON as it is (a dict for a model) instead of "
                    f"that type; import the names it uses where the function is defined "
                    f"(not only under TYPE_CHECKING)",
                    exc,
                )
            return _identity
    return type_restorer(annotation, f"the return type of {_described(func)}")


def type_restorer(annotation: Any, what: str) -> Restore:
    """Rebuild a replayed JSON value as ``annotation`` (``what`` it is, for the log): a
    pydantic model, a dataclass, or any type pydantic can validate (see
    :func:`return_restorer`); the plain JSON types as they are. A value that does not
    validate is answered as its JSON, saying so once (one line)."""
    try:
        if _holds_json_as_is(annotation):
            return _identity
    except TypeError:  # unhashable annotation
        pass
    from pydantic import ConfigDict, TypeAdapter

    try:
        # Recording stores bytes as base64 text (pydantic models: as their own config
        # says, which they keep here): the config decodes it. In a 1-tuple, since a
        # TypeAdapter refuses a config for a dataclass or a model itself.
        adapter: TypeAdapter[Any] = TypeAdapter(
            tuple[annotation],
            config=ConfigDict(val_json_bytes="base64"),
        )
    except Exception as exc:
        log_once(f"building a replay restorer for {what}", exc)
        return _identity

    excluded = _excluded_fields(annotation)

    def restore(value: Any) -> Any:
        if excluded:
            _warn_excluded(what, annotation, excluded)
        try:
            return _validated(adapter, value)
        except Exception as exc:
            warn_once(
                f"restoring {what}",
                f"restoring {what} failed, so the replay answers with the recorded JSON "
                f"({_summary(exc)})",
                exc,
            )
            return value

    return restore


def _validated(adapter: Any, value: Any) -> Any:
    """``value`` (a recorded result) validated as the return annotation.

    As recorded (``model_dump(mode="json")``): fields under their names, also those with
    an alias; computed fields too, which a model that forbids extra keys refuses, so the
    keys it calls extra are dropped and it is validated once more. An ``Iterable[T]``
    comes back as a list: pydantic's lazy iterator could be walked once only.
    """
    from pydantic import ValidationError

    try:
        restored = adapter.validate_python((value,), by_alias=True, by_name=True)[0]
    except ValidationError as exc:
        extras = [error["loc"][1:] for error in exc.errors() if error["type"] == "extra_forbidden"]
        if not extras or len(extras) != exc.error_count():
            raise
        pruned = (_without(value, extras),)
        restored = adapter.validate_python(pruned, by_alias=True, by_name=True)[0]
    if type(restored).__name__ == "ValidatorIterator":
        return list(restored)
    return restored


def _without(value: Any, paths: list[tuple[Any, ...]]) -> Any:
    """A copy of ``value`` without the object keys at ``paths`` (validation error locs)."""
    copied = orjson.loads(orjson.dumps(value))
    for path in paths:
        node = copied
        for step in path[:-1]:
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                node = None
                break
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return copied


def _excluded_fields(annotation: Any) -> tuple[str, ...]:
    """The fields a pydantic model annotation leaves out of its dumps (``exclude=True``)."""
    fields = getattr(annotation, "model_fields", None) if isinstance(annotation, type) else None
    if not isinstance(fields, dict):
        return ()
    return tuple(name for name, info in fields.items() if getattr(info, "exclude", None) is True)


def _warn_excluded(what: str, model: Any, excluded: tuple[str, ...]) -> None:
    """Say once that a replayed model lacks the fields its dumps leave out."""
    warn_once(
        f"excluded fields of {what}",
        f"{what} is {getattr(model, '__qualname__', model)}, whose field(s) "
        f"{', '.join(excluded)} are excluded from its dumps (Field(exclude=True)), so the "
        f"recording does not hold them and the replayed model has their defaults; record "
        f"them with a serializer= if the agent reads them",
    )


def _summary(exc: BaseException) -> str:
    """``exc`` on one line: its type and the first lines of its message (pydantic's
    ValidationError: the count, then the first error's place and reason)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()][:3]
    return f"{type(exc).__name__}: {' / '.join(lines)}"


def _identity(value: Any) -> Any:
    return value


@overload
def trace_tool(func: F, /) -> F: ...
@overload
def trace_tool(
    func: str | None = None,
    /,
    *,
    name: str | None = None,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    serializer: Serializer | None = None,
) -> Callable[[F], F]: ...


def trace_tool(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    replay_policy: ReplayPolicy | str = ReplayPolicy.FROZEN,
    serializer: Serializer | None = None,
) -> Any:
    """Record calls of a tool function; answer them from the recording during replay.

    Use as ``@trace_tool`` or ``@trace_tool(name=..., replay_policy=..., serializer=...)``
    on sync and ``async def`` functions and methods. Inputs are recorded by parameter name
    (defaults applied, ``self``/``cls`` dropped); the result, or the raised exception, is
    recorded and passed through unchanged. Outside any recording or replay the function
    runs as if undecorated.

    Args:
        name: the tool name recorded and matched on replay. Default: the function name
            (for a ``functools.partial``, its function's; for a callable object, its
            class's qualified name).
        replay_policy: what a replay does with this call: ``"frozen"`` (default),
            ``"live"``, ``"forbidden"``, ``"manual"`` or ``"derived"``.
        serializer: converts values JSON cannot hold (returns a JSON-compatible value
            or raises ``TypeError``).
    """
    if isinstance(func, str):
        name, func = func, None
    policy = ReplayPolicy.parse(replay_policy, parameter="replay_policy")

    def decorate(fn: F) -> F:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(
                f"@trace_tool cannot wrap the generator function {_described(fn)}: a tool "
                f"must return its whole result; collect it into a list and return that"
            )
        if not callable(fn):
            raise TypeError(f"@trace_tool expects a function, got {type(fn).__qualname__}")
        tool_name = name or default_tool_name(fn)
        spec = BoundarySpec.tool(tool_name, policy, serializer)
        binder = ArgumentBinder(fn)
        restore = return_restorer(fn)
        what = f"tool {tool_name!r} input"

        if _is_async(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                run = current_run()
                if run is None:
                    return await fn(*args, **kwargs)
                input_json = recordable_input(
                    run, binder.arguments(args, kwargs), serializer or run.serializer, what=what
                )
                return await call_async(run, spec, input_json, lambda: fn(*args, **kwargs), restore)

            wrapper: Any = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                # With no run in the process (the common case in production) this
                # costs one list check.
                run = current_run()
                if run is None:
                    return fn(*args, **kwargs)
                input_json = recordable_input(
                    run, binder.arguments(args, kwargs), serializer or run.serializer, what=what
                )
                return call_sync(run, spec, input_json, lambda: fn(*args, **kwargs), restore)

            wrapper = sync_wrapper
        wrapper.__sftrace_tool__ = spec
        return typing.cast(F, wrapper)

    if func is not None:
        return decorate(func)
    return decorate
