"""The one normalisation of JSON values used when two values are compared.

``diff``/``compare`` compare normalised values, and a replay's ``"normalized"`` match tier
matches a reached call to a recorded one when their normalised inputs are equal. A run's
failure is compared by its type and :func:`message_key` of its message.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sftrace._model.markers import unmarked
from sftrace._model.serialize import canonical

__all__ = ["content_key", "message_key", "normalize"]

# What differs from one run of unchanged code to the next inside an exception's message:
# object addresses in reprs, random UUIDs, and the clock (replays do not freeze it).
_VOLATILE: Final = re.compile(
    r"0x[0-9a-fA-F]{6,}"
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)


def normalize(value: Any) -> Any:
    """The value as compared: strings stripped, integral floats as ints, dict keys whose
    value is ``None`` dropped (so ``2 == 2.0``, ``" ok " == "ok"`` and ``{"a": None} ==
    {}``), and redaction markers without their rule's name (:func:`unmarked`)."""
    if isinstance(value, dict):
        return {
            unmarked(key) if isinstance(key, str) else key: normalize(item)
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, str):
        return unmarked(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def content_key(value: Any) -> str:
    """Canonical text of the normalised value: equal keys mean equal values."""
    return canonical(normalize(value))


def message_key(message: str) -> str:
    """An exception's message as two failures are compared: stripped, with object
    addresses (``0x7f3a...``), UUIDs and dates and times masked, so an unchanged agent
    whose message names ``<Session at 0x7f...>`` or ``datetime.now()`` fails with the same
    failure on replay, while another amount, order or reason is another failure."""
    return _VOLATILE.sub("\u2026", message.strip())
