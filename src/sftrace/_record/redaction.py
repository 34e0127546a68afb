"""Redaction: keeping credentials out of every span, bundle and export.

Redaction happens at capture time, on the canonical JSON of each recorded value (tool
and LLM inputs and outputs, the run's input, output and metadata, state changes) and on
the text of each recorded error (message and stack trace), before the value is put on a
span. So nothing downstream ever holds the secret: not the bundle's journal, its
digests, nor any span exporter (OTLP included).

Two kinds of rules:

- Sensitive keys: the whole value of an object member whose name is sensitive
  (``password``, ``api_key``, ``Authorization``...) is replaced. Names match in any case
  and separator style: ``apiKey``, ``API_KEY``, ``x-api-key`` and ``openai_api_key`` all
  end with the words ``api key``.
- Value patterns: secrets recognisable by their shape (``sk-...``, ``ghp_...``, JWTs,
  PEM private keys, ``Bearer ...``, ``scheme://user:pass@host``...) are replaced inside
  any string, wherever they appear.

A redacted value becomes ``"[REDACTED:<rule>]"``. Each redaction is recorded as its
JSON path and rule name on the span (``sftrace.redactions``), never the value.

The hot path is one regular-expression search over the JSON text of a value: only when
it finds something suspicious is the value parsed, walked and redacted.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from sftrace._errors import ConfigError
from sftrace._internal import internal_error
from sftrace._model.jsonpath import child as child_path

MARKER_PREFIX: Final = "[REDACTED:"
FAILED_RULE: Final = "redaction_failed"
KEY_RULE: Final = "sensitive_key"
KNOWN_RULE: Final = "known_secret"
CALLBACK_RULE: Final = "callback"

JSON = Any
# callback(path, value) -> a rule name (or True) to redact the whole value; None or False
# to keep it.
RedactionCallback = Callable[[str, Any], "str | bool | None"]


def marker(rule: str) -> str:
    """The text that replaces a redacted value."""
    return f"{MARKER_PREFIX}{rule}]"


def is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX) and value.endswith("]")


@dataclass(frozen=True, slots=True)
class Redaction:
    """Where a value was redacted (its JSON path, ``$`` for a whole text) and by which rule."""

    path: str
    rule: str

    def record(self, field: str, **extra: Any) -> dict[str, Any]:
        """The JSON object stored on spans: field, path and rule (never the value)."""
        return {"field": field, "path": self.path, "rule": self.rule, **extra}


# --- key names --------------------------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Built-in sensitive key names, as words (matched against the trailing words of a key).
BUILTIN_KEYS: Final[tuple[str, ...]] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "api key",
    "access key",
    "secret key",
    "private key",
    "authorization",
    "cookie",
    "credential",
    "credentials",
)


def key_words(name: str) -> list[str]:
    """``"openaiApiKey"`` -> ``["openai", "api", "key"]`` (lowercase words of a key name)."""
    return [word.lower() for word in _WORD.findall(name)]


@functools.lru_cache(maxsize=4096)
def _key_suffixes(name: str) -> tuple[str, ...]:
    """Every trailing run of words of ``name``, glued: ``x-api-key`` -> xapikey, apikey, key."""
    words = key_words(name)
    return tuple("".join(words[i:]) for i in range(len(words)))


def _glued(name: str) -> str:
    return "".join(key_words(name))


def _name_in_text(name: str) -> str:
    """A pattern for a key name written in free text: words joined by optional separators."""
    return r"[-_. ]?".join(re.escape(word) for word in key_words(name))


# --- value patterns ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pattern:
    """A value rule: ``find`` runs on strings; the group named ``secret`` is replaced when
    there is one, else the whole match."""

    name: str
    find: re.Pattern[str]


_TOKEN = r"[A-Za-z0-9_-]"
_VALUE = r"(?!\[REDACTED:)[^\s\"',;&}\]]+"


def _builtin_patterns(names_in_text: Iterable[str]) -> list[_Pattern]:
    """The built-in value patterns, in the order they apply."""
    names = "|".join(sorted({_name_in_text(name) for name in names_in_text}, key=len, reverse=True))
    specs: list[tuple[str, str]] = [
        (
            "private_key",
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
            r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[\s\S]*)",
        ),
        # Real JWT headers are at least 19 characters ({"alg":"none"}).
        ("jwt", rf"(?<![A-Za-z0-9_-])eyJ{_TOKEN}{{12,}}\.eyJ{_TOKEN}{{5,}}\.{_TOKEN}*"),
        ("anthropic_api_key", rf"(?<![A-Za-z0-9_-])sk-ant-{_TOKEN}{{20,}}"),
        (
            "openai_api_key",
            rf"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?{_TOKEN}{{20,}}",
        ),
        (
            "github_token",
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ),
        ("aws_access_key_id", r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
        ("slack_token", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"),
        ("google_api_key", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"),
        ("stripe_key", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"),
        (
            # An HTTP header line carrying credentials: the whole header value goes.
            "http_credentials",
            r"(?i)(?<![A-Za-z0-9])(?:proxy-)?(?:authorization|cookie|set-cookie)[ \t]*:[ \t]*"
            r"(?P<secret>(?!\[REDACTED:)[^\r\n\"]+)",
        ),
        (
            "url_credentials",
            r"(?i)(?<![A-Za-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s/:@?#\"]+:"
            r"(?P<secret>(?!\[REDACTED:)[^\s/@?#\"]+)@",
        ),
        (
            "bearer_token",
            r"(?i)(?<![A-Za-z0-9])bearer\s+(?P<secret>(?=[A-Za-z0-9._~+/=-]*[0-9])"
            r"[A-Za-z0-9._~+/=-]{8,})",
        ),
        (
            # A sensitive name in free text followed by ':' or '=' (env dumps, query
            # strings, logs, JSON embedded in a string): the value after it goes.
            "secret_assignment",
            rf"(?i)(?:{names})(?![A-Za-z0-9])[\"']?[ \t]*[:=][ \t]*[\"']?"
            rf"(?:(?:bearer|basic|token)\s+)?(?P<secret>{_VALUE})",
        ),
        (
            # 40 characters of base64 mixing upper case, lower case and digits, alone.
            "aws_secret_access_key",
            r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])"
            r"(?=[A-Za-z0-9/+]*[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        ),
    ]
    return [_Pattern(name, re.compile(find)) for name, find in specs]


# --- detection: is a text worth walking? -------------------------------------------------
#
# Parsing and walking every value would cost far more than recording it, so each value's
# JSON text is first checked cheaply. The check may say yes when no rule matches (the
# walk then finds nothing), but never no when one would. In CPython, scanning for a
# substring is much faster than any regular expression with alternatives, so the check
# is a handful of substring scans:
#
# - Tokens (API keys, JWTs, AWS keys) are runs of at least 15 characters from
#   [A-Za-z0-9_-/+]: one translate() and one scan find whether any such run exists, and
#   only then is each token's prefix looked for.
# - Names (sensitive keys, "name=value" text, HTTP headers, Bearer, URL credentials) are
#   found by a scan for a word, confirmed by a regex anchored just after it.

_RUN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-/+")
_B64_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+")
_RUN_CLASSES = bytes(ord("a") if b in _RUN_CHARS else ord(" ") for b in range(256))
_B64_CLASSES = bytes(ord("a") if b in _B64_CHARS else ord(" ") for b in range(256))
_SQUEEZE = bytes(b for b in range(256) if b not in b'abcdefghijklmnopqrstuvwxyz0123456789":')
_MIN_TOKEN_RUN = b"a" * 15  # the shortest token any built-in pattern matches
_FORTY = b"a" * 40

# What each run-gated rule's tokens start with (case-sensitive, in the text itself): a
# plain substring, or a regex with a literal prefix (as fast to search for).
_TOKEN_CHECKS: Final[dict[str, str | re.Pattern[str]]] = {
    "jwt": "eyJ",
    "anthropic_api_key": "sk-",
    "openai_api_key": "sk-",
    "github_token": re.compile(r"gh(?:[pousr]_|ithub_pat_)"),
    "aws_access_key_id": re.compile(r"A(?:KIA|SIA)"),
    "slack_token": "xox",
    "google_api_key": "AIza",
    "stripe_key": re.compile(r"k_(?:live|test)_"),
}
_ASSIGN = r"[-_. ]*(?:\\?[\"'])?[ \t]*[:=]"
# (lowercase word, regex that must match right after it) of each word-gated rule.
_WORD_CHECKS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "private_key": (("key", r"[a-z ]*-----"),),
    "http_credentials": (("authorization", _ASSIGN), ("cookie", _ASSIGN)),
    "url_credentials": (("://", r"[^\s/@]*:[^\s/@]*@"),),
    "bearer_token": (("bearer", r"\s"),),
}


def _word_checks(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Merge (word, follow) pairs into one scan per needle.

    Words sharing their first four letters share one scan (``pass`` for password,
    passwd and passphrase); the rest of each word moves into the regex after it.
    """
    groups: dict[str, list[tuple[str, str]]] = {}
    for word, follow in pairs:
        groups.setdefault(word[:4], []).append((word, follow))
    checks = []
    for prefix, members in sorted(groups.items()):
        words = {word for word, _ in members}
        needle = next(iter(words)) if len(words) == 1 else prefix
        follows = sorted({re.escape(word[len(needle) :]) + follow for word, follow in members})
        checks.append((needle, re.compile("|".join(f"(?:{f})" for f in follows))))
    return tuple(checks)


