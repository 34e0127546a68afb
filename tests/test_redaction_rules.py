"""The value rules and the scan that decides where they run: no gaps, no drift."""

from __future__ import annotations

import re
import sys
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import secret_corpus as corpus
from sftrace import Redactor
from sftrace._record.redaction import KnownSecrets
from sftrace._record.redaction_apply import redact_plain, replacer
from sftrace._record.redaction_rules import RUN_CHARACTERS, Rule
from sftrace._record.redaction_view import fold

_REDACTOR = Redactor()
_RULES = _REDACTOR.rules


def _rule_id(rule: Rule) -> str:
    return f"{rule.name}:{rule.find.pattern[:24]}"


def _plain(redactor: Redactor, text: str) -> str:
    rules = redactor.rules
    return redact_plain(rules, text, "$", [], [replacer(rule) for rule in rules])


@pytest.mark.parametrize("rule", _RULES, ids=_rule_id)
def test_every_rule_has_examples_it_catches(rule: Rule) -> None:
    """Each built-in rule carries examples; each is redacted, with spaces around it too."""
    assert rule.examples
    for example in rule.examples:
        _check_claims(example)
        for text in (example, f" {example} ", f"\n{example}\n"):
            redacted, found = _REDACTOR.redact_text(text)
            assert rule.name in {r.rule for r in found}, (example, redacted)


@pytest.mark.parametrize("rule", _RULES, ids=_rule_id)
def test_every_rule_says_where_its_matches_start(rule: Rule) -> None:
    """A rule has keywords (every match starts with one, case folded) or a shape."""
    assert bool(rule.keywords) != bool(rule.shape)
    for example in rule.examples:
        for match in rule.find.finditer(example):
            low = fold(example)
            assert low is not None
            if rule.keywords:
                assert any(low.startswith(k, match.start()) for k in rule.keywords), example
            else:
                assert match.end() - match.start() == rule.shape


# --- the scan never says no where a rule would match ----------------------------------

_AROUND = st.text(
    st.sampled_from([*" \t\n\r\"'`:=;,.&?/\\-_+()[]{}<>@#%|!*~", "\u017f", "\u0130", "é"]),
    max_size=4,
)
_EXAMPLES = st.sampled_from([example for rule in _RULES for example in rule.examples])
_WORDS = st.sampled_from(
    ["password", "PASSWORD", "Bearer", "basic", "token", "api_key", "sk-", "://", "x", "9"]
)
_PIECES = st.one_of(_EXAMPLES, _AROUND, _WORDS, st.text(max_size=6))
_TEXTS = st.lists(_PIECES, min_size=1, max_size=6).map("".join)


_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_-]+")


def _check_claims(text: str) -> None:
    """What each rule says about its matches (see Rule) holds for the matches in text."""
    low = fold(text)
    for rule in _RULES:
        for match in rule.find.finditer(text):
            whole = match.group(0)
            if rule.requires:
                assert set(whole) & set(rule.requires), (rule.name, whole)
            if rule.token_run:
                longest = max((len(r) for r in _TOKEN_CHARS.findall(whole)), default=0)
                assert longest >= rule.token_run, (rule.name, whole)
            if rule.inside:
                assert any(text.startswith(lit, match.start()) for lit in rule.inside)
            elif rule.keywords and low is not None:
                assert any(low.startswith(k, match.start()) for k in rule.keywords)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS)
def test_scan_never_skips_a_text_a_rule_would_redact(text: str) -> None:
    """Examples with arbitrary whitespace and punctuation around them: wherever the plain
    rule-by-rule redaction changes a text, the cheap check on its JSON says so, and the
    scanning path gives exactly the plain result."""
    _check_claims(text)
    plain = _plain(_REDACTOR, text)
    json_text = orjson.dumps({"value": text}).decode()
    if plain != text:
        assert _REDACTOR.suspicious(json_text), text
    assert _REDACTOR.redact_text(text)[0] == plain
    redacted = orjson.loads(_REDACTOR.redact_json(json_text)[0])
    assert redacted == {"value": plain}


def test_scan_agrees_with_the_rules_on_whitespace_and_tabs() -> None:
    """Bearer<TAB>token and `password<TAB>: x` are redacted in recorded values too."""
    for text in ("Bearer\tEXAMPLEtoken0123", "password\t: hunter2-value"):
        redacted, found = _REDACTOR.redact_json(orjson.dumps({"note": text}).decode())
        assert found, text
        assert "hunter2" not in redacted
        assert "EXAMPLEtoken" not in redacted


def test_case_folding_covers_every_character_regexes_fold_to_ascii() -> None:
    """The scan's case folding maps every character an IGNORECASE regex takes for an
    ASCII letter to that letter (or gives up, for characters whose lower case is longer)."""
    every = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    for letter in "abcdefghijklmnopqrstuvwxyz":
        for char in re.findall(f"(?i){letter}", every):
            folded = fold(char)
            assert folded is None or folded == letter, (letter, hex(ord(char)))


