"""The RE2 set of JSON texts against the plain path: it never clears a value that the
rules (built-in and your own), applied one after another to every string, or the
sensitive key names would change. Generated values are near-secrets: keywords followed
by secret-like runs, secrets inside base64 blobs, runs of 39 to 41 characters, key names
spelled every way, written by orjson and by json.dumps (escapes, \\u escapes, indents)."""

from __future__ import annotations

import functools
import json
import re
import string
from typing import Any

import orjson
import pytest
import re2
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sftrace import Redactor
from sftrace._record.redaction import is_marker
from sftrace._record.redaction_apply import redact_plain, replacer
from sftrace._record.redaction_keys import BUILTIN_KEYS, key_words
from sftrace._record.redaction_rules import RUN_CHARACTERS
from sftrace._record.redaction_set import (
    ANY,
    CLEAR,
    FOLDS,
    SPACES,
    RuleSet,
    gate,
    keywords_gate,
    relax,
)
from sftrace._record.redaction_view import may_hold_run

_DEFAULT = Redactor()
_REDACTORS = {
    "default": _DEFAULT,
    "keys": Redactor(keys=["card number", "2fa code", "x-internal-ref"]),
    "no_key_rule": Redactor(disable=["sensitive_key"]),
    # your own patterns: lookarounds, a backreference, a conditional, flags, \d \w \s \b
    "patterns": Redactor(
        patterns={
            "employee": r"(?<![A-Za-z])EMP-\d{6}(?!\d)",
            "quoted": r"(['\"])tok:(?:(?!\1).)+\1",
            "ticket": r"(?i)\bticket[ \t]*#?\s*(?P<secret>\w{4,})",
            "either": r"(<)?zz[^\s<>]{3}(?(1)>|$)",
            "spaced": r"(?i:pass)\W+phrase\S{2}",
        }
    ),
}


def _clear(redactor: Redactor, text: str) -> bool:
    return redactor._set.check(text) == CLEAR


def _plain_changes(redactor: Redactor, value: Any) -> bool:
    """Whether the plain path changes anything: a rule's sub() on a string (member names
    too), or a sensitive member name with something under it."""
    rules = [*redactor.rules, *redactor._user_rules]
    replacers = [replacer(rule) for rule in rules]

    def changes(text: str) -> bool:
        return not is_marker(text) and redact_plain(rules, text, "$", [], replacers) != text

    if isinstance(value, str):
        return changes(value)
    if isinstance(value, list):
        return any(_plain_changes(redactor, item) for item in value)
    if isinstance(value, dict):
        for name, item in value.items():
            if changes(name) or _plain_changes(redactor, item):
                return True
            if redactor.sensitive_key(name) and item not in (None, "", [], {}, True, False):
                return True
    return False


# --- near-secrets ------------------------------------------------------------------------

_KEYWORDS = sorted(
    {k for rule in _DEFAULT.rules for k in rule.keywords}
    | {literal for rule in _DEFAULT.rules for literal in rule.inside}
    | {"sk-ant-api03-", "sk-proj-", "github_pat_", "xoxb-", "SG.", "AKIA", "eyJ", "--password"}
    | {"EMP-", "tok:", "'tok:", "ticket #", "<zz", "zz", "pass-phrase", "pass phrase"}
)
_SEPARATORS = st.sampled_from(["", " ", "\t", "  ", ":", "=", " = ", '":"', '": "', "'", "_", "-"])
_TOKEN = string.ascii_letters + string.digits + "_-"


def _run(alphabet: str, min_size: int = 0, max_size: int = 48) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from(alphabet), min_size=min_size, max_size=max_size)


def _case(text: str, flips: list[bool]) -> str:
    flips = (flips + [False] * len(text))[: len(text)]
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips, strict=True))


