"""What every integration shares: turning requests into recorded inputs, recording
streams item by item and replaying them as they ended, and patching methods reversibly.

Nothing here imports an SDK.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NoReturn

from sftrace._errors import BundleError, ReplayExhaustedError, ReplayMismatchError
from sftrace._internal import internal_error
from sftrace._model.jsonpath import parse_paths, strip
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import canonical, dumps, to_json
from sftrace._model.text import pluralize
from sftrace._record.boundary import BoundaryCall
from sftrace._record.cancellation import await_cancellation, waits_for_cancellation
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
    False when the consumer closed or dropped the stream before its end, or when reading
    it raised (the connection dropped, a timeout cancelled it): the call then records that
    exception too, with the chunks read before it (see :class:`StreamReplay`). Used as a
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

    def finish(self, complete: bool, error: BaseException | None = None) -> None:
        """Record what was streamed and end the call's span (no-op after the first time);
        ``error``: what reading the stream raised after those chunks, recorded as the
        call's failure."""
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
            if error is not None:
                self.call.fail(error)

    def stopped(self) -> None:
        """The consumer stopped reading where an item was handed to it: an exception was
        thrown in there (``close()``, or the loop shutting down an abandoned async
        generator with a ``CancelledError``). No failure of the stream: it is recorded as
        closed early."""
        self.finish(complete=False)

    def fail(self, exc: BaseException) -> None:
        """The stream could not be opened: record the failure (no output) and end the
        call's span."""
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
            self.finish(complete=False, error=exc)


def record_items(source: Iterable[Any], recorder: StreamRecorder) -> Iterator[Any]:
    """Yield ``source``'s items, recording each; finish the recording however it ends."""
    with recorder:
        for item in source:
            recorder.add(item)
            try:
                yield item
            except BaseException:
                recorder.stopped()
                raise


async def arecord_items(source: Any, recorder: StreamRecorder) -> AsyncIterator[Any]:
    """The async twin of :func:`record_items` (``source`` is an async iterable)."""
    with recorder:
        async for item in source:
            recorder.add(item)
            try:
                yield item
            except BaseException:
                recorder.stopped()
                raise


class StreamReplay:
    """The replay twin of :class:`StreamRecorder`: a recorded stream's items, handed back
    by :func:`replayed_items` / :func:`areplayed_items`, then the end the recording met.

    After the last recorded item the stream ends as recorded:

    - read to its end (``complete``, or a stream recorded before ``complete`` was): it ends;
    - reading it raised (``complete: false`` with the call's error): that error is raised
      again; one that came from outside (a timeout, ``task.cancel()``) is waited for
      first, as a call answered from the recording waits (``_record/cancellation.py``);
    - the recorded agent stopped reading there (``complete: false``, no error): the
      recording holds nothing more, so an agent reading further diverges there
      (``ReplayExhaustedError``, the replay's divergence).

    The call of a stream that raised stays open until the stream ends (it records the
    exception the agent gets then); :func:`substitute_stream` ended any other's.
    """

    __slots__ = ("call", "done", "error", "handed", "incomplete", "items", "lock", "number")

    def __init__(
        self, call: BoundaryCall, items: list[Any], output: JSON, error: BaseException | None
    ) -> None:
        self.call = call
        self.items = items
        self.error = error
        self.incomplete = isinstance(output, dict) and output.get("complete") is False
        self.number = call.reached_number()
        self.done = error is None  # only a stream that raised keeps its call open
        self.lock = threading.Lock()
        self.handed = 0  # how many items the consumer got

    def _claim(self) -> bool:
        with self.lock:
            if self.done:
                return False
            self.done = True
            return True

    def end(self) -> None:
        """After the last recorded item: return (the stream ends) or raise, as recorded."""
        if self.error is not None:
            raise self.error
        if self.incomplete:
            self._read_past_recording()

    async def aend(self) -> None:
        """:meth:`end` in async code, waiting for a cancellation from outside first."""
        decision = self.call.decision
        if self.error is not None and decision is not None and waits_for_cancellation(decision):
            await await_cancellation(decision, self.call.run.replay)
        self.end()

    def _read_past_recording(self) -> NoReturn:
        decision, reached = self.call.decision, self.call.reached
        assert decision is not None
        assert decision.recorded is not None
        assert reached is not None
        recorded = decision.recorded
        self.call.diverge(
            ReplayExhaustedError(
                f"replay diverged at call {self.number}: call {recorded.seq} "
                f"({recorded.label}) is a stream the recording stopped reading after "
                f"{pluralize(len(self.items), 'chunk')} (the recorded agent closed or dropped "
                f"it there), but the replayed agent reads more of it: the recording has "
                f"nothing to answer with; the agent changed, or record it again",
                call_number=self.number,
                reached=reached.describe(),
            )
        )

    def close(self) -> None:
        """The stream was closed or dropped, or the consumer stopped reading where an item
        was handed to it (see ``StreamRecorder.stopped``): end its call if still open."""
        if self._claim():
            self.call.close()

    def stopped_early(self) -> None:
        """The consumer stopped reading before the last item the recorded agent read: the
        agent changed how it reads the model's answer (it stops at a tool call now, say),
        which no later call need show: a divergence."""
        if self.error is not None or self.handed >= len(self.items):
            return
        decision, reached = self.call.decision, self.call.reached
        if decision is None or decision.recorded is None or reached is None:
            return
        recorded = decision.recorded
        self.call.diverge(
            ReplayMismatchError(
                f"replay diverged at call {self.number}: call {recorded.seq} "
                f"({recorded.label}) is a stream the recorded agent read "
                f"{pluralize(len(self.items), 'chunk')} of"
                f"{'' if self.incomplete else ' (to its end)'}, but the replayed agent "
                f"stopped reading it after {pluralize(self.handed, 'chunk')}: it now reads "
                f"less of the answer",
                call_number=self.number,
                recorded=recorded.describe(),
                reached=reached.describe(),
                differences=[],
            )
        )

    def __enter__(self) -> StreamReplay:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        # Read to its end, closed early (GeneratorExit), or raised (as recorded, or not).
        if exc is None or isinstance(exc, GeneratorExit):
            if exc is not None:
                self.stopped_early()
            self.close()
        elif self._claim():
            try:
                self.call.fail(exc)
            finally:
                self.call.close()


