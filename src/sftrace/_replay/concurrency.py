"""Which recorded calls a strict replay may take out of their recorded order.

A strict replay answers the calls in the order they were recorded. Calls an agent makes
concurrently (a thread pool, asyncio tasks) reach a replay in whatever order the
scheduler gives them, so that order is not the agent's. The recording tells which calls
were concurrent: from the spans' parents and their start and end times.

The rule: recorded call ``i`` must be reached before recorded call ``j`` (``before``)
when ``i`` encloses ``j`` (``j`` is made inside ``i``), or when, below the innermost span
enclosing both, the branch holding ``i`` ended before the branch holding ``j`` started.
A branch's time is that of the calls in it (its first start to its last end), so two
tasks of a thread pool, each calling ``price`` and then ``stock`` inside it, are
concurrent branches as soon as the tasks overlapped, whatever the timing of the calls
inside them. Two calls made directly in work handed to other threads (a thread pool's
submitted functions, ``Thread`` targets: recorded with ``sftrace.handed_off``) under the
same span have no order either, even when the recording shows one ending before the
other started: that order was the scheduler's. Everything else keeps the recorded order.
A recording whose calls never overlapped and were not handed to threads (a sequential
agent) has no such freedom: :func:`concurrency_of` gives None and the replay matches
exactly as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from sftrace._model import attributes as A
from sftrace._model.calls import Call


class Concurrency:
    """The order a recording imposes on its calls (see the module doc), and where the
    calls a replay of it reaches sit. Its caller holds the replay's lock."""

    def __init__(
        self,
        calls: list[Call],
        span_parents: dict[str, str | None],
        outer: list[int | None],
        handed_off: frozenset[str] = frozenset(),
    ) -> None:
        self.calls = calls
        self._handed_off = handed_off  # span ids of calls made in work handed to a thread
        self.outer = outer  # the index of the call each call is made inside (None: none)
        self._parents = span_parents
        self._chains: dict[int, tuple[str, ...]] = {}
        self._times: dict[str, tuple[int, int]] | None = None
        self._ends: _EarliestEnd | None = None  # built on first use
        # The replay's spans: span id -> its parent's, and -> the recorded call its call
        # took; ``taken.index``: the recorded call this thread's last decision took.
        self._replay_parents: dict[int, int | None] = {}
        self._replay_calls: dict[int, int] = {}
        self.taken = threading.local()

    def note_span(self, span_id: int, parent_span_id: int | None, *, decided: bool) -> None:
        """Note a span of the replay as it starts; ``decided``: the span of the call this
        thread was just decided, so the calls made inside it are matched among the calls
        the recording made inside the recorded call it took."""
        self._replay_parents[span_id] = parent_span_id
        index = getattr(self.taken, "index", None) if decided else None
        if index is not None:
            self._replay_calls[span_id] = index
            self.taken.index = None

    def enclosing(self, span_id: int | None) -> int | None:
        """The recorded call taken by the innermost call of the replay that the span
        ``span_id`` is or is inside (None: none)."""
        hops = 0
        while span_id is not None and hops < 10_000:
            index = self._replay_calls.get(span_id)
            if index is not None:
                return index
            span_id = self._replay_parents.get(span_id)
            hops += 1
        return None

    def take(
        self, start: int, used: list[bool], enclosing: int | None, candidates: Iterable[int]
    ) -> int | None:
        """The first of ``candidates`` (indexes in recorded order: the calls whose identity
        and input match) from ``start`` on that is unused, made inside the recorded call
        ``enclosing``, and that no unused call before it was made before (None: none)."""
        for index in candidates:
            if (
                index >= start
                and not used[index]
                and self.outer[index] == enclosing
                and self.may_take(index, start, used)
            ):
                return index
        return None

    def could_be(
        self, start: int, used: list[bool], enclosing: int | None, same: Callable[[Call], bool]
    ) -> list[int]:
        """The unused calls from ``start`` on, made inside ``enclosing``, for which ``same``
        (the identity of a reached call) holds and that may be taken: what a reached call
        that matched none could have been (for its report)."""
        return [
            index
            for index in range(start, len(self.calls))
            if not used[index]
            and self.outer[index] == enclosing
            and same(self.calls[index])
            and self.may_take(index, start, used)
        ]

    def use(self, index: int) -> None:
        """Note that the recorded call ``index`` was used (it no longer holds others back)."""
        if self._ends is not None:
            self._ends.clear(index)

    def may_take(self, j: int, start: int, used: list[bool]) -> bool:
        """Whether call ``j`` may be taken while the unused calls from ``start`` to ``j``
        are not: none of them was made before ``j`` could start. Only a call that ended
        before ``j`` started can have been (the enclosing calls of ``j`` are used), so the
        earliest end among them usually answers at once."""
        begins = self.calls[j].start_time_ns
        if self._ends is None:
            self._ends = _EarliestEnd([call.end_time_ns for call in self.calls], used)
        if self._ends.earliest(start, j) > begins:
            return True
        return not any(
            self.before(i, j)
            for i in range(start, j)
            if not used[i] and self.calls[i].end_time_ns <= begins
        )

    def _chain(self, index: int) -> tuple[str, ...]:
        """The span ids from the root span down to call ``index``'s own."""
        chain = self._chains.get(index)
        if chain is None:
            ids = [self.calls[index].span_id]
            parent = self.calls[index].parent_span_id
            while parent is not None and len(ids) < 10_000 and parent not in ids:
                ids.append(parent)
                parent = self._parents.get(parent)
            chain = self._chains[index] = tuple(reversed(ids))
        return chain

    def _branch_times(self) -> dict[str, tuple[int, int]]:
        """For each span holding calls: the first start and last end of those calls."""
        if self._times is None:
            times: dict[str, tuple[int, int]] = {}
            for index, call in enumerate(self.calls):
                start, end = call.start_time_ns, call.end_time_ns
                for span_id in self._chain(index):
                    known = times.get(span_id, (start, end))
                    times[span_id] = (min(known[0], start), max(known[1], end))
            self._times = times
        return self._times

    def before(self, i: int, j: int) -> bool:
        """Whether the recording shows call ``i`` made before call ``j`` could start."""
        first, second = self._chain(i), self._chain(j)
        depth = 0
        while depth < len(first) and depth < len(second) and first[depth] == second[depth]:
            depth += 1
        if depth == len(first):  # i encloses j
            return True
        if depth == len(second):  # j encloses i: j comes first
            return False
        if first[depth] in self._handed_off and second[depth] in self._handed_off:
            return False  # two calls handed to threads: the scheduler's order, not the agent's
        times = self._branch_times()
        return times[first[depth]][1] <= times[second[depth]][0]


