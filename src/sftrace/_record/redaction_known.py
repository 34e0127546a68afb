"""Secrets a run has seen under sensitive keys, redacted wherever they show up again."""

from __future__ import annotations

import re
import threading
from typing import Any

import orjson

from sftrace._model.markers import MARKER_PREFIX


def is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX) and value.endswith("]")


# The scheme word of an authorization value (``Authorization: Bearer <token>``).
_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest)[ \t]+(?=\S{6})")


class KnownSecrets:
    """Secrets a run has seen under sensitive keys, redacted wherever they show up again.

    A password passed as ``login(password=...)`` is redacted by its key; if the agent
    later puts the same string in an error message or another tool's input, no key
    gives it away, but the run remembers it. Every string and number under a sensitive
    key counts, whatever characters it holds. Kept in memory only, for one run.
    """

    MAX = 256
    MIN_LENGTH = 6

    __slots__ = ("_escaped", "_lock", "_values")

    def __init__(self) -> None:
        self._values: tuple[str, ...] = ()
        self._escaped: tuple[str, ...] = ()  # as each value shows in JSON text
        self._lock = threading.Lock()

    def add(self, value: str | int | float) -> bool:
        """Remember ``value``; True when it was not known yet. Of an authorization value
        (``Bearer <token>``, ``token <token>``) the credential is what is remembered: the
        scheme word is no secret, and taking it along made text quoting the token
        (``sure, token ghp_...``) redact differently from the same text where the token
        was not learned yet (``sure, token [REDACTED:github_token]``)."""
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        scheme = _SCHEME.match(text)
        if scheme is not None:
            text = text[scheme.end() :]
        if len(text) < self.MIN_LENGTH or is_marker(text):
            return False
        # As it is, and as its repr() shows it (an error message quoting it with !r).
        forms = {text, repr(text)[1:-1]}
        with self._lock:
            if text in self._values or len(self._values) >= self.MAX:
                return False
            # Longest first: a secret containing another is replaced whole.
            values = tuple(sorted({*self._values, *forms}, key=len, reverse=True))
            self._escaped = tuple(orjson.dumps(v).decode()[1:-1] for v in values)
            self._values = values
            return True

    def values(self) -> tuple[str, ...]:
        return self._values  # an immutable snapshot

    def found_in(self, text: str) -> bool:
        return any(secret in text for secret in self._values)

    def found_in_json(self, json_text: str) -> bool:
        # Asked of every recorded value, mostly with no secret known: then no generator.
        escaped = self._escaped
        return bool(escaped) and any(secret in json_text for secret in escaped)

    def __len__(self) -> int:
        return len(self._values)
