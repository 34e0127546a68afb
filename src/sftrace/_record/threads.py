"""Carry a run's context into threads and executor work started inside the run.

A run lives in the OpenTelemetry context (under :data:`RUN_KEY`). asyncio tasks and
``asyncio.to_thread`` copy that context; a ``threading.Thread`` and work submitted to a
``ThreadPoolExecutor`` (which ``loop.run_in_executor`` uses) do not. Like
``opentelemetry-instrumentation-threading``, :func:`install` wraps ``Thread.start`` and
``ThreadPoolExecutor.submit`` so the work runs in the OpenTelemetry context of the code
that started it, and finds its run there.

What changes for the host is as small as it can be:

- the context is carried only when it holds a run; outside runs the original methods
  run as they are, after one context read;
- a pool's worker threads never keep the context of the submission that started them
  (each submitted function gets the context of its own submitter);
- results, exceptions and the ``Future`` pass through untouched.

:func:`install` is idempotent and :func:`uninstall` restores the original methods
(unless someone wrapped them after us: then our wrappers stay, disabled).
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from sftrace._internal import logger

# The key under which the run being recorded or replayed sits in the OpenTelemetry context.
RUN_KEY = otel_context.create_key("sftrace.run")
# In work handed to another thread: the id of the span current where it was handed off
# (a call made directly under that span in the work is a handed-off call, see
# ``handed_off``; the calls made inside that call are not).
HANDOFF_KEY = otel_context.create_key("sftrace.handoff")

# In work handed to another thread: its Delivery (see ``current_delivery``).
DELIVERY_KEY = otel_context.create_key("sftrace.delivery")

_lock = threading.Lock()
_enabled = False
_originals: dict[str, Callable[..., Any]] = {}
_local = threading.local()  # .submitting: inside ThreadPoolExecutor.submit
_warned = False


def _context_with_run() -> Context | None:
    """The current OpenTelemetry context when it holds a run, else None; marked as
    handed off to another thread (``HANDOFF_KEY``)."""
    context = otel_context.get_current()
    if context.get(RUN_KEY) is None:
        return None
    span_id = trace.get_current_span(context).get_span_context().span_id
    return otel_context.set_value(HANDOFF_KEY, span_id, context)


def handed_off(context: Context) -> bool:
    """Whether a call starting now in ``context`` (the current one), under its span, is
    made directly in work handed to another thread (its order among such calls is the
    scheduler's)."""
    handoff = context.get(HANDOFF_KEY)
    return handoff is not None and (
        handoff == trace.get_current_span(context).get_span_context().span_id
    )


class Delivery:
    """Set once work handed to another thread has handed its result back: its future is
    done (set after the future's waiters, ``as_completed`` say, were told) or the
    thread's ``run`` returned. A replay holding an answer for a call that finished
    earlier in the recording waits for it (``_replay/completion.py``): the call's end
    alone comes before its result reaches the agent, by as long as the scheduler likes."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def deliver(self, _future: object = None) -> None:
        self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


def current_delivery() -> Delivery | None:
    """The Delivery of the handed-off work a call ending now was made directly in (its
    result is the work's to hand back); None elsewhere."""
    context = otel_context.get_current()
    if not handed_off(context):
        return None
    delivery = context.get(DELIVERY_KEY)
    return delivery if isinstance(delivery, Delivery) else None


def _bind(context: Context, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` called in ``context`` (attached for the call, detached after)."""

    @functools.wraps(func)
    def in_context(*args: Any, **kwargs: Any) -> Any:
        token = otel_context.attach(context)
        try:
            return func(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return in_context


def _is_context_run(func: Any) -> bool:
    """Whether ``func`` is a ``contextvars.Context``'s bound ``run``."""
    owner = getattr(func, "__self__", None)
    return isinstance(owner, contextvars.Context) and getattr(func, "__name__", "") == "run"


def _in_copied_context(
    fn: Callable[..., Any], args: tuple[Any, ...], span_id: int, delivery: Delivery
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``fn(*args)``, marked as handed off where it runs in a context of its own.

    ``asyncio.to_thread`` and context-copying pools (LangChain's, on which LangGraph
    runs parallel branches, itself submitting ``ctx.run``) submit ``copy_context().run``
    with the work, as a ``partial`` or as the callable, one inside the other: each copy,
    taken before the hand-off, replaces the context ``_bind`` attaches, and with it the
    hand-off mark, so strict replays of the unchanged agent diverged as its threads
    raced. The mark is set again inside the innermost of them. Anything else is
    returned as it is.
    """
    if _is_context_run(fn) and args:  # ctx.run(work, *rest)
        work, rest = _innermost(args[0], args[1:], span_id, delivery)
        return fn, (work, *rest)
    if isinstance(fn, functools.partial) and _is_context_run(fn.func) and fn.args:
        work, rest = _innermost(fn.args[0], fn.args[1:], span_id, delivery)
        return functools.partial(fn.func, work, *rest, **fn.keywords), args
    return fn, args


def _innermost(
    work: Callable[..., Any], rest: tuple[Any, ...], span_id: int, delivery: Delivery
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The work of a ``ctx.run`` layer, marked in the innermost context it runs in."""
    if _is_context_run(work) or (
        isinstance(work, functools.partial) and _is_context_run(work.func)
    ):
        return _in_copied_context(work, rest, span_id, delivery)

    @functools.wraps(work)
    def marked(*args: Any, **kwargs: Any) -> Any:
        marks = otel_context.set_value(HANDOFF_KEY, span_id)
        token = otel_context.attach(otel_context.set_value(DELIVERY_KEY, delivery, marks))
        try:
            return work(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return marked, rest


def _submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    original = _originals["submit"]
    if not _enabled:
        return original(self, fn, *args, **kwargs)
    context = _context_with_run()
    if context is None:
        return original(self, fn, *args, **kwargs)
    delivery = Delivery()
    context = otel_context.set_value(DELIVERY_KEY, delivery, context)
    handoff = context.get(HANDOFF_KEY)
    if isinstance(handoff, int):
        fn, args = _in_copied_context(fn, args, handoff, delivery)
    # The pool may start a worker thread now: it must not keep this context.
    _local.submitting = True
    try:
        future: Future[Any] = original(self, _bind(context, fn), *args, **kwargs)
    finally:
        _local.submitting = False
    future.add_done_callback(delivery.deliver)
    return future


def _start(self: threading.Thread) -> None:
    original = _originals["start"]
    if not _enabled or getattr(_local, "submitting", False):
        original(self)
        return
    context = _context_with_run()
    if context is None:
        original(self)
        return
    carried = _carry(self, otel_context.set_value(DELIVERY_KEY, Delivery(), context))
    try:
        original(self)
    except BaseException:  # not started (started twice, no more threads): undo
        if carried is not None and vars(self).get("run") is carried:
            del vars(self)["run"]
        raise


def _carry(thread: threading.Thread, context: Context) -> Callable[[], None] | None:
    """Make ``thread.run`` (the subclass's own too) run in ``context``, once."""
    run = thread.run

    def run_in_context() -> None:
        vars(thread).pop("run", None)  # back to the class's run() once started
        token = otel_context.attach(context)
        try:
            run()
        finally:
            otel_context.detach(token)
            delivery = context.get(DELIVERY_KEY)
            if isinstance(delivery, Delivery):
                delivery.deliver()

    try:
        thread.run = run_in_context  # type: ignore[method-assign]
    except (AttributeError, TypeError):  # a class that forbids it: run without context
        return None
    return run_in_context


def install() -> None:
    """Carry runs into threads and executor work (idempotent)."""
    global _enabled
    with _lock:
        if _enabled:
            return
        if "submit" not in _originals:
            _originals["submit"] = ThreadPoolExecutor.submit
            _originals["start"] = threading.Thread.start
            ThreadPoolExecutor.submit = _submit  # type: ignore[assignment]
            threading.Thread.start = _start  # type: ignore[method-assign]
        _enabled = True


def uninstall() -> None:
    """Stop carrying runs; restore the original methods where ours are still in place."""
    global _enabled
    with _lock:
        _enabled = False
        if ThreadPoolExecutor.submit is _submit and threading.Thread.start is _start:
            ThreadPoolExecutor.submit = _originals.pop("submit")  # type: ignore[method-assign]
            threading.Thread.start = _originals.pop("start")  # type: ignore[method-assign]


def installed() -> bool:
    return _enabled


def warn_unattributed(recordings: int, replays: int) -> None:
    """Say once per process that a call without a run's context was recorded nowhere."""
    global _warned
    if _warned:
        return
    _warned = True
    logger.warning(
        "sftrace: a call was made in a thread or task that carries no run's context while "
        "%d recordings and %d replays are active; it ran for real and was recorded nowhere. "
        "Start the thread or submit the work from inside the run (sftrace carries the "
        "run into threading.Thread and ThreadPoolExecutor work started there), or run it "
        "in a context copied inside the run (contextvars.copy_context().run)",
        recordings,
        replays,
    )


def reset_warning() -> None:
    """Let the next unattributed call warn again (for tests)."""
    global _warned
    _warned = False
