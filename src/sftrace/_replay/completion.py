"""Concurrent calls answered in the order the recording shows they finished.

A replay answers a call from the recording at once, so calls an agent made concurrently
finish in the order they are reached, not in the order they finished when recorded. An
agent that collects results as they finish (``asyncio.as_completed``,
``concurrent.futures.as_completed``, ``asyncio.wait(..., FIRST_COMPLETED)``) then sees
another order, and the unchanged agent diverges.

So, for a recording whose calls overlapped in time: before a replay answers recorded call
``i``, it waits until every recorded call that ran at the same time as ``i`` (their spans
overlapped, neither inside the other) and ended before it has been answered or has
ended. Waits go from later to earlier ends only, so they never wait on each other in a
circle. A call that is never reached (a changed agent, a call covered by an answered
call) is waited for at most :func:`wait_bound` seconds; then the answer goes out anyway.

A call made directly in work handed to a pool or a thread has ended before the agent has
its result: the work still returns it and the pool sets its future, which is when
``as_completed`` sees it. On a busy machine that thread may wait for a CPU for longer
than any fixed grace, and the call answered next was seen first. So a held answer also
waits for that work to hand its result back (:class:`~sftrace._record.threads.Delivery`),
for at most as long as the recording shows between the two calls' ends: work that went
on after its call (and handed its result back later than that in the recording) is not
waited for.
Calls in a burst of more than :data:`MAX_BURST` concurrent ones are not held: the pairs
would grow with its square.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Final

from sftrace._model.calls import Call
from sftrace._record.threads import Delivery

# The most calls running at the same time whose end order is kept.
MAX_BURST: Final = 64
# How often an async call waiting for earlier ones looks again (seconds).
_POLL: Final = 0.0005
# After the calls a thread waited for have ended: time for their threads to hand their
# results on (a future's result is set after the call returns) before this answer goes.
_GRACE: Final = 0.005


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def wait_bound(call: Call) -> float:
    """The longest a replay holds ``call``'s answer for calls that ended before it: as
    long as the recorded call took, plus a second, at most 10 s."""
    return min(10.0, call.duration_ms / 1000 + 1.0)


class CompletionOrder:
    """Which recorded calls each one waits for, and which have ended in the replay."""

    def __init__(self, calls: list[Call], waits: dict[int, tuple[int, ...]]) -> None:
        self.waits = waits  # recorded index -> the indexes it waits for
        self._index_of = {call.seq: index for index, call in enumerate(calls)}
        self._ends = [call.end_time_ns for call in calls]
        self._ended: set[int] = set()
        # recorded index -> the work that hands its result back (calls made in it
        # directly), and when the call ended in the replay (time.monotonic())
        self._deliveries: dict[int, tuple[Delivery, float]] = {}
        self._condition = threading.Condition()

    def index(self, call: Call) -> int | None:
        return self._index_of.get(call.seq)

    def end(self, call: Call, delivery: Delivery | None = None) -> None:
        """``call`` (a recorded one) has been answered, or its replayed call ended;
        ``delivery``: the handed-off work it was made in directly, if any."""
        index = self._index_of.get(call.seq)
        if index is None:
            return
        with self._condition:
            self._ended.add(index)
            if delivery is not None:
                self._deliveries[index] = (delivery, time.monotonic())
            self._condition.notify_all()

    def _pending(self, index: int) -> bool:
        return any(waited not in self._ended for waited in self.waits.get(index, ()))

    def wait(self, call: Call) -> None:
        """Block until the calls ``call`` waits for have ended (at most its bound); not in
        a thread running an event loop, which a wait would block (its tasks could never
        end the calls waited for): async code waits with :meth:`await_`."""
        index = self._index_of.get(call.seq)
        if index is None or index not in self.waits or _loop_running():
            return
        deadline = time.monotonic() + wait_bound(call)
        with self._condition:
            held = self._pending(index)
            while self._pending(index):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._condition.wait(left)
            deliveries = [
                (self._deliveries[waited], (self._ends[index] - self._ends[waited]) / 1e9)
                for waited in self.waits[index]
                if waited in self._deliveries
            ]
        # Each until as long after its call ended as the recording shows this one ended
        # after it (it may have ended before this call was even reached).
        for (delivery, ended), gap in deliveries:
            left = min(ended + gap, deadline) - time.monotonic()
            if left > 0:
                delivery.wait(left)
        if held:
            time.sleep(_GRACE)

    async def await_(self, call: Call) -> None:
        """:meth:`wait` without blocking the event loop."""
        index = self._index_of.get(call.seq)
        if index is None or index not in self.waits:
            return
        deadline = time.monotonic() + wait_bound(call)
        while self._pending(index) and time.monotonic() < deadline:
            await asyncio.sleep(_POLL)


def completion_order(calls: list[Call], inner: dict[int, list[int]]) -> CompletionOrder | None:
    """The waits of a recording (see the module doc); None when no two of its calls ran
    at the same time other than one inside the other. Linear in the calls of a
    recording whose calls never overlapped."""
    starts = [call.start_time_ns for call in calls]
    ends = [call.end_time_ns for call in calls]
    parent = {nested: outer for outer, found in inner.items() for nested in found}
    waits: dict[int, list[int]] = {}
    running: list[int] = []
    for index in sorted(range(len(calls)), key=lambda i: (starts[i], calls[i].seq)):
        start = starts[index]
        running = [other for other in running if ends[other] > start]
        if running:
            above = _ancestors(index, parent)
            concurrent = [other for other in running if other not in above]
            if len(concurrent) < MAX_BURST:
                for other in concurrent:
                    if ends[other] < ends[index]:
                        waits.setdefault(index, []).append(other)
                    elif ends[index] < ends[other]:
                        waits.setdefault(other, []).append(index)
        running.append(index)
    if not waits:
        return None
    return CompletionOrder(calls, {index: tuple(found) for index, found in waits.items()})


def _ancestors(index: int, parent: dict[int, int]) -> set[int]:
    """The calls ``index`` was made inside, all the way up."""
    found: set[int] = set()
    current = parent.get(index)
    while current is not None and current not in found:
        found.add(current)
        current = parent.get(current)
    return found


__all__ = ["MAX_BURST", "CompletionOrder", "completion_order", "wait_bound"]