def replayed_items(replay: StreamReplay) -> Iterator[Any]:
    """Yield a replayed stream's items, then end as the recording did (see
    :class:`StreamReplay`)."""
    with replay:
        for item in replay.items:
            replay.handed += 1
            try:
                yield item
            except BaseException:
                replay.close()
                raise
        replay.end()


async def areplayed_items(replay: StreamReplay) -> AsyncIterator[Any]:
    """The async twin of :func:`replayed_items`."""
    with replay:
        for item in replay.items:
            replay.handed += 1
            try:
                yield item
            except BaseException:
                replay.close()
                raise
        await replay.aend()


def _same(value: Any) -> Any:
    return value


def substitute_stream(
    call: BoundaryCall, end: Ending, restore_item: Callable[[JSON], Any], *, what: str
) -> tuple[JSON, StreamReplay]:
    """During a replay, the recorded stream answering ``call`` (in ``with ending(call) as
    end``): the recorded output and the :class:`StreamReplay` of its chunks, each restored
    with ``restore_item``. ``what`` names the call in the error of a recorded answer that
    is no stream.

    A recorded failure raises here, at the call, as recorded (a stream that could not be
    opened; bundles recorded before the chunks read before a failure were kept), unless
    the recording holds the chunks read before it: the stream then yields them and raises
    the failure after them, and ``end`` hands the call to the stream.
    """
    error = stream_failure(call)
    output = call.substitute(_same) if error is None else call.finish_recorded()
    items = [restore_item(chunk) for chunk in recorded_chunks(output, what=what)]
    if error is not None:
        end.hand_off()
    return output, StreamReplay(call, items, output, error)


async def await_recorded_cancellation(call: BoundaryCall) -> None:
    """Before an async call answers from the recording: wait for a recorded cancellation
    from outside (``BoundaryCall.await_recorded_cancellation``), except where a stream
    raises it after its recorded chunks: the stream waits there (:class:`StreamReplay`)."""
    if stream_failure(call) is None:
        await call.await_recorded_cancellation()
    # answered in the order the recording shows the calls finished (sftrace's own
    # substitute does not wait inside an event loop: it would block it)
    await call.ahold_answer()


def stream_failure(call: BoundaryCall) -> BaseException | None:
    """During a replay: the recorded failure the stream answering ``call`` raises after its
    recorded chunks (it is not raised at the call, nor waited for there), or None."""
    decision = call.decision
    if decision is None or decision.action is not Action.RAISE or not decision.recorded_failure:
        return None
    recorded = decision.recorded
    if recorded is None or recorded.output_json is None or not is_recorded_stream(recorded.output):
        return None
    return decision.error


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
