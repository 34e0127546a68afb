"""The text the keyword scan searches: case folded position for position, base64 runs
classified, the inside of long runs cut out (with the way back to positions)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from sftrace._record.redaction_rules import RUN_CHARACTERS

# Characters that regular expressions match case-insensitively to an ASCII letter but
# that str.lower() leaves alone (U+0130, which lowers to two characters, is handled by
# the length check in fold()).
_FOLD_EXTRA = str.maketrans({"\u017f": "s", "\u0131": "i"})
_RUN_TABLE = bytes(ord("a") if chr(b) in RUN_CHARACTERS else ord(" ") for b in range(256))
# The same for the UTF-8 bytes of a JSON text, where the backslash of an escape counts as
# a run character too (``\\/`` and ``\\u0041`` stand for one; bytes of other characters are
# never run characters).
_JSON_RUN_TABLE = bytes(
    ord("a") if chr(b) in RUN_CHARACTERS or chr(b) == "\\" else ord(" ") for b in range(256)
)
_RUNS = {length: b"a" * length for length in range(1, 65)}
_SHORT_TEXT = 2048
# Runs at least this long have their inside skipped by the keyword search (base64
# images, blobs); rules that can match there are searched by their ``inside`` literals.
LONG_RUN = 256
HEAD = 32  # more than the longest keyword


def fold(text: str) -> str | None:
    """``text`` case folded as IGNORECASE regexes compare it, position for position;
    None when folding changes its length (then positions can't be shared)."""
    low = text.lower()
    if text.isascii():
        return low
    if len(low) != len(text):
        return None
    if "\u017f" in low or "\u0131" in low:
        low = low.translate(_FOLD_EXTRA)
    return low


def run_classes(text: str) -> bytes:
    """One byte per character: ``a`` for a run character, a space for any other."""
    # latin-1 with replacement keeps one byte per character, so positions carry over.
    return text.encode("latin-1", "replace").translate(_RUN_TABLE)


def shape_runs(classes: bytes, length: int, json_text: str | None = None) -> list[int]:
    """Where the runs of exactly ``length`` run characters start.

    ``json_text``: the JSON text ``classes`` are of, where the letters of an escape
    (``\\n``, ``\\u001f``) may run on before a string's run: runs up to five longer
    count too when a backslash precedes them.
    """
    needle = b"a" * length
    starts: list[int] = []
    at = classes.find(needle)
    while at != -1:
        end = classes.find(b" ", at + length)
        if end == -1:
            end = len(classes)
        if end - at == length or (
            json_text and end - at <= length + 5 and at > 0 and json_text[at - 1] == "\\"
        ):
            starts.append(at)
        at = classes.find(needle, end)
    return starts


def may_hold_run(json_text: bytes, length: int) -> bool:
    """Whether one of the strings of the JSON text ``json_text`` (UTF-8) may hold a run of
    exactly ``length`` run characters (between characters that are not): False only when
    none does. C speed (a translation and a search or a few), outside any regex DFA.

    Escapes are run characters here (their backslash too), so the run of a string is
    within a run of the translated text at least as long. A run without a backslash is
    the string's own: only exactly ``length`` counts; one holding a backslash (an escape
    within or around the run) counts from ``length`` on.
    """
    classes = json_text.translate(_JSON_RUN_TABLE)
    needle = _RUNS.get(length) or b"a" * length
    # find(), not ``in``: for ``bytes in bytes`` CPython first tries the needle as an
    # integer, raising and clearing a TypeError each time (this runs for every value).
    if len(classes) < _SHORT_TEXT and json_text.find(b"\\") == -1:
        # One search (it slows down inside long runs, which long texts may have).
        padded = b" " + classes + b" "
        return padded.find(b" " + needle + b" ") != -1
    at = classes.find(needle)  # (the start of a run: any earlier "a" would have matched)
    while at != -1:
        end = classes.find(b" ", at + length)
        if end == -1:
            end = len(classes)
        if end - at == length or json_text.find(b"\\", at, end) != -1:
            return True
        at = classes.find(needle, end)
    return False


@dataclass(frozen=True, slots=True)
class View:
    """A text with the inside of its long runs cut out (each cut leaves a NUL), and the
    way back to positions in the text."""

    text: str
    cut: bool
    starts: tuple[int, ...] = ()  # where each kept piece starts in the view
    origins: tuple[int, ...] = ()  # ... and in the text

    @staticmethod
    def of(text: str, classes: bytes, keep: int) -> View:
        long = b"a" * LONG_RUN
        at = classes.find(long)
        if at == -1:
            return View(text, False)
        pieces: list[str] = []
        starts: list[int] = []
        origins: list[int] = []
        length = 0
        last = 0
        while at != -1:
            end = classes.find(b" ", at)
            if end == -1:
                end = len(classes)
            # The head of the run stays too: a keyword may start before the run and end
            # inside it (hooks.slack.com/services...).
            head = at + HEAD
            starts.append(length)
            origins.append(last)
            pieces.append(text[last:head])
            pieces.append("\0")
            length += head - last + 1
            last = end - keep
            at = classes.find(long, end)
        starts.append(length)
        origins.append(last)
        pieces.append(text[last:])
        return View("".join(pieces), True, tuple(starts), tuple(origins))

    def original(self, position: int) -> int:
        if not self.cut:
            return position
        piece = bisect.bisect_right(self.starts, position) - 1
        return self.origins[piece] + position - self.starts[piece]
