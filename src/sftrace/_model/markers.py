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

import re
from typing import Final

__all__ = ["MARKER_PREFIX", "marker", "unmarked"]

MARKER_PREFIX: Final = "[REDACTED:"
# A marker as it stands in a value or in its JSON text (rule names hold no "]", quote or
# backslash that JSON would escape).
_MARKER: Final = re.compile(r"\[REDACTED:[^\]\"\\]*\]")
_UNMARKED: Final = MARKER_PREFIX + "]"


def marker(rule: str) -> str:
    """The text that replaces a redacted value."""
    return f"{MARKER_PREFIX}{rule}]"


def unmarked(text: str) -> str:
    """``text`` with every marker's rule name left out (``[REDACTED:]``); ``text`` itself
    when it holds no marker (one substring search)."""
    if MARKER_PREFIX not in text:
        return text
    return _MARKER.sub(_UNMARKED, text)
