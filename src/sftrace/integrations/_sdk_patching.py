"""Patching the OpenAI and Anthropic SDKs' methods so that their calls are recorded.

A resource's method (``client.chat.completions.create``) is replaced on one instance
(:func:`instrument_create`, through :func:`instrument_client`, which also follows the
client's copies) or on its class for every instance (:func:`instrument_create_class`,
reversible through ``ClassPatches``); the replacement hands each call to
:func:`~sftrace.integrations._sdk.call_sync` / ``call_async``. No SDK is imported here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from sftrace.integrations._common import WRAPPED, ClassPatches, Options, is_wrapped
from sftrace.integrations._sdk import Endpoint, call_async, call_sync

C = TypeVar("C")


def provider_of(resource: Any, default: str) -> str:
    """The GenAI provider name of the client behind ``resource``."""
    client = getattr(resource, "_client", None)
    name = type(client).__name__ if client is not None else ""
    if name.startswith("AsyncAzure") or name.startswith("Azure"):
        return "azure.ai.openai"
    return default


# --- wrappers -------------------------------------------------------------------------------


def wrap_method(
    endpoint: Endpoint, function: Any, options: Options, provider: str, *, is_async: bool
) -> Any:
    """A replacement for ``function`` (an SDK class's method) that records its calls."""
    if is_async:

        @functools.wraps(function)
        async def async_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await call_async(
                endpoint,
                self,
                provider_of(self, provider),
                options,
                kwargs,
                lambda kw: function(self, *args, **kw),
            )

        return async_method

    @functools.wraps(function)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call_sync(
            endpoint,
            self,
            provider_of(self, provider),
            options,
            kwargs,
            lambda kw: function(self, *args, **kw),
        )

    return method


def wrap_bound(
    endpoint: Endpoint,
    resource: Any,
    bound: Any,
    options: Options,
    provider: str,
    *,
    is_async: bool,
) -> Any:
    """A replacement for ``bound`` (one resource's method) that records its calls."""
    name = provider_of(resource, provider)
    if is_async:

        @functools.wraps(bound)
        async def async_method(*args: Any, **kwargs: Any) -> Any:
            return await call_async(
                endpoint, resource, name, options, kwargs, lambda kw: bound(*args, **kw)
            )

        return async_method

    @functools.wraps(bound)
    def method(*args: Any, **kwargs: Any) -> Any:
        return call_sync(endpoint, resource, name, options, kwargs, lambda kw: bound(*args, **kw))

    return method


def instrument_create(
    resource: Any, endpoint: Endpoint, options: Options, provider: str, *, is_async: bool
) -> None:
    """Record ``resource.create`` (on this resource instance only)."""
    patch_resource(
        resource,
        "create",
        functools.partial(
            wrap_bound, endpoint, resource, options=options, provider=provider, is_async=is_async
        ),
    )


def instrument_create_class(
    patches: ClassPatches,
    cls: type,
    endpoint: Endpoint,
    options: Options,
    provider: str,
    *,
    is_async: bool,
) -> None:
    """Record ``cls.create`` for every instance of ``cls`` (until ``patches.restore()``)."""
    patches.patch(
        cls,
        "create",
        functools.partial(
            wrap_method, endpoint, options=options, provider=provider, is_async=is_async
        ),
    )


def patch_resource(resource: Any, name: str, make: Callable[[Any], Any]) -> bool:
    """Replace ``resource.<name>`` on this instance only; False if it already records."""
    current = getattr(resource, name)
    if is_wrapped(current):
        return False
    wrapper = make(current)
    setattr(wrapper, WRAPPED, current)
    setattr(resource, name, wrapper)
    return True


INSTRUMENTED = "_sftrace_instrumented"


def instrument_client(client: C, options: Options, patch: Callable[[Any, Options], None]) -> C:
    """Patch one client's resources with ``patch``, and the clients it copies itself into
    (``client.with_options(...)``, ``client.copy(...)``). Idempotent."""
    if getattr(client, INSTRUMENTED, False):
        return client
    patch(client, options)
    copy = getattr(client, "copy", None)
    if callable(copy):

        @functools.wraps(copy)
        def instrumented_copy(*args: Any, **kwargs: Any) -> Any:
            return instrument_client(copy(*args, **kwargs), options, patch)

        setattr(client, "copy", instrumented_copy)  # noqa: B010
        setattr(client, "with_options", instrumented_copy)  # noqa: B010
    setattr(client, INSTRUMENTED, True)
    return client
