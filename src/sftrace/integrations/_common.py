"""What every integration shares: turning requests into recorded inputs, recording
streams item by item, and patching methods reversibly.

Nothing here imports an SDK.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from sftrace._errors import BundleError
from sftrace._internal import internal_error
from sftrace._model.jsonpath import parse_paths, strip
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import canonical, dumps, to_json
from sftrace._record.boundary import BoundaryCall
from sftrace._record.intercept import Action
from sftrace._record.run import ActiveRun, current_run

JSON = Any

# Keyword arguments of SDK methods that configure the HTTP transport rather than the
# request body: never recorded, never compared (they carry secrets, request ids, trace
# headers and deadlines that change from run to run).
TRANSPORT_OPTIONS = frozenset({"extra_headers", "extra_query", "timeout"})

# Set while an instrumented method runs the real SDK call, so that a second layer of
# instrumentation on the same call (a client instrumented by ``instrument(client)`` whose
# class is patched by ``instrument_all()`` too) passes straight through.
inside_call: ContextVar[bool] = ContextVar("sftrace_inside_sdk_call", default=False)


@contextlib.contextmanager
def inside_sdk_call() -> Iterator[None]:
    """Mark the real SDK call made in this block (see ``inside_call``)."""
    token = inside_call.set(True)
    try:
        yield
    finally:
        inside_call.reset(token)


def recording_run() -> ActiveRun | None:
    """The run an instrumented call is recorded in (or answered from, in a replay); None
    when the call just runs: made by another instrumented call (see ``inside_call``), or
    outside ``record()``/``replay()``."""
    if inside_call.get():
        return None
    return current_run()


class Ending:
    """What :func:`ending` returns: ends a call when its block ends."""

    __slots__ = ("call", "handed_off")

    def __init__(self, call: BoundaryCall) -> None:
        self.call = call
        self.handed_off = False

    def hand_off(self) -> None:
        """A stream now ends the call (as the caller finishes reading it), not this block."""
        self.call.detach()
        self.handed_off = True

    def __enter__(self) -> Ending:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        try:
            if exc is not None:
                self.call.fail(exc)
        finally:
            if not self.handed_off:
                self.call.close()


def ending(call: BoundaryCall) -> Ending:
    """``with ending(call):`` records the exception that leaves the block (it propagates
    unchanged) and ends the call's span, unless the block handed the call off."""
    return Ending(call)


class Options:
    """Per-instrumentation settings: the replay policy and request fields to ignore."""

    __slots__ = ("ignore", "policy")

    def __init__(self, *, replay_policy: ReplayPolicy | str, ignore_fields: Iterable[str]) -> None:
        self.policy = ReplayPolicy.parse(replay_policy, parameter="replay_policy")
        self.ignore = parse_paths(ignore_fields, what="ignore_fields entry")


def is_not_given(value: Any) -> bool:
    """True for the SDKs' "argument not given" sentinels (``NOT_GIVEN``, ``omit``)."""
    return type(value).__name__ in ("NotGiven", "Omit")


def type_serializer(value: Any) -> Any:
    """Record a Python type passed as a request parameter by its name and JSON schema."""
    if isinstance(value, type):
        described: dict[str, Any] = {"python_type": f"{value.__module__}.{value.__qualname__}"}
        try:
            from pydantic import TypeAdapter

            described["json_schema"] = TypeAdapter(value).json_schema()
        except Exception:  # not a type pydantic understands: its name is all we have
            pass
        return described
    raise TypeError(f"{type(value).__qualname__} is not JSON serializable")