_KEYWORD = st.builds(
    _case, st.sampled_from(_KEYWORDS), st.lists(st.booleans(), max_size=12)
) | st.sampled_from(_KEYWORDS)
_NEAR = st.builds(
    lambda keyword, sep, run: keyword + sep + run,
    _KEYWORD,
    _SEPARATORS,
    _run(_TOKEN) | _run(RUN_CHARACTERS) | _run(string.digits + "abcdef"),
)
_EXAMPLES = st.sampled_from([e for rule in _DEFAULT.rules for e in rule.examples])
_SHAPES = st.builds(
    lambda run, before, after: before + run + after,
    _run(string.ascii_letters + string.digits + "/+", 39, 41)
    | _run(string.digits + "abcdef", 39, 41),
    st.sampled_from(["", " ", "\n", "\t", "\\", "=", '"', "x"]),
    st.sampled_from(["", " ", "\n", "=", "==", "\\", "/"]),
)
_BLOBS = st.builds(
    lambda head, inner, tail: head + inner + tail,
    _run(RUN_CHARACTERS, 0, 300),
    _NEAR | _EXAMPLES | _SHAPES,
    _run(RUN_CHARACTERS + "=", 0, 300),
)
_FILLER = st.sampled_from(
    [
        "the agent",
        " ",
        "\n",
        "\t",
        ";",
        "&",
        "?",
        "/",
        ".",
        ",",
        "é",
        "'",
        '"',
        "\\",
        "<",
        ">",
        "\u0131",
        "\u0130",
        "\u017f",
        "\u212a",
        "\u2028",
        "\x00",
        "\x1f",
        "\U0001f600",
        "123456",
    ]
)
_TEXT = st.lists(
    st.one_of(_NEAR, _EXAMPLES, _SHAPES, _BLOBS, _FILLER, st.text(max_size=6)), max_size=5
).map("".join)


def _spellings(name: str, style: int, number: str, separator: str) -> str:
    words = key_words(name)
    if style == 0:
        joined = separator.join(words)
    elif style == 1:
        joined = words[0] + "".join(w.capitalize() for w in words[1:])
    elif style == 2:
        joined = separator.join(words).upper()
    else:  # a word cut in two: a_pi_key
        glued = "".join(words)
        joined = glued[:1] + separator + glued[1:]
    return joined + number


_KEY_NAMES = st.builds(
    _spellings,
    st.sampled_from([*BUILTIN_KEYS, "card number", "2fa code", "prompt tokens", "spin"]),
    st.integers(0, 3),
    st.sampled_from(["", "2", "_2", "-10", "_12345", "s"]),
    st.sampled_from(["_", "-", " ", "__", ".", "\n", "\t", "", "é"]),
)
_JSON = st.recursive(
    st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), _TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(_KEY_NAMES | _TEXT, children, max_size=3),
    ),
    max_leaves=8,
)


def _texts(value: Any) -> list[str]:
    """The value's JSON as sftrace writes it, and as other writers do."""
    return [
        orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(),
        json.dumps(value),
        json.dumps(value, ensure_ascii=False, indent=1),
    ]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_JSON, which=st.sampled_from(sorted(_REDACTORS)))
def test_set_never_clears_what_the_plain_path_redacts(value: Any, which: str) -> None:
    """Near-secrets in values and member names: where the plain rule-by-rule path would
    change something, the set does not clear the text; and the result of
    redact_json is the plain walk's."""
    redactor = _REDACTORS[which]
    changes = _plain_changes(redactor, value)
    expected, _ = redactor.redact(value)
    for text in _texts(value):
        clear = _clear(redactor, text)
        assert not (changes and clear), text
        redacted, found = redactor.redact_json(text)
        if clear:
            assert (redacted, found) == (text, [])
        assert orjson.loads(redacted) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=_KEY_NAMES,
    before=st.sampled_from(["", "x", "the ", "my-"]),
    which=st.sampled_from(sorted(_REDACTORS)),
)
def test_set_on_member_names(name: str, before: str, which: str) -> None:
    """Key names in every spelling (cut words, numbers, escapes, upper case) as member
    names and as "name: value" text: never cleared where the plain path redacts."""
    redactor = _REDACTORS[which]
    for value in ({before + name: "v4lue"}, {"note": f"{before}{name}: v4lue"}):
        changes = _plain_changes(redactor, value)
        for text in _texts(value):
            if changes:
                assert not _clear(redactor, text), text


