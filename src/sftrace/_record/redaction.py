"""Redaction: keeping credentials out of every span, bundle and export.

Redaction happens at capture time, on the canonical JSON of each recorded value (tool
and LLM inputs and outputs, the run's input, output and metadata, state changes), on
the text of bytes before they are base64-encoded, and on the text of each recorded error
(message and stack trace), before the value is put on a span. So nothing downstream
ever holds the secret: not the bundle's journal, its digests, nor any span exporter.

Three kinds of rules:

- Sensitive keys: the whole value of an object member whose name is sensitive
  (``password``, ``api_key``, ``Authorization``...) is replaced. Names match in any case
  and separator style: ``apiKey``, ``API_KEY``, ``x-api-key`` and ``openai_api_key_2``
  all end with the words ``api key``.
- Value patterns: secrets recognisable by their shape (``sk-...``, ``ghp_...``, JWTs,
  PEM private keys, ``Bearer ...``, ``scheme://user:pass@host``...) are replaced inside
  any string, wherever they appear (``redaction_rules``).
- Known secrets: a value seen under a sensitive key is replaced wherever the run shows
  it again (an error message, a stack trace, another tool's input).

A redacted value becomes ``"[REDACTED:<rule>]"``. Each redaction is recorded as its
JSON path and rule name on the span (``sftrace.redactions``), never the value.

The hot path is one pass of an RE2 set over the JSON text of a value (``redaction_set``),
then, when a rule may match, the keyword survey (``redaction_scan``): only when it finds
where a rule could match is the value parsed, walked and redacted.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from sftrace._errors import ConfigError
from sftrace._internal import internal_error
from sftrace._model.jsonpath import child as child_path
from sftrace._model.jsonpath import format_path
from sftrace._model.markers import MARKER_PREFIX, marker
from sftrace._record.redaction_apply import (
    Redaction,
    note,
    redact_plain,
    replacer,
)
from sftrace._record.redaction_fragments import redact_chunks
from sftrace._record.redaction_keys import (
    BUILTIN_KEYS,
    MAX_KEY_NUMBER,
    glued,
    key_needle,
    key_suffixes,
    key_words,
)
from sftrace._record.redaction_known import KnownSecrets, is_marker
from sftrace._record.redaction_rules import (
    ASSIGNMENT,
    BUILTIN_PATTERN_NAMES,
    Rule,
    builtin_rules,
    user_rules,
)
from sftrace._record.redaction_scan import EVERYTHING, Scanner, Survey
from sftrace._record.redaction_set import BUILTIN, CLEAR, RuleSet

__all__ = [
    "BUILTIN_RULES",
    "MARKER_PREFIX",
    "KnownSecrets",
    "Redaction",
    "Redactor",
    "current_redactor",
    "is_marker",
    "marker",
    "set_redactor",
]

FAILED_RULE: Final = "redaction_failed"
KEY_RULE: Final = "sensitive_key"
KNOWN_RULE: Final = "known_secret"
CALLBACK_RULE: Final = "callback"

JSON = Any
# callback(path, value) -> a rule name (or True) to redact the whole value; None or False
# to keep it.
RedactionCallback = Callable[[str, Any], "str | bool | None"]

BUILTIN_RULES: Final[tuple[str, ...]] = (KEY_RULE, KNOWN_RULE, *BUILTIN_PATTERN_NAMES)


@dataclass(slots=True)
class _Pass:
    """One redaction pass: what it found, and the run's known secrets."""

    found: list[Redaction]
    known: KnownSecrets | None
    learned: bool = False
    survey: Survey | None = None  # what the JSON text holds (strings are scanned for it)


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
        # glued name -> the word a matching key must hold as it is: the longest word of a
        # built-in name; none for your own names (``internalref`` matches
        # ``internal_ref``).
        self._keys: dict[str, str | None] = {}
        if builtins and KEY_RULE not in disabled:
            self._keys.update((glued(name), key_needle(name)) for name in BUILTIN_KEYS)
        self._keys.update((glued(name), None) for name in user_keys)
        self._learn = bool(self._keys) and KNOWN_RULE not in disabled
        # Free-text "name=value" knows the built-in names even with sensitive_key off.
        names_in_text = [*user_keys, *BUILTIN_KEYS] if builtins else list(user_keys)
        enabled = {name for name in BUILTIN_PATTERN_NAMES if builtins and name not in disabled}
        if user_keys and ASSIGNMENT not in disabled:
            enabled.add(ASSIGNMENT)
        self._rules = builtin_rules(names_in_text, enabled)
        self._replacers = [replacer(rule) for rule in self._rules]
        longest = max((len(glued(name)) for name in [*key_names, *names_in_text]), default=0)
        self._scanner = Scanner(
            self._rules,
            key_needles=sorted({needle for needle in self._keys.values() if needle}),
            keep=48 + 2 * longest + MAX_KEY_NUMBER,
        )
        self._user_rules = user_rules(patterns)
        self._user_replacers = [replacer(rule) for rule in self._user_rules]
        # Your own patterns and key names: the survey doesn't know them (when the set
        # says they may match, every string is looked at).
        self._set = RuleSet(
            self._rules,
            self._user_rules,
            names=[name for name in key_names if name not in user_keys],
            own_names=user_keys,
        )
        # A callback may redact anything: every value is walked.
        self._always_walk = callback is not None
        self._active = bool(self._keys or self._rules or self._user_rules or self._always_walk)

    def __repr__(self) -> str:
        names = [rule.name for rule in (*self._rules, *self._user_rules)]
        return (
            f"Redactor(keys={len(self._keys)}, patterns={list(dict.fromkeys(names))!r}, "
            f"callback={self.callback!r})"
        )

    @property
    def active(self) -> bool:
        """False when there is no rule at all (redaction switched off)."""
        return self._active

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The built-in value rules in force, in the order they apply."""
        return tuple(self._rules)

    # -- public helpers --------------------------------------------------------------
    def redact(
        self, value: JSON, *, known: KnownSecrets | None = None
    ) -> tuple[JSON, list[Redaction]]:
        """A redacted copy of a JSON-compatible value, and where it was redacted.

        ``known``: the secrets a run has seen so far (see :class:`KnownSecrets`); values
        found under sensitive keys are added to it.
        """
        found: list[Redaction] = []
        return self._walk_root(value, _Pass(found, known)), found

    def redact_text(
        self, text: str, *, known: KnownSecrets | None = None
    ) -> tuple[str, list[Redaction]]:
        """``text`` with every secret found by the value patterns replaced (path ``$``)."""
        if not isinstance(text, str) or not self.active:
            return text, []
        try:
            found: list[Redaction] = []
            redacted = self._string(text, "$", _Pass(found, known))
            return redacted, found
        except Exception as exc:
            internal_error("redacting an error text", exc)
            return marker(FAILED_RULE), [Redaction("$", FAILED_RULE)]

    def redact_json(
        self,
        text: str,
        *,
        known: KnownSecrets | None = None,
        sort_keys: bool = True,
        key: str | None = None,
    ) -> tuple[str, list[Redaction]]:
        """JSON text -> redacted JSON text, and where it was redacted.

        Keys come out sorted (canonical) unless ``sort_keys=False`` keeps their order.
        ``key``: the name the value is stored under (a state change's key); a sensitive
        one redacts the whole value.
        """
        if not self._active:
            return text, []
        sensitive = key is not None and self.sensitive_key(key)
        survey = self._survey(text, known)
        if survey is None and not sensitive and not self._always_walk:
            return text, []
        try:
            found: list[Redaction] = []
            value = orjson.loads(text)
            run = _Pass(found, known, survey=survey)
            if sensitive and _worth_redacting(value):
                self._learn_all(value, run)
                redacted: JSON = marker(KEY_RULE)
                found.append(Redaction("$", KEY_RULE))
            else:
                redacted = self._walk_root(value, run)
            if not found:
                return text, []
            option = orjson.OPT_SORT_KEYS if sort_keys else 0
            found.sort(key=lambda redaction: redaction.path)  # whatever the key order
            return orjson.dumps(redacted, option=option).decode(), found
        except Exception as exc:
            # Fail closed: the value is lost rather than possibly leaked.
            internal_error("redacting a recorded value", exc)
            return orjson.dumps(marker(FAILED_RULE)).decode(), [Redaction("$", FAILED_RULE)]

    def redact_bytes(
        self, data: bytes, *, known: KnownSecrets | None = None
    ) -> tuple[bytes, list[Redaction]]:
        """Bytes holding UTF-8 text, with the text redacted (other bytes as they are)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data, []
        redacted, found = self.redact_text(text, known=known)
        return (redacted.encode("utf-8") if found else data), found

    def redact_stream(
        self, chunks: list[JSON], *, known: KnownSecrets | None = None
    ) -> tuple[list[JSON], list[Redaction]]:
        """Streamed chunks, with a secret that runs across chunks redacted in every chunk
        holding part of it (found in the joined text of each delta member). Paths are
        those of ``{"chunks": [...]}``; the chunks are copied when anything changes."""
        if not self.active or len(chunks) < 2:
            return chunks, []
        try:
            redacted, changed = redact_chunks(chunks, lambda text: self._spans(text, known))
        except Exception as exc:
            internal_error("redacting streamed chunks", exc)
            return [marker(FAILED_RULE)] * len(chunks), [Redaction("$.chunks", FAILED_RULE)]
        found: list[Redaction] = []
        for steps, rule in changed:
            note(found, Redaction(format_path(("chunks", *steps)), rule))
        return redacted, found

    def suspicious(self, text: str) -> bool:
        """True when some rule might match in the JSON text ``text`` (cheap; never False
        where a rule would match)."""
        return self._survey(text, None) is not None

    def sensitive_key(self, name: str) -> bool:
        """True when a member named ``name`` has its value redacted."""
        if not self._keys:
            return False
        for suffix in key_suffixes(name):
            if suffix in self._keys:
                needle = self._keys[suffix]
                if needle is None or needle in name.lower():
                    return True
        return False

    # -- internals -------------------------------------------------------------------
    def _survey(self, text: str, known: KnownSecrets | None) -> Survey | None:
        """What the JSON text ``text`` may hold to redact (None: nothing)."""
        if known is not None and self._learn and known.found_in_json(text):
            return EVERYTHING
        verdict = self._set.check(text)
        if verdict == CLEAR:
            return None
        if verdict == BUILTIN:
            return self._scanner.survey(text)
        return EVERYTHING

    def _walk_root(self, value: JSON, run: _Pass) -> JSON:
        redacted = self._walk(value, "$", run)
        if run.learned and run.known is not None:
            # A secret learned under a key also goes where the walk had already been
            # ({"a_conn": "...Pwd=S3cret;", "password": "S3cret"}): walk once more.
            again = _Pass([], run.known, survey=EVERYTHING)
            redacted = self._walk(redacted, "$", again)
            for redaction in again.found:
                note(run.found, redaction)
        return redacted

    def _walk(self, value: JSON, path: str, run: _Pass) -> JSON:
        if isinstance(value, str):
            return self._string(value, path, run)
        if isinstance(value, dict):
            result: dict[str, JSON] = {}
            for key, item in value.items():
                name = key if isinstance(key, str) else str(key)
                # A secret used as a key: the key itself is redacted (and so is its path).
                key_run = _Pass([], run.known, survey=run.survey)
                new_name = self._patterns_only(name, "", key_run)
                while new_name != name and new_name in result:
                    new_name += "'"
                child = child_path(path, new_name)
                run.found.extend(Redaction(child, r.rule) for r in key_run.found)
                if self.sensitive_key(name) and _worth_redacting(item):
                    run.found.append(Redaction(child, KEY_RULE))
                    self._learn_all(item, run)
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

    def _learn_all(self, value: JSON, run: _Pass) -> None:
        """Remember every string and number of a value found under a sensitive key."""
        if run.known is None or not self._learn:
            return
        if isinstance(value, dict):
            for item in value.values():
                self._learn_all(item, run)
        elif isinstance(value, list | tuple):
            for item in value:
                self._learn_all(item, run)
        elif (
            isinstance(value, str | int | float)
            and not isinstance(value, bool)
            and run.known.add(value)
        ):
            run.learned = True

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
                    note(run.found, Redaction(path, KNOWN_RULE))
        text = self._scanner.redact(text, path, run.found, self._replacers, run.survey)
        if self._user_rules:
            text = redact_plain(self._user_rules, text, path, run.found, self._user_replacers)
        return text

    def _spans(self, text: str, known: KnownSecrets | None) -> list[tuple[int, int, str]]:
        """Where secrets are in ``text`` (start, end, rule), each rule on the text as given."""
        spans: list[tuple[int, int, str]] = []
        if known is not None and self._learn:
            for secret in known.values():
                at = text.find(secret)
                while at != -1:
                    spans.append((at, at + len(secret), KNOWN_RULE))
                    at = text.find(secret, at + 1)
        for rule in (*self._rules, *self._user_rules):
            for match in rule.find.finditer(text):
                group = "secret" if "secret" in rule.find.groupindex else 0
                if match.group(group) is None:
                    group = 0
                spans.append((*match.span(group), rule.name))
        return spans

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


def _worth_redacting(value: JSON) -> bool:
    """A sensitive key's value is replaced unless it holds nothing (null, "", a flag)."""
    if value is None or isinstance(value, bool) or is_marker(value):
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)


# --- the active redactor --------------------------------------------------------------

_active: Redactor | None = None
# The built-in rules, compiled once per process (about 50 ms): configure() without
# ``redaction`` goes back to them and must not make the next run compile them again.
_builtin: Redactor | None = None
_active_lock = threading.Lock()


def current_redactor() -> Redactor:
    """The redactor set by ``configure(redaction=...)``; the built-in rules by default."""
    global _active, _builtin
    redactor = _active
    if redactor is None:
        with _active_lock:
            if _active is None:
                if _builtin is None:
                    _builtin = Redactor()
                _active = _builtin
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
