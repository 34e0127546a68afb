"""The stream classes of the OpenAI and Anthropic SDK integrations, and how an SDK is declared.

A streamed response is handed back as a subclass of the SDK's own ``Stream`` /
``AsyncStream`` mixing in one of the classes here: recording, it iterates through the real
stream and records every item as it passes; replaying, it yields the recorded items and
sends nothing. :func:`declare_sdk` makes those subclasses for one SDK and names how it
builds response objects from JSON (:class:`SDK`). The usage helpers read a model and
token usage out of recorded stream chunks. No SDK is imported here.
"""

from __future__ import annotations

import importlib
import types
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, cast

from sftrace._record.failure import register_error_codec
from sftrace.integrations._common import (
    JSON,
    StreamRecorder,
    StreamReplay,
    arecord_items,
    areplayed_items,
    record_items,
    replayed_items,
)
from sftrace.integrations._sdk_errors import sdk_error_codec

# --- stream classes (mixed into each SDK's Stream / AsyncStream) ---------------------------


class _RecordingStreamBase:
    """What both recording streams share: the real stream they iterate through."""

    response: Any

    def __init__(self, inner: Any, recorder: StreamRecorder, items: Any) -> None:
        self.response = inner.response
        self._sftrace_inner = inner
        self._sftrace_recorder = recorder
        self._iterator = items
        # A stream dropped before it was iterated still ends its span.
        weakref.finalize(self, recorder.finish, False).atexit = False

    def __getattr__(self, name: str) -> Any:
        # Anything else the SDK (or its own tracing) reads comes from the real stream.
        if name.startswith("_sftrace"):
            raise AttributeError(name)
        return getattr(self._sftrace_inner, name)


class RecordingStreamMixin(_RecordingStreamBase):
    """A real SDK stream, iterated through: every item is recorded as it passes."""

    _iterator: Iterator[Any]

    def __init__(self, inner: Any, recorder: StreamRecorder) -> None:
        super().__init__(inner, recorder, record_items(inner, recorder))

    def close(self) -> None:
        try:
            self._sftrace_inner.close()
        finally:
            cast(Generator[Any, None, None], self._iterator).close()
            self._sftrace_recorder.finish(False)


class AsyncRecordingStreamMixin(_RecordingStreamBase):
    """The async twin of :class:`RecordingStreamMixin`."""

    _iterator: AsyncIterator[Any]

    def __init__(self, inner: Any, recorder: StreamRecorder) -> None:
        super().__init__(inner, recorder, arecord_items(inner, recorder))

    async def close(self) -> None:
        try:
            await self._sftrace_inner.close()
        finally:
            await cast(AsyncGenerator[Any, None], self._iterator).aclose()
            self._sftrace_recorder.finish(False)


class ReplayStreamMixin:
    """A stream answered from a recording: yields the recorded items and ends as the
    recording did (see ``StreamReplay``), sends nothing."""

    response: Any
    _iterator: Iterator[Any]

    def __init__(self, replay: StreamReplay, response: Any) -> None:
        self.response = response
        self._sftrace_replay = replay
        self._iterator = replayed_items(replay)
        # A stream dropped before it was iterated still ends its span.
        weakref.finalize(self, replay.close).atexit = False

    def close(self) -> None:
        try:
            cast(Generator[Any, None, None], self._iterator).close()
        finally:
            self._sftrace_replay.close()


class AsyncReplayStreamMixin:
    """The async twin of :class:`ReplayStreamMixin`."""

    response: Any
    _iterator: AsyncIterator[Any]

    def __init__(self, replay: StreamReplay, response: Any) -> None:
        self.response = response
        self._sftrace_replay = replay
        self._iterator = areplayed_items(replay)
        weakref.finalize(self, replay.close).atexit = False

    async def close(self) -> None:
        try:
            await cast(AsyncGenerator[Any, None], self._iterator).aclose()
        finally:
            self._sftrace_replay.close()


# --- declaring an SDK -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SDK:
    """One SDK's classes and its way of building response objects from JSON."""

    stream: type
    async_stream: type
    recording_stream: Callable[[Any, StreamRecorder], Any]
    async_recording_stream: Callable[[Any, StreamRecorder], Any]
    replay_stream: Callable[[StreamReplay, Any], Any]
    async_replay_stream: Callable[[StreamReplay, Any], Any]
    # (type, JSON) -> object, the way the SDK builds a response from the JSON it received
    construct: Callable[[Any, JSON], Any]
    request_id_header: str


def _constructor(package: str) -> Callable[[Any, JSON], Any]:
    """``(type, JSON) -> object``, the way the SDK ``package`` builds it from a response body."""
    try:
        construct_type = importlib.import_module(f"{package}._models").construct_type
    except (ImportError, AttributeError):  # pragma: no cover - a future SDK without it
        from pydantic import TypeAdapter

        return lambda type_, value: TypeAdapter(type_).validate_python(value)
    return lambda type_, value: construct_type(type_=type_, value=value)


def declare_sdk(
    module: str, package: str, *, stream: type, async_stream: type, request_id_header: str
) -> SDK:
    """The :class:`SDK` of ``package`` (``"openai"``...), with its stream classes' recording
    and replaying subclasses, made here as classes of the integration ``module``."""

    def subclass(name: str, mixin: type, base: type, what: str) -> type:
        def body(namespace: dict[str, Any]) -> None:
            namespace["__module__"] = module
            namespace["__qualname__"] = name
            namespace["__doc__"] = f"An ``{package}.{base.__name__}`` {what}."

        return types.new_class(name, (mixin, cast(Any, base)[Any]), exec_body=body)

    register_error_codec(sdk_error_codec(package))
    return SDK(
        stream=stream,
        async_stream=async_stream,
        recording_stream=subclass(
            "_RecordingStream", RecordingStreamMixin, stream, "recorded as it is iterated"
        ),
        async_recording_stream=subclass(
            "_AsyncRecordingStream",
            AsyncRecordingStreamMixin,
            async_stream,
            "recorded as it is iterated",
        ),
        replay_stream=subclass(
            "_ReplayStream", ReplayStreamMixin, stream, "yielding recorded items"
        ),
        async_replay_stream=subclass(
            "_AsyncReplayStream", AsyncReplayStreamMixin, async_stream, "yielding recorded items"
        ),
        construct=_constructor(package),
        request_id_header=request_id_header,
    )


# --- usage in streams -----------------------------------------------------------------


def last_usage(chunks: list[JSON], key: str = "usage") -> JSON:
    """The last non-null ``usage`` among chunks (OpenAI sends it on the final chunk)."""
    for chunk in reversed(chunks):
        if isinstance(chunk, dict) and isinstance(chunk.get(key), dict):
            return chunk[key]
    return None


def first_model(chunks: list[JSON]) -> str | None:
    for chunk in chunks:
        if isinstance(chunk, dict) and isinstance(chunk.get("model"), str):
            return cast(str, chunk["model"])
    return None
