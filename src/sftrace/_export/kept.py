"""Encoded bytes (or how to encode) kept for the values seen most, with a bound (the OTLP
encoders' caches)."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(dict[K, V]):
    """Encoded bytes (or a recipe for them) by what they encode, looked up with ``get``
    (a plain dict's speed).

    Emptied when it holds ``limit`` entries, so a stream of distinct keys or values (ids,
    generated names) cannot grow it without bound; the values that repeat from span to
    span are back after one miss each."""

    __slots__ = ("limit",)

    def __init__(self, limit: int = 4096) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: K, encoded: V) -> V:
        """``encoded``, kept under ``key``."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = encoded
        return encoded