@pytest.mark.parametrize("key", BUILTIN_KEYS)
def test_set_on_every_cut_of_every_key_name(key: str) -> None:
    """Every built-in key name cut anywhere (``a_pi_key``, ``clie-ntSecret``), with a
    number or an escape after it: never cleared when the name is sensitive."""
    glued = "".join(key_words(key))
    for cut in range(len(glued) + 1):
        for separator in ("_", "-", "\n", "\t", "\\", "é"):
            for number in ("", "2", "_12"):
                name = glued[:cut] + separator + glued[cut:] + number
                for value in ({name: "v4lue"}, {name.upper(): 1}):
                    if not _plain_changes(_DEFAULT, value):
                        continue
                    for text in _texts(value):
                        assert not _clear(_DEFAULT, text), text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shaped=_SHAPES, around=st.sampled_from(["", " ", "\n", "key: ", "é"]))
def test_set_on_shaped_runs(shaped: str, around: str) -> None:
    """Runs of 39 to 41 characters after and before escapes, '=' and '/': never cleared
    where the plain path redacts."""
    for value in ({"v": around + shaped}, {"v": shaped + around}, [shaped]):
        if _plain_changes(_DEFAULT, value):
            for text in _texts(value):
                assert not _clear(_DEFAULT, text), text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT)
def test_set_on_strings_agrees_with_each_rule(text: str) -> None:
    """A string the set clears (as a JSON value, or a member name) is one that no
    rule changes."""
    plain = redact_plain(_DEFAULT.rules, text, "$", [], [replacer(r) for r in _DEFAULT.rules])
    for value in ({"v": text}, [text], {text: 1}):
        json_text = orjson.dumps(value).decode()
        if _clear(_DEFAULT, json_text):
            assert plain == text, json_text


@pytest.mark.parametrize(
    "text",
    [
        '{"a_pi_key":"x"}',
        '{"api\\nkey":"x"}',
        '{"Client-Secret_2":"x"}',
        '{"note":"password\\t: hunter2"}',
        '{"note":"x\\npassword = hunter2"}',
        '{"note":"PASSWORD\\\\\\": \\"x\\""}',
        '{"password\\\\2":"x"}',
        '{"password\\t2":"x"}',
        '{"session__ID":"x"}',
        '{"k":"https://hooks.slack.com/services/T0/B0/abcdefghijklmnop"}',
        '{"k":"sig=abcdefghijklmnop0123"}',
        '{"k":"\\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
        '{"k":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\\n"}',
        '{"k":"mysql -u root -pS3cret app"}',
        '{"k":"xoxb-123456789012-abcdefghij"}',
    ],
)
def test_set_leaves_near_misses_to_the_survey(text: str) -> None:
    """Names cut or spelled oddly, escapes around a name or a shaped run: not cleared."""
    assert not _clear(_DEFAULT, text)
    assert _DEFAULT.redact_json(text)[1], text


@pytest.mark.parametrize(
    "text",
    [
        '{"prompt_tokens":12,"max_tokens":100}',
        '{"source":"result = self.client.fetch(url, timeout=30)\\n"}',
        '{"sha256":"' + "ab" * 32 + '","id":"' + "0f" * 20 + '"}',
        '{"text":"The client said: the token is spent."}',
    ],
)
def test_set_clears_look_alikes(text: str) -> None:
    """What follows a keyword decides: prompt_tokens, client.fetch, a client who said."""
    assert _clear(_DEFAULT, text)


@pytest.mark.parametrize("text", ['{"c_ardnumber":"v4lue"}', '{"my-card_Number": "v4lue"}'])
def test_your_own_key_names_cut_anywhere_are_never_cleared(text: str) -> None:
    """A key name given to Redactor(keys=...) is found however the member name splits
    its words, like the built-in names (the set once knew only those)."""
    redactor = _REDACTORS["keys"]
    assert not _clear(redactor, text)
    redacted, found = redactor.redact_json(text)
    assert "v4lue" not in redacted
    assert found


# --- the relaxation of a regex ----------------------------------------------------------

