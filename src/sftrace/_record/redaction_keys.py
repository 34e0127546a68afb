"""Sensitive key names: the built-in ones, and how a member name is matched against
them (its trailing words, in any case and separator style)."""

from __future__ import annotations

import functools
import re
from typing import Final

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Built-in sensitive key names, as words (matched against the trailing words of a key,
# trailing numbers left out: ``password2`` and ``api_key_1`` match too).
BUILTIN_KEYS: Final[tuple[str, ...]] = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "pw",
    "pin",
    "secret",
    "client secret",
    "token",
    "api key",
    "access key",
    "secret key",
    "private key",
    "authorization",
    "cookie",
    "credential",
    "credentials",
    "session id",
)


def key_words(name: str) -> list[str]:
    """``"openaiApiKey"`` -> ``["openai", "api", "key"]`` (lowercase words of a key name)."""
    return [word.lower() for word in _WORD.findall(name)]


@functools.lru_cache(maxsize=4096)
def key_suffixes(name: str) -> tuple[str, ...]:
    """Every trailing run of words of ``name``, glued, trailing numbers (of up to four
    digits each) left out: ``x-api-key-2`` -> xapikey, apikey, key."""
    words = key_words(name)
    while len(words) > 1 and words[-1].isdigit() and len(words[-1]) <= MAX_KEY_NUMBER:
        words.pop()
    return tuple("".join(words[i:]) for i in range(len(words)))


MAX_KEY_NUMBER: Final = 4


def key_needle(name: str) -> str:
    """The longest word of a key name (the last of equals): a key only matches the name
    when it holds this word as it is, so the scan can look for it (``clientSecret``,
    ``client_secret`` and ``clientsecret`` hold ``secret``)."""
    words = key_words(name)
    return max(reversed(words), key=len)


def glued(name: str) -> str:
    return "".join(key_words(name))


def name_in_text(name: str) -> str:
    """A pattern for a key name written in free text: words joined by optional separators.

    Names of three letters or fewer (``pin``, ``pwd``) must start a word, so that
    ``spin: 3`` keeps its value.
    """
    words = key_words(name)
    pattern = r"[-_. ]?".join(re.escape(word) for word in words)
    return rf"(?<![A-Za-z]){pattern}" if len("".join(words)) <= 3 else pattern
