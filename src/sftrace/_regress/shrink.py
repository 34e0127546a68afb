"""Shrinking JSON values: smaller candidates, proposed one at a time, in a fixed order.

The minimizer (``_regress/minimize.py``) holds the recorded outputs of a run's calls as a
list of JSON values. A :class:`Shrinker` proposes smaller versions of that list, one
change at a time, and keeps each change the caller accepts (the failure still
reproduces with it), in the spirit of delta debugging and Hypothesis's shrinker:

1. **Structure**, for each value in order, top down: remove the items of a list or the
   members of an object in chunks, first all of them, then halves, quarters... down to
   single items; then shrink what is left inside each of them.
2. **Strings**: shorten each string, keeping the shortest prefix, then the shortest
   suffix, found by bisection (about twice log2 of its length proposals).

Rounds repeat until one changes nothing. Numbers, booleans and ``null`` stay as they
are. Values the caller reports unused (the call is no longer reached) are skipped.
The order depends only on the values, so the same run shrinks the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

Step = str | int
Proposals = Generator[list[Any], bool, bool]

__all__ = ["Shrinker"]


class Shrinker:
    """Proposes smaller versions of ``values``; see the module doc.

    Drive :meth:`proposals` with ``send(accepted)``. Before sending ``True``, set
    :attr:`used` to the indexes of the values the accepted candidate still used.
    """

    def __init__(self, values: Sequence[Any], used: Iterable[int]) -> None:
        self.values = list(values)
        self.used = set(used)

    def proposals(self) -> Generator[list[Any], bool, None]:
        """Yield candidates (whole lists of values); receive whether each was accepted."""
        phases: tuple[Callable[[int, tuple[Step, ...]], Proposals], ...] = (
            self._structure,
            self._strings,
        )
        while True:
            progress = False
            for phase in phases:
                for index in range(len(self.values)):
                    if index in self.used:
                        progress |= yield from phase(index, ())
            if not progress:
                return

    # -- one change ------------------------------------------------------------------------
    def _try(self, index: int, path: tuple[Step, ...], new: Any) -> Proposals:
        candidate = list(self.values)
        candidate[index] = _replaced(self.values[index], path, new)
        accepted = yield candidate
        if accepted:
            self.values = candidate
        return bool(accepted)

    def _at(self, index: int, path: tuple[Step, ...]) -> Any:
        value = self.values[index]
        for step in path:
            value = value[step]
        return value

    # -- the phases --------------------------------------------------------------------
    def _structure(self, index: int, path: tuple[Step, ...]) -> Proposals:
        value = self._at(index, path)
        if not isinstance(value, list | dict) or not value:
            return False
        progress = yield from self._remove_chunks(index, path)
        value = self._at(index, path)
        for step in list(range(len(value)) if isinstance(value, list) else value):
            if index not in self.used:
                break
            progress |= yield from self._structure(index, (*path, step))
        return progress

    def _remove_chunks(self, index: int, path: tuple[Step, ...]) -> Proposals:
        """Remove items (or members) in chunks: all, then halves, ... then one at a time."""
        progress = False
        size = len(self._at(index, path))
        while size >= 1 and index in self.used:
            start = 0
            while start < len(self._at(index, path)) and index in self.used:
                current = self._at(index, path)
                if (yield from self._try(index, path, _without(current, start, size))):
                    progress = True  # the items after the chunk moved up: try them there
                else:
                    start += size
            remaining = len(self._at(index, path))
            if size == 1 or remaining == 0:
                break
            size = max(1, min(size // 2, remaining // 2))
        return progress

    def _strings(self, index: int, path: tuple[Step, ...]) -> Proposals:
        value = self._at(index, path)
        if isinstance(value, str):
            return (yield from self._shorten(index, path, value))
        progress = False
        if isinstance(value, list | dict):
            for step in list(range(len(value)) if isinstance(value, list) else value):
                if index not in self.used:
                    break
                progress |= yield from self._strings(index, (*path, step))
        return progress

    def _shorten(self, index: int, path: tuple[Step, ...], text: str) -> Proposals:
        """The shortest prefix that is accepted, then the shortest suffix of that."""
        if not text:
            return False
        if (yield from self._try(index, path, "")):
            return True
        progress = False
        for keep in (_prefix, _suffix):
            # ``bad`` is a length known to fail (the empty string), ``good`` one known to pass
            bad, good = 0, len(text)
            while good - bad > 1 and index in self.used:
                middle = (bad + good) // 2
                if (yield from self._try(index, path, keep(text, middle))):
                    good, progress = middle, True
                else:
                    bad = middle
            text = keep(text, good)
        return progress


def _prefix(text: str, length: int) -> str:
    return text[:length]


def _suffix(text: str, length: int) -> str:
    return text[len(text) - length :]


def _without(container: list[Any] | dict[str, Any], start: int, size: int) -> Any:
    """``container`` without ``size`` items (or members, in order) from ``start``."""
    if isinstance(container, list):
        return container[:start] + container[start + size :]
    items = list(container.items())
    return dict(items[:start] + items[start + size :])


def _replaced(value: Any, path: tuple[Step, ...], new: Any) -> Any:
    """A copy of ``value`` with ``new`` at ``path``; what is off the path is shared."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    copy: Any = list(value) if isinstance(value, list) else dict(value)
    copy[step] = _replaced(value[step], rest, new)
    return copy
