"""The one normalisation of JSON values used when two values are compared.

``diff``/``compare`` compare normalised values, and a replay's ``"normalized"`` match tier
matches a reached call to a recorded one when their normalised inputs are equal.
"""

from __future__ import annotations

from typing import Any

from sftrace._model.serialize import canonical

__all__ = ["content_key", "normalize"]


def normalize(value: Any) -> Any:
    """The value as compared: strings stripped, integral floats as ints, and dict keys
    whose value is ``None`` dropped (so ``2 == 2.0``, ``" ok " == "ok"`` and
    ``{"a": None} == {}``)."""
    if isinstance(value, dict):
        return {key: normalize(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def content_key(value: Any) -> str:
    """Canonical text of the normalised value: equal keys mean equal values."""
    return canonical(normalize(value))