_PATTERNS = [
    *(rule.find for rule in _DEFAULT.rules),
    *(rule.find for rule in _REDACTORS["patterns"]._user_rules),
    re.compile(r"(?i)k[^a-z]s"),
    re.compile(r"(?<![\w])\d+(?![\W])"),
    re.compile(r"(?<!\s)x\S\D\w", re.ASCII),
    re.compile(r"(?s)a.b|c.d"),
    re.compile(r"\A(?:\u00e9|\u017f)+\Z"),
    re.compile(r"(?i)[^\d\WK]{2}"),
    re.compile(r"(?>ab|a)c\b"),
    re.compile(r"x{2,200}y"),
    re.compile(r"(?<![\"x])y+(?![\"x])"),
    re.compile(r"q(?=[a-zA-Z]*[A-Z])[a-zA-Z]{3}(?![0-9])"),
    re.compile(r"(?i)[xy]\u00c9"),
]
_CHARS = (
    "aAkKsSiIxy\u00e90123456789_-<>'\" \\/\n\t\x00\x1f"
    "\u017f\u0131\u0130\u212a\u2028\u00a0\U0001f600"
)


# The gates of the built-in rules with keywords (their patterns in the set).
_KEYWORD_GATES = {
    rule.find: re2.compile(keywords_gate(rule)) for rule in _DEFAULT.rules if rule.keywords
}


@functools.cache
def _relaxed(pattern: re.Pattern[str]) -> Any:
    return re2.compile(relax(pattern))


@functools.cache
def _gated(pattern: re.Pattern[str]) -> Any:
    return re2.compile(gate(pattern) or relax(pattern))


@pytest.mark.parametrize("pattern", _PATTERNS, ids=lambda pattern: pattern.pattern[:30])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(st.sampled_from(_CHARS), max_size=24) | _TEXT)
@example(text="qabcD")  # (a run holding a capital: the capital may come after it)
def test_relaxation_matches_wherever_the_regex_matches(pattern: re.Pattern[str], text: str) -> None:
    """relax(pattern) finds, in the JSON text of a string (orjson's, json.dumps' with
    \\u escapes), every string the regex matches in: case folds Python has and RE2
    lacks, escapes, lookarounds at the string's edges, backreferences."""
    if pattern.search(text) is None:
        return
    for json_text in (orjson.dumps([text]).decode(), json.dumps({"k": text})):
        assert _relaxed(pattern).search(json_text) is not None, (pattern.pattern, json_text)
        assert _gated(pattern).search(json_text) is not None, (pattern.pattern, json_text)
        if pattern in _KEYWORD_GATES:
            assert _KEYWORD_GATES[pattern].search(json_text) is not None, json_text


def test_folds_are_pythons() -> None:
    """FOLDS: every character Python's IGNORECASE matches to an ASCII letter, beyond its
    two cases; SPACES: Python's \\s."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for letter in string.ascii_lowercase:
        found = set(re.findall(f"(?i){letter}", every)) - {letter, letter.upper()}
        assert found == set(FOLDS.get(letter, "")), letter
    spaces = {c for low, high in SPACES for c in map(chr, range(low, high + 1))}
    assert set(re.findall(r"\s", every)) == spaces
    # \d and \w are within the Unicode properties that stand for them
    wide = re2.compile(r"[\p{Nd}\p{L}\p{N}_]*")
    assert wide.fullmatch("".join(re.findall(r"\w", every))) is not None


def test_a_set_that_gives_up_is_not_clear() -> None:
    """When RE2's DFA runs out of memory, RE2::Set reports no match at all: the missing
    sentinel makes that "can't tell" (the slow path), never "clear"."""

    class GaveUp:
        def Match(self, data: bytes) -> list[int]:
            return [3]  # what it had found before giving up: the sentinel is missing

    ruleset = RuleSet(_DEFAULT.rules, [], names=BUILTIN_KEYS)
    assert ruleset.check('{"v":"nothing here"}') == CLEAR
    ruleset._match = GaveUp().Match
    assert ruleset.check('{"v":"nothing here"}') == ANY
    redactor = Redactor()
    redactor._set._match = GaveUp().Match
    assert redactor.redact_json('{"password":"hunter2"}')[1]


def test_a_set_that_cannot_compile_is_never_clear() -> None:
    """Patterns beyond RE2's memory: every text takes the slow path."""
    ruleset = RuleSet(_DEFAULT.rules, [], names=BUILTIN_KEYS, max_mem=1 << 16)
    assert ruleset.check('{"v":"nothing here"}') == ANY