class _EarliestEnd:
    """The earliest end time among the unused calls of a range of indexes, in O(log n):
    a segment tree of the calls' end times, a used call's left out."""

    def __init__(self, ends: list[int], used: list[bool]) -> None:
        size = 1
        while size < len(ends):
            size *= 2
        self._size = size
        tree = [_NEVER] * (2 * size)
        for index, end in enumerate(ends):
            tree[size + index] = _NEVER if used[index] else end
        for node in range(size - 1, 0, -1):
            tree[node] = min(tree[2 * node], tree[2 * node + 1])
        self._tree = tree

    def clear(self, index: int) -> None:
        node = self._size + index
        tree = self._tree
        tree[node] = _NEVER
        node //= 2
        while node:
            tree[node] = min(tree[2 * node], tree[2 * node + 1])
            node //= 2

    def earliest(self, low: int, high: int) -> int:
        """The earliest end among indexes ``low`` to ``high - 1``."""
        tree = self._tree
        found = _NEVER
        low += self._size
        high += self._size
        while low < high:
            if low & 1:
                found = min(found, tree[low])
                low += 1
            if high & 1:
                high -= 1
                found = min(found, tree[high])
            low //= 2
            high //= 2
        return found


_NEVER = 1 << 126  # later than any end time


def outer_calls(count: int, inner: dict[int, list[int]]) -> list[int | None]:
    """For each call index, the index of the call it is made inside (None: none)."""
    outer: list[int | None] = [None] * count
    for parent, children in inner.items():
        for child in children:
            outer[child] = parent
    return outer


def concurrency_of(
    calls: list[Call], span_parents: dict[str, str | None], inner: dict[int, list[int]]
) -> Concurrency | None:
    """The recording's concurrency, or None when no two of its calls overlapped in time
    other than a call and the calls inside it, and none was handed to a thread (a
    sequential recording)."""
    outer = outer_calls(len(calls), inner)
    open_calls: list[int] = []  # calls still running when the next one started
    overlapped = False
    for index, call in enumerate(calls):
        start = call.start_time_ns
        while open_calls and calls[open_calls[-1]].end_time_ns <= start:
            open_calls.pop()
        if open_calls and open_calls[-1] != outer[index]:
            overlapped = True
            break
        open_calls.append(index)
    handed_off = frozenset(
        call.span_id
        for call in calls
        if call.may_have(A.HANDED_OFF) and call.attributes.get(A.HANDED_OFF) is True
    )
    if not overlapped and not handed_off:
        return None
    return Concurrency(calls, span_parents, outer, handed_off)


__all__ = ["Concurrency", "concurrency_of", "outer_calls"]
