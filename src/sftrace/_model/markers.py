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
# A rule name is short: bounded, so text holding many "[REDACTED:" never closed (a crafted
# bundle) is scanned in linear time, not rescanned to its end at each of them.
_MARKER: Final = re.compile(r"(?:\[REDACTED:[^\]\"\\]{0,64}\])+")
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
_SECRET_MIN: Final = 6
# The most known-secret markers, and the longest text, the matching below looks at (a
# bundle is data from elsewhere: its work stays bounded).
_MAX_HOLES: Final = 16
_MAX_TEXT: Final = 1 << 20


def secrets_at_markers(recorded: str, reached: str) -> tuple[str, ...] | None:
    """The values ``reached`` holds where ``recorded`` has a known-secret marker, when
    the two texts are otherwise the same (compared :func:`unmarked`); else None.

    A replay that answers a tool calling a tool never runs the inner call that taught the
    recording a secret (``login(password=...)``), so it meets that secret unredacted
    where the recording has ``[REDACTED:known_secret]``. Matching it there lets the
    replay learn it, and redact it as the recording did.
    """
    if KNOWN_SECRET_MARKER not in recorded or len(reached) > _MAX_TEXT:
        return None
    pieces = [unmarked(piece) for piece in recorded.split(KNOWN_SECRET_MARKER)]
    # markers right after one another stand for one value (see unmarked)
    pieces = [pieces[0], *(piece for piece in pieces[1:-1] if piece), pieces[-1]]
    if len(pieces) - 1 > _MAX_HOLES:
        return None
    holes = _fill(pieces, unmarked(reached))
    if holes is None:
        return None
    return tuple(value for value in holes if not value.startswith(MARKER_PREFIX))


def _fill(pieces: list[str], text: str) -> list[str] | None:
    """The values between ``pieces`` when ``text`` is them in order with a value of at
    least six characters, holding no quote or backslash, between each two; else None.
    Each piece is taken at its first place after the value before it: linear in the
    text, where a regular expression with several such values backtracked exponentially."""
    if len(pieces) < 2 or not text.startswith(pieces[0]):
        return None
    position, holes = len(pieces[0]), []
    for index, piece in enumerate(pieces[1:], start=1):
        if index == len(pieces) - 1:
            end = len(text) - len(piece)
            if not text.endswith(piece) or end < position + _SECRET_MIN:
                return None
        else:
            end = text.find(piece, position + _SECRET_MIN)
            if end < 0:
                return None
        hole = text[position:end]
        if '"' in hole or "\\" in hole:
            return None
        holes.append(hole)
        position = end + len(piece)
    return holes


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
    if KNOWN_SECRET_MARKER not in recorded or len(reached) > _MAX_TEXT:
        return ()
    pieces = recorded.split(KNOWN_SECRET_MARKER)
    if len(pieces) - 1 > _MAX_HOLES:
        return ()
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