BUILTIN_PATTERN_NAMES: Final[tuple[str, ...]] = (
    "private_key",
    "jwt",
    "anthropic_api_key",
    "openai_api_key",
    "github_token",
    "aws_access_key_id",
    "slack_token",
    "google_api_key",
    "stripe_key",
    "http_credentials",
    "url_credentials",
    "bearer_token",
    "secret_assignment",
    "aws_secret_access_key",
)
BUILTIN_RULES: Final[tuple[str, ...]] = (KEY_RULE, KNOWN_RULE, *BUILTIN_PATTERN_NAMES)


@dataclass(slots=True)
class _Pass:
    """One redaction pass: what it found, and the run's known secrets."""

    found: list[Redaction]
    known: KnownSecrets | None


class KnownSecrets:
    """Secrets a run has seen under sensitive keys, redacted wherever they show up again.

    A password passed as ``login(password=...)`` is redacted by its key; if the agent
    later puts the same string in an error message or another tool's input, no key
    gives it away, but the run remembers it. Kept in memory only, for one run.
    """

    MAX = 256
    MIN_LENGTH = 6

    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._values: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def add(self, value: str) -> None:
        # Only strings that JSON writes as they are, so a plain substring test on the
        # JSON text finds them.
        if len(value) < self.MIN_LENGTH or is_marker(value) or _needs_escape(value):
            return
        with self._lock:
            if value in self._values or len(self._values) >= self.MAX:
                return
            # Longest first: a secret containing another is replaced whole.
            self._values = tuple(sorted((*self._values, value), key=len, reverse=True))

    def values(self) -> tuple[str, ...]:
        return self._values  # an immutable snapshot

    def found_in(self, text: str) -> bool:
        return any(secret in text for secret in self._values)

    def __len__(self) -> int:
        return len(self._values)


