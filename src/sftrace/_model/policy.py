"""String enums for replay policies and modes.

Each accepts its string values and rejects anything else with the valid values listed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from sftrace._errors import ConfigError


class _StrChoice(StrEnum):
    @classmethod
    def parse(cls, value: str | Self, *, parameter: str) -> Self:
        """Return the member for ``value`` or raise ``ConfigError`` listing the choices."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise ConfigError(f"invalid {parameter}={value!r}: expected one of {choices}") from None


class ReplayPolicy(_StrChoice):
    """What a replay does when it reaches a call recorded with this policy.

    - ``frozen``: answer from the recording; the body never runs.
    - ``live``: run the body for real.
    - ``forbidden``: reaching the call during a replay is an error.
    - ``manual``: ask the replay's ``manual=`` handler for the value.
    - ``derived``: run the body (a deterministic local computation) and check its
      result equals the recorded one.
    """

    FROZEN = "frozen"
    LIVE = "live"
    FORBIDDEN = "forbidden"
    MANUAL = "manual"
    DERIVED = "derived"


class ReplayMode(_StrChoice):
    """How a whole replay treats calls (see ``sftrace.replay``)."""

    FROZEN = "frozen"
    LIVE = "live"
    HYBRID = "hybrid"


class MatchMode(_StrChoice):
    """How reached calls are paired with recorded ones."""

    STRICT = "strict"
    UNORDERED = "unordered"