def test_user_patterns_and_callbacks_bypass_the_scan() -> None:
    """A user pattern with no built-in keyword is still applied to every value."""
    redactor = Redactor(patterns={"ticket": r"TCK\d{4}"}, builtins=False)
    assert redactor.redact_json('{"a":"see TCK1234"}')[0] == '{"a":"see [REDACTED:ticket]"}'


# --- what is redacted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'password="correct horse battery staple" next',
            'password="[REDACTED:secret_assignment]" next',
        ),
        ("password='two words'", "password='[REDACTED:secret_assignment]'"),
        ('{"password": "a b \\" c"}', '{"password": "[REDACTED:secret_assignment]"}'),
        ("redis://:S3cretPass@cache:6379", "redis://:[REDACTED:url_credentials]@cache:6379"),
        ("Server=db;Uid=app;Pwd=S3cret;", "Server=db;Uid=app;Pwd=[REDACTED:secret_assignment];"),
        ("api_key_1=abc123", "api_key_1=[REDACTED:secret_assignment]"),
    ],
)
def test_quoted_values_are_redacted_whole(text: str, expected: str) -> None:
    """Quoted and spaced values go whole; an empty URL user still hides the password."""
    assert _REDACTOR.redact_text(text)[0] == expected


def test_result_does_not_depend_on_key_order() -> None:
    """A secret learned under a later key is also redacted in an earlier member."""
    value = {"a_conn": "Server=db;Uid=app;Database=x;Pass: S3cretValue", "password": "S3cretValue"}
    for ordered in (value, dict(reversed(value.items()))):
        text = orjson.dumps(ordered).decode()
        redacted, _ = _REDACTOR.redact_json(text, known=KnownSecrets())
        assert "S3cretValue" not in redacted, redacted


@pytest.mark.parametrize(
    "key",
    ["pwd", "passcode", "pin", "session_id", "clientsecret", "password2", "api_key_1", "PIN"],
)
def test_more_sensitive_key_names(key: str) -> None:
    """Key names common in tool traffic have their values redacted."""
    text = orjson.dumps({key: "value-123456"}).decode()
    assert orjson.loads(_REDACTOR.redact_json(text)[0]) == {key: "[REDACTED:sensitive_key]"}


@pytest.mark.parametrize("key", ["spin", "pinned", "session", "sessions_count", "pwd_hint_shown"])
def test_look_alike_key_names_keep_their_values(key: str) -> None:
    text = orjson.dumps({key: "value-123456"}).decode()
    assert _REDACTOR.redact_json(text) == (text, [])


@pytest.mark.parametrize("text", corpus.LOOKALIKES, ids=lambda t: t[:24])
def test_look_alikes_are_not_redacted(text: str) -> None:
    """Prose, code, hashes, UUIDs and base64 images come out as they went in."""
    assert _REDACTOR.redact_text(text) == (text, [])
    json_text = orjson.dumps({"value": text}).decode()
    assert _REDACTOR.redact_json(json_text) == (json_text, [])


# --- the fast path is the plain path ---------------------------------------------------------

_SHAPED = st.sampled_from([secret.text for secret in corpus.SHAPED])
_B64 = st.text(
    st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
    min_size=30,
    max_size=50,
)
_ANY = st.lists(st.one_of(_SHAPED, _EXAMPLES, _AROUND, _WORDS, _B64, st.text()), max_size=8)


_RUN = st.text(st.sampled_from(RUN_CHARACTERS), min_size=250, max_size=400)
_LONG = st.lists(
    st.one_of(_RUN, _EXAMPLES, _AROUND, _WORDS, st.sampled_from(["=", ":", "==", " = "])),
    min_size=2,
    max_size=7,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_LONG, key=_WORDS | st.sampled_from(["note", "Client_Secret", "x-api-key"]))
def test_long_runs_and_anchors_change_nothing(text: str, key: str) -> None:
    """Skipping the inside of long base64 runs and looking for names only before ':'/'='
    gives the plain result, in a text and in a JSON value."""
    plain = _plain(_REDACTOR, text)
    assert _REDACTOR.redact_text(text)[0] == plain
    value = {key: text, "other": [text[:40], text[-300:]]}
    expected, found = _REDACTOR.redact(value)
    json_text = orjson.dumps(value).decode()
    if found:
        assert _REDACTOR.suspicious(json_text)
    assert orjson.loads(_REDACTOR.redact_json(json_text, sort_keys=False)[0]) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=_ANY, keys=st.booleans())
def test_scanning_path_equals_rule_by_rule_path(pieces: list[str], keys: bool) -> None:
    """On generated strings the one-scan path gives what each rule's sub() in turn gives."""
    redactor = Redactor(keys=["card number", "2fa code"]) if keys else _REDACTOR
    text = "".join(pieces)
    assert redactor.redact_text(text)[0] == _plain(redactor, text)


def test_rule_examples_are_exposed_for_documentation() -> None:
    """Every built-in pattern name has at least one rule in a default Redactor."""
    names: set[Any] = {rule.name for rule in _RULES}
    assert names == set(Redactor.BUILTIN_RULES) - {"sensitive_key", "known_secret"}
