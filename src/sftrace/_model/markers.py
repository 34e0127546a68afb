"""The redaction marker: the text a redacted value becomes, ``[REDACTED:<rule>]``.

Which rule's name a marker carries can differ between a run and its replay with nothing
changed: a secret the recording redacted under its key's name (``sensitive_key``) comes
back to the replayed agent as the marker its recorded output holds
(``openai_api_key``), and a secret learned early in a recording is ``known_secret`` in
later text where the replay, which never sees the secret, keeps the rule's marker.
Inputs are therefore compared :func:`unmarked`: a marker stands for "a redacted value",
whichever rule wrote it. (The rule stays in the bundle, for people to read.)
"""

from __future__ import annotations

import itertools
import re
from typing import Final

__all__ = [
    "KNOWN_SECRET_MARKER",
    "MARKER_PREFIX",
    "marker",
    "masked",
    "secrets_at_markers",
    "secrets_near_markers",
    "unmarked",
]

MARKER_PREFIX: Final = "[REDACTED:"
# A marker as it stands in a value or in its JSON text (rule names hold no "]", quote or
# backslash that JSON would escape), and markers one right after another, which compare as
# one: a secret redacted piece by piece where it was streamed in chunks reads as several.
_MARKER: Final = re.compile(r"(?:\[REDACTED:[^\]\"\\]*\])+")
_UNMARKED: Final = MARKER_PREFIX + "]"


def marker(rule: str) -> str:
    """The text that replaces a redacted value."""
    return f"{MARKER_PREFIX}{rule}]"


# A secret the recording learned under a sensitive key and redacted wherever it showed up
# again (rule ``known_secret``, see ``KnownSecrets``).
KNOWN_SECRET_MARKER: Final = marker("known_secret")
# What a known secret may be where a replay meets it in JSON text: at least as long as
# one the recording learns, and inside one string (no quote or backslash).
_SECRET_HOLE: Final = r'([^"\\]{6,}?)'


def secrets_at_markers(recorded: str, reached: str) -> tuple[str, ...] | None:
    """The values ``reached`` holds where ``recorded`` has a known-secret marker, when
    the two texts are otherwise the same (compared :func:`unmarked`); else None.

    A replay that answers a tool calling a tool never runs the inner call that taught the
    recording a secret (``login(password=...)``), so it meets that secret unredacted
    where the recording has ``[REDACTED:known_secret]``. Matching it there lets the
    replay learn it, and redact it as the recording did.
    """
    if KNOWN_SECRET_MARKER not in recorded:
        return None
    pieces = [re.escape(unmarked(piece)) for piece in recorded.split(KNOWN_SECRET_MARKER)]
    found = re.fullmatch(_SECRET_HOLE.join(pieces), unmarked(reached), flags=re.DOTALL)
    if found is None:
        return None
    return tuple(value for value in found.groups() if not value.startswith(MARKER_PREFIX))


def unmarked(text: str) -> str:
    """``text`` with every marker's rule name left out (``[REDACTED:]``), and markers
    right after one another as one; ``text`` itself when it holds no marker (one
    substring search)."""
    if MARKER_PREFIX not in text:
        return text
    return _MARKER.sub(_UNMARKED, text)


# How much of the text on each side of a known-secret marker places it in another text.
_CONTEXTS: Final = (12, 3, 1)


def secrets_near_markers(recorded: str, reached: str) -> tuple[str, ...]:
    """The values ``reached`` holds where ``recorded`` has a known-secret marker, found by
    the text around each marker when the two texts differ elsewhere (a replay that
    diverges): what to keep out of its report. May take a value that is no secret, which
    only redacts more."""
    if KNOWN_SECRET_MARKER not in recorded:
        return ()
    pieces = recorded.split(KNOWN_SECRET_MARKER)
    found: list[str] = []
    for before, after in itertools.pairwise(pieces):
        # The closer the change to the secret, the less context; at last the text before
        # it alone, the value taken to the end of its string (more than the secret, maybe).
        arounds = [
            re.escape(before[-width:]) + _SECRET_HOLE + re.escape(after[:width])
            for width in _CONTEXTS
        ]
        arounds.append(re.escape(before[-_CONTEXTS[0] :]) + r'([^"\\]{6,})')
        for around in arounds:
            match = re.search(around, reached, flags=re.DOTALL)
            if match is not None:
                if not match.group(1).startswith(MARKER_PREFIX):
                    found.append(match.group(1))
                break
    return tuple(found)


def masked(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` (JSON) with each of ``secrets`` replaced by the known-secret marker."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, KNOWN_SECRET_MARKER)
    return text