def test_a_gate_is_the_run_without_what_it_must_hold() -> None:
    """A rule whose relaxation spells out a run holding a character (the AWS secret)
    enters the set as the plain run, and its relaxation runs only when that matched: a
    git commit id (a 40-character run, no capital) is still cleared, a secret is not."""
    aws = next(rule.find for rule in _DEFAULT.rules if rule.name == "aws_secret_access_key")
    plain = gate(aws)
    assert plain is not None
    assert plain != relax(aws)
    assert gate(re.compile(r"sk-[A-Za-z0-9]{20,}")) is None
    commit = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    assert re2.compile(plain).search(f'"{commit}"') is not None
    assert _clear(_DEFAULT, orjson.dumps({"sha": commit, "sha256": commit * 2}).decode())
    ruleset = RuleSet(_DEFAULT.rules, [])
    assert ruleset.check(orjson.dumps([commit]).decode()) == CLEAR
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert ruleset.check(orjson.dumps([commit, secret]).decode()) != CLEAR
    escaped = secret.replace("/", "\\/")  # JSON may write "/" as "\/"
    assert json.loads(f'["{escaped}"]') == [secret]
    assert ruleset.check(f'["{escaped}"]') != CLEAR


_RUN_TEXT = st.text(
    st.sampled_from(RUN_CHARACTERS[:3] + RUN_CHARACTERS[-5:] + '=\\"\n é\u2028\x1f\U0001f600'),
    max_size=12,
)


def _exact_run(text: str, length: int) -> bool:
    """Whether ``text`` holds a run of exactly ``length`` run characters (the plain way)."""
    return (
        re.search(
            rf"(?<![{re.escape(RUN_CHARACTERS)}])[{re.escape(RUN_CHARACTERS)}]"
            rf"{{{length}}}(?![{re.escape(RUN_CHARACTERS)}])",
            text,
        )
        is not None
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=_RUN_TEXT,
    run=_run(RUN_CHARACTERS, 38, 42),
    after=_RUN_TEXT,
    long=st.booleans(),
)
def test_the_run_check_finds_every_run_of_the_length(
    before: str, run: str, after: str, long: bool
) -> None:
    """may_hold_run (the AWS secret's shape, outside the set's DFA) is True wherever a
    string of the JSON text holds a run of exactly the length, whatever escapes are
    around it or in it (orjson's, json.dumps' \\u escapes, "\\/"), short texts and long."""
    text = before + run + after
    padding = ["x" * 3000] if long else []  # (long texts take the run-by-run path)
    if not _exact_run(text, 40):
        return
    for json_text in (
        orjson.dumps([*padding, text]).decode(),
        json.dumps({"k": text, "p": padding}),
        orjson.dumps([text]).decode().replace("/", "\\/"),
    ):
        assert may_hold_run(json_text.encode(), 40), json_text


def test_the_run_check_clears_runs_of_other_lengths() -> None:
    """Ids of 60 characters, hashes of 64, a commit's 40 hex characters: only the last
    one may hold the AWS shape (the relaxation behind it then clears it)."""
    ids = orjson.dumps(["a1B2" * 15, "f" * 64, "x" * 39]).decode()
    assert not may_hold_run(ids.encode(), 40)
    assert not may_hold_run(orjson.dumps(["x" * 3000, "a1B2" * 15]).decode().encode(), 40)
    commit = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    assert may_hold_run(orjson.dumps(["a1B2" * 15, commit]).decode().encode(), 40)
    assert may_hold_run(f'["x\\n{"y" * 45}"]'.encode(), 40)  # (an escape: can't tell)


def test_the_set_holds_no_counted_run_of_the_built_in_rules() -> None:
    """The set's DFA meets new states on every new value when counted runs multiply with
    the patterns that start at any letter: the built-in rules enter it by their keywords,
    the AWS secret not at all (only the \\u escapes' four hex digits are counted; rules
    without counted runs enter it whole)."""
    patterns = "".join(_DEFAULT._set._patterns)
    counts = {int(n) for n in re.findall(r"(?<!\\x)\{(\d+)", patterns)}
    assert {count for count in counts if count >= 2} <= {4}, counts