_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _needs_escape(value: str) -> bool:
    return _ESCAPED.search(value) is not None


class Redactor:
    """The redaction rules applied to everything sftrace records.

    ::

        sftrace.configure(redaction=sftrace.Redactor(
            keys=["ssn", "x-internal-token"],
            patterns={"employee_id": r"EMP-\\d{6}"},
        ))

    Args:
        keys: more sensitive key names. A key matches when its trailing words, in any
            case and separator style, are the name: ``"card number"`` matches
            ``cardNumber``, ``card_number`` and ``billing-card-number``.
        patterns: more value patterns, ``{rule name: regex}`` (or a list of regexes,
            named ``pattern_1``...). Each match is replaced, or only its group named
            ``secret`` when it has one. Checked on every string (slower than built-ins).
        callback: ``callback(path, value)`` is called for every string and number
            recorded (and every error text, with path ``"$"``); it returns a rule name
            to redact the whole value, or None to keep it.
        builtins: False switches off every built-in rule (keys and patterns).
        disable: names of built-in rules to switch off (see ``Redactor.BUILTIN_RULES``):
            ``"sensitive_key"`` (the built-in key names) or a pattern name.
    """

    BUILTIN_RULES: Final = BUILTIN_RULES

    def __init__(
        self,
        *,
        keys: Iterable[str] = (),
        patterns: Mapping[str, str | re.Pattern[str]] | Iterable[str | re.Pattern[str]] = (),
        callback: RedactionCallback | None = None,
        builtins: bool = True,
        disable: Iterable[str] = (),
    ) -> None:
        if isinstance(keys, str):
            keys = (keys,)
        if isinstance(disable, str):
            disable = (disable,)
        disabled = frozenset(disable)
        unknown = sorted(disabled - set(BUILTIN_RULES))
        if unknown:
            raise ConfigError(
                f"Redactor(disable=...): unknown built-in rule(s) {unknown!r}; the built-in "
                f"rules are {list(BUILTIN_RULES)!r}"
            )
        user_keys = list(keys)
        for key in user_keys:
            if not isinstance(key, str) or not key_words(key):
                raise ConfigError(
                    f"Redactor(keys=...): each key must be a name with letters or digits, "
                    f"got {key!r}"
                )
        if callback is not None and not callable(callback):
            raise ConfigError(f"Redactor(callback=...) must be callable, got {callback!r}")
        self.callback = callback
        key_names = list(user_keys)
        if builtins and KEY_RULE not in disabled:
            key_names.extend(BUILTIN_KEYS)
        self._keys = frozenset(_glued(name) for name in key_names)
        self._learn = bool(self._keys) and KNOWN_RULE not in disabled
        # Free-text "name=value" knows the built-in names even with sensitive_key off.
        names_in_text = [*user_keys, *BUILTIN_KEYS] if builtins else list(user_keys)
        enabled = {name for name in BUILTIN_PATTERN_NAMES if builtins and name not in disabled}
        if names_in_text and "secret_assignment" not in disabled:
            enabled.add("secret_assignment")
        self._patterns = [p for p in _builtin_patterns(names_in_text) if p.name in enabled]
        self._user_patterns = _user_patterns(patterns)
        # Detection (see above).
        self._token_checks = tuple(
            dict.fromkeys(_TOKEN_CHECKS[name] for name in _TOKEN_CHECKS if name in enabled)
        )
        self._forty = "aws_secret_access_key" in enabled
        pairs = [pair for name in _WORD_CHECKS if name in enabled for pair in _WORD_CHECKS[name]]
        assigned = set(key_names)
        if "secret_assignment" in enabled:
            assigned.update(names_in_text)
        pairs.extend((key_words(name)[-1], _ASSIGN) for name in assigned)
        self._words = _word_checks(pairs)
        # A user key written glued ("apikey") also matches "api_key": in JSON text it shows
        # as `apikey":` once all but letters, digits, quotes and colons are dropped.
        self._squeezed = tuple(sorted(f'{_glued(name)}":'.encode() for name in user_keys))
        # Custom patterns and callbacks may match anything: every value is walked.
        self._always_walk = bool(self._user_patterns) or callback is not None

    def __repr__(self) -> str:
        return (
            f"Redactor(keys={len(self._keys)}, patterns="
            f"{[p.name for p in self._patterns + self._user_patterns]!r}, "
            f"callback={self.callback!r})"
        )

    @property
    def active(self) -> bool:
        """False when there is no rule at all (redaction switched off)."""
        return bool(self._keys or self._patterns or self._always_walk)

    # -- public helpers --------------------------------------------------------------
    def redact(
        self, value: JSON, *, known: KnownSecrets | None = None
    ) -> tuple[JSON, list[Redaction]]:
        """A redacted copy of a JSON-compatible value, and where it was redacted.

        ``known``: the secrets a run has seen so far (see :class:`KnownSecrets`); values
        found under sensitive keys are added to it.
        """
        found: list[Redaction] = []
        return self._walk(value, "$", _Pass(found, known)), found

    def redact_text(
        self, text: str, *, known: KnownSecrets | None = None
    ) -> tuple[str, list[Redaction]]:
        """``text`` with every secret found by the value patterns replaced (path ``$``)."""
        if not isinstance(text, str) or not self.active:
            return text, []
        if not self._always_walk and not self._worth_walking(text, known):
            return text, []
        try:
            found: list[Redaction] = []
            redacted = self._string(text, "$", _Pass(found, known))
            return redacted, found
        except Exception as exc:
            internal_error("redacting an error text", exc)
            return marker(FAILED_RULE), [Redaction("$", FAILED_RULE)]

    def redact_json(
        self, text: str, *, known: KnownSecrets | None = None, sort_keys: bool = True
    ) -> tuple[str, list[Redaction]]:
        """JSON text -> redacted JSON text, and where it was redacted.

        Keys come out sorted (canonical) unless ``sort_keys=False`` keeps their order.
        """
        if not self.active:
            return text, []
        if not self._always_walk and not self._worth_walking(text, known):
            return text, []
        try:
            found: list[Redaction] = []
            redacted = self._walk(orjson.loads(text), "$", _Pass(found, known))
            if not found:
                return text, []
            option = orjson.OPT_SORT_KEYS if sort_keys else 0
            found.sort(key=lambda redaction: redaction.path)  # whatever the key order
            return orjson.dumps(redacted, option=option).decode(), found
        except Exception as exc:
            # Fail closed: the value is lost rather than possibly leaked.
            internal_error("redacting a recorded value", exc)
            return orjson.dumps(marker(FAILED_RULE)).decode(), [Redaction("$", FAILED_RULE)]

    def suspicious(self, text: str) -> bool:
        """True when some rule might match in ``text`` (cheap; never False on a match)."""
        if self._token_checks or self._forty:
            data = text.encode("utf-8", "surrogatepass")
            if _MIN_TOKEN_RUN in data.translate(_RUN_CLASSES):
                for check in self._token_checks:
                    if check in text if isinstance(check, str) else check.search(text):
                        return True
                if self._forty and _FORTY in data.translate(_B64_CLASSES):
                    return True
        low = text.lower()
        for needle, follow in self._words:
            at = low.find(needle)
            while at != -1:
                at += len(needle)
                if follow.match(low, at):
                    return True
                at = low.find(needle, at)
        if self._squeezed:
            squeezed = low.encode("utf-8", "surrogatepass").translate(None, _SQUEEZE)
            return any(needle in squeezed for needle in self._squeezed)
        return False

    def sensitive_key(self, name: str) -> bool:
        """True when a member named ``name`` has its value redacted."""
        if not self._keys:
            return False
        return any(suffix in self._keys for suffix in _key_suffixes(name))

    # -- internals -------------------------------------------------------------------
    def _worth_walking(self, text: str, known: KnownSecrets | None) -> bool:
        if known is not None and self._learn and known.found_in(text):
            return True
        return self.suspicious(text)

    def _walk(self, value: JSON, path: str, run: _Pass) -> JSON:
        if isinstance(value, str):
            return self._string(value, path, run)
        if isinstance(value, dict):
            result: dict[str, JSON] = {}
            for key, item in value.items():
                name = key if isinstance(key, str) else str(key)
                # A secret used as a key: the key itself is redacted (and so is its path).
                key_run = _Pass([], run.known)
                new_name = self._patterns_only(name, "", key_run)
                while new_name != name and new_name in result:
                    new_name += "'"
                child = child_path(path, new_name)
                run.found.extend(Redaction(child, r.rule) for r in key_run.found)
                if self.sensitive_key(name) and _worth_redacting(item):
                    run.found.append(Redaction(child, KEY_RULE))
                    if run.known is not None and self._learn and isinstance(item, str):
                        run.known.add(item)
                    item = marker(KEY_RULE)
                else:
                    item = self._walk(item, child, run)
                result[new_name] = item
            return result
        if isinstance(value, list | tuple):
            return [self._walk(item, child_path(path, i), run) for i, item in enumerate(value)]
        if (
            self.callback is not None
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            rule = self._ask_callback(path, value)
            if rule is not None:
                run.found.append(Redaction(path, rule))
                return marker(rule)
        return value

    def _string(self, text: str, path: str, run: _Pass) -> str:
        if is_marker(text):
            return text
        if self.callback is not None:
            rule = self._ask_callback(path, text)
            if rule is not None:
                run.found.append(Redaction(path, rule))
                return marker(rule)
        return self._patterns_only(text, path, run)

    def _patterns_only(self, text: str, path: str, run: _Pass) -> str:
        if run.known is not None and self._learn:
            for secret in run.known.values():
                if secret in text:
                    text = text.replace(secret, marker(KNOWN_RULE))
                    _note(run.found, Redaction(path, KNOWN_RULE))
        for pattern in self._patterns:
            text = _substitute(pattern, text, path, run.found)
        for pattern in self._user_patterns:
            text = _substitute(pattern, text, path, run.found)
        return text

    def _ask_callback(self, path: str, value: Any) -> str | None:
        assert self.callback is not None
        try:
            rule = self.callback(path, value)
        except Exception as exc:
            internal_error("the redaction callback", exc)
            return FAILED_RULE  # fail closed
        if not rule:
            return None
        return rule if isinstance(rule, str) else CALLBACK_RULE


def _substitute(pattern: _Pattern, text: str, path: str, found: list[Redaction]) -> str:
    regex = pattern.find
    if regex.search(text) is None:
        return text
    has_secret = "secret" in regex.groupindex
    replacement = marker(pattern.name)
    hits = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal hits
        hits += 1
        if has_secret and match.group("secret") is not None:
            # Keep what surrounds the secret ("Bearer ", "user:...@"): replace the group.
            offset = match.start()
            start, end = match.span("secret")
            whole = match.group(0)
            return whole[: start - offset] + replacement + whole[end - offset :]
        return replacement

    result = regex.sub(replace, text)
    if hits:
        _note(found, Redaction(path, pattern.name))
    return result


def _note(found: list[Redaction], redaction: Redaction) -> None:
    if redaction not in found:
        found.append(redaction)


def _user_patterns(
    patterns: Mapping[str, str | re.Pattern[str]] | Iterable[str | re.Pattern[str]],
) -> list[_Pattern]:
    if isinstance(patterns, str | re.Pattern):
        patterns = (patterns,)
    items = (
        list(patterns.items())
        if isinstance(patterns, Mapping)
        else [(f"pattern_{i}", p) for i, p in enumerate(patterns, start=1)]
    )
    result = []
    for name, pattern in items:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"Redactor(patterns=...): rule names must be strings, got {name!r}")
        try:
            compiled = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ConfigError(
                f"Redactor(patterns=...): rule {name!r} is not a valid regular expression "
                f"({exc}): {pattern!r}"
            ) from None
        if compiled.search("") is not None:
            raise ConfigError(
                f"Redactor(patterns=...): rule {name!r} matches the empty string, so it "
                f"would redact everything: {compiled.pattern!r}"
            )
        result.append(_Pattern(name, compiled))
    return result


def _worth_redacting(value: JSON) -> bool:
    """A sensitive key's value is replaced unless it holds nothing (null, "", a flag)."""
    if value is None or isinstance(value, bool) or is_marker(value):
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)


# --- the active redactor --------------------------------------------------------------

_active: Redactor | None = None
_active_lock = threading.Lock()


def current_redactor() -> Redactor:
    """The redactor set by ``configure(redaction=...)``; the built-in rules by default."""
    global _active
    redactor = _active
    if redactor is None:
        with _active_lock:
            if _active is None:
                _active = Redactor()
            redactor = _active
    return redactor


def set_redactor(redactor: Redactor | None) -> None:
    """Use ``redactor`` for runs started from now on (None: the built-in rules)."""
    global _active
    if redactor is not None and not isinstance(redactor, Redactor):
        raise ConfigError(
            f"redaction must be a sftrace.Redactor (e.g. Redactor(keys=[...])), got "
            f"{type(redactor).__qualname__}"
        )
    with _active_lock:
        _active = redactor