def materialize(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turn one-shot iterators among the arguments (``messages=(m for m in ...)``) into
    lists, so that recording them does not consume what the SDK then sends."""
    for key, value in kwargs.items():
        if isinstance(value, Iterator):
            kwargs = {**kwargs, key: list(value)}
    return kwargs


def request_json(kwargs: Mapping[str, Any], options: Options, *, what: str) -> str:
    """The canonical JSON of a request as recorded and compared during replay.

    Transport options, arguments left at the SDK's "not given" sentinel, ``stream=False``
    and ``extra_body=None`` (the defaults) and the configured ``ignore_fields`` are left
    out.
    """
    request = {
        key: value
        for key, value in kwargs.items()
        if key not in TRANSPORT_OPTIONS
        and not is_not_given(value)
        and not (key == "stream" and value is False)
        and not (key == "extra_body" and value is None)
    }
    return input_json(request, options, what=what)


def input_json(value: Any, options: Options, *, what: str) -> str:
    """The canonical JSON of a call's input, minus the configured ``ignore_fields``."""
    if not options.ignore:
        return dumps(value, serializer=type_serializer, what=what)
    converted = to_json(value, serializer=type_serializer, what=what)
    return canonical(strip(converted, options.ignore))


def summary(model: Any, usage: Any) -> dict[str, Any]:
    """The ``model`` (a str) and ``usage`` (a dict) found in a response, as recorded."""
    found: dict[str, Any] = {}
    if isinstance(model, str):
        found["model"] = model
    if isinstance(usage, dict):
        found["usage"] = usage
    return found


def wire_json(value: Any) -> JSON:
    """A pydantic model as the JSON the provider sent (API field names, unset fields out)."""
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json", by_alias=True, exclude_unset=True)
    return to_json(value)


# --- streams ---------------------------------------------------------------------------

Summarize = Callable[[list[JSON]], dict[str, Any]]


class StreamRecorder:
    """Collects the items of one streamed response and finishes its call exactly once.

    The recorded output is ``{"chunks": [...], "complete": bool, ...summary}`` where the
    summary (``model``, ``usage``...) comes from ``summarize(chunks)``; ``complete`` is
    False when the consumer closed or dropped the stream before its end. Used as a
    context manager around the iteration, it finishes the call however the block ends.
    """

    __slots__ = ("call", "chunks", "convert", "done", "extra", "lock", "summarize")

    def __init__(
        self,
        call: BoundaryCall,
        summarize: Summarize,
        *,
        convert: Callable[[Any], JSON] = wire_json,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.call = call
        self.summarize = summarize
        self.convert = convert
        self.extra = dict(extra or {})
        self.chunks: list[JSON] = []
        self.done = False
        self.lock = threading.Lock()

    def add(self, item: Any) -> None:
        try:
            self.chunks.append(self.convert(item))
        except Exception as exc:
            internal_error("recording a streamed chunk", exc)

    def _claim(self) -> bool:
        with self.lock:
            if self.done:
                return False
            self.done = True
            return True

    def finish(self, complete: bool) -> None:
        """Record what was streamed and end the call's span (no-op after the first time)."""
        if not self._claim():
            return
        with ending(self.call):
            try:
                found = self.summarize(self.chunks)
            except Exception as exc:
                internal_error("summarizing a streamed response", exc)
                found = {}
            chunks = self.call.redact_stream(self.chunks)
            self.call.finish({"chunks": chunks, "complete": complete, **found, **self.extra})

    def fail(self, exc: BaseException) -> None:
        """The stream raised: record the failure and end the call's span."""
        if not self._claim():
            return
        try:
            self.call.fail(exc)
        finally:
            self.call.close()

    def __enter__(self) -> StreamRecorder:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        # Read to its end, closed early by the consumer (GeneratorExit), or failed.
        if exc is None or isinstance(exc, GeneratorExit):
            self.finish(complete=exc is None)
        else:
            self.fail(exc)


def record_items(source: Iterable[Any], recorder: StreamRecorder) -> Iterator[Any]:
    """Yield ``source``'s items, recording each; finish the recording however it ends."""
    with recorder:
        for item in source:
            recorder.add(item)
            yield item


async def arecord_items(source: Any, recorder: StreamRecorder) -> AsyncIterator[Any]:
    """The async twin of :func:`record_items` (``source`` is an async iterable)."""
    with recorder:
        async for item in source:
            recorder.add(item)
            yield item


def is_recorded_stream(output: Any) -> bool:
    """Whether a recorded response is a stream's (``StreamRecorder``'s ``chunks``)."""
    return isinstance(output, dict) and isinstance(output.get("chunks"), list)


def refuse_other_shape(
    call: BoundaryCall, *, streamed: bool, response_key: str, streamed_by: str, plain_by: str
) -> None:
    """During a replay, before a call is answered from the recording: diverge when the
    recorded call was streamed and this one is not, or the reverse (whether a call
    streams may be no part of its compared request; bundles recorded before it was
    checked here still match). ``response_key``: the key a recorded response that is
    no stream has; ``streamed_by``/``plain_by``: what makes a call that streams / that
    does not (``Runner.run_streamed``), for the message.

    A recorded response of neither shape is left to the restoring code (a BundleError:
    was the bundle edited?), as is one answered by a manual handler or never recorded.
    """
    decision = call.decision
    if decision is None or decision.action is not Action.RETURN:
        return
    recorded = decision.recorded
    if recorded is None or recorded.output_json is None:
        return
    output = recorded.output
    if streamed == is_recorded_stream(output):
        return
    if streamed and not (isinstance(output, dict) and response_key in output):
        return
    if streamed:
        reason = (
            f"was not streamed in the recording ({plain_by}) but is in the replay ({streamed_by})"
        )
    else:
        reason = f"was streamed in the recording ({streamed_by}) but not in the replay ({plain_by})"
    call.refuse_recorded(
        f"{reason}: its recorded response cannot answer it; run the agent the way it was "
        f"recorded, or record it again"
    )


def recorded_chunks(output: JSON, *, what: str) -> list[JSON]:
    """The chunks of a recorded stream, or a clear error if the recording is no stream."""
    chunks = output.get("chunks") if isinstance(output, dict) else None
    if not isinstance(chunks, list):
        raise BundleError(
            f"{what} asks for a stream, but the recorded response is not one (it has no "
            f"'chunks' list): was the bundle edited? Re-record the run"
        )
    return chunks


# --- patching ----------------------------------------------------------------------------

WRAPPED = "__sftrace_wrapped__"


class ClassPatches:
    """Reversible patches of methods on SDK classes (``instrument_all`` / ``uninstrument_all``)."""

    def __init__(self) -> None:
        self._originals: dict[tuple[type, str], Any] = {}
        self._lock = threading.Lock()

    def patch(self, cls: type, name: str, make: Callable[[Any], Any]) -> None:
        with self._lock:
            if (cls, name) in self._originals:
                return
            original = cls.__dict__[name]
            wrapper = make(original)
            setattr(wrapper, WRAPPED, original)
            self._originals[(cls, name)] = original
            setattr(cls, name, wrapper)

    def restore(self) -> None:
        with self._lock:
            for (cls, name), original in self._originals.items():
                setattr(cls, name, original)
            self._originals.clear()

    @property
    def active(self) -> bool:
        return bool(self._originals)


def is_wrapped(function: Any) -> bool:
    return getattr(function, WRAPPED, None) is not None
