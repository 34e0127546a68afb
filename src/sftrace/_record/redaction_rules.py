"""The built-in redaction rules: sensitive key names and value patterns, with examples.

Each value pattern is a :class:`Rule`: a regular expression and the literal
``keywords`` that every match of it starts with (compared case-insensitively). The
scanner (``redaction_scan``) finds those keywords in one scan and runs a rule's regex
only where one of its keywords starts, so a rule's keywords must be right: a match that
started anywhere else would be missed. ``examples`` are texts each rule must catch; the
tests check, with arbitrary text around them, that the rule and the scanner agree.
Rules without keywords have a ``shape`` instead (a run of characters of one length).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sftrace._errors import ConfigError
from sftrace._record.redaction_keys import MAX_KEY_NUMBER, key_words, name_in_text

# The characters that base64 runs are made of (a long run is skipped by the scan: see
# Rule.inside).
RUN_CHARACTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"


# --- value rules --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """A value rule: ``find`` runs on strings; the group named ``secret`` is replaced when
    it took part in the match, else the whole match.

    ``keywords``: lowercase literals; every match starts with one of them (case folded).
    ``shape``: for a rule without keywords, the length of the run of ``[A-Za-z0-9/+]``
    characters that every match is exactly (the scanner finds such runs instead); every
    match also holds an upper case letter, a lower case letter and a digit.
    ``requires``: characters of which every match holds at least one ("" for none): a
    text without any of them is not searched for this rule's keywords.
    ``inside``: for a rule whose match can start deep inside a long run of
    ``RUN_CHARACTERS`` (the keyword followed by more run characters), the exact-case
    literals every match starts with; they are searched in the whole text. Every other
    rule's keyword is followed, within a few characters, by a character outside the run
    (``sk-``, ``password=``, ``Bearer ``), so the scan skips the inside of long runs.
    ``anchor``: characters one of which follows every match's keyword within
    ``ANCHOR_REACH`` characters plus the longest name (``password = x``): a text with few
    of them is searched for the keywords only just before each.
    ``token_run``: every match holds a run of at least this many token characters
    (``[A-Za-z0-9_-]``): a text without such a run is not searched for the rule (prose
    and code rarely have one; keys and ids do).
    ``check``: called with the secret; a match it refuses is kept as it is.
    """

    name: str
    find: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    shape: int = 0
    examples: tuple[str, ...] = ()
    check: Callable[[str], bool] | None = None
    requires: str = ""
    inside: tuple[str, ...] = ()
    anchor: str = ""
    token_run: int = 0


# How far before its anchor a keyword may start, beyond the length of the longest name:
# a number, a quote and up to 16 spaces or tabs.
ANCHOR_REACH: Final = 32


_TOKEN = r"[A-Za-z0-9_-]"
_UNREDACTED = r"(?!(?:(?:bearer|basic|token)\s+)?\[REDACTED:)"
# The value after "name=" or "--name ": quoted (whole, up to the closing quote, escapes
# and spaces included) or a bare word, which an "&" ends only where a query string's
# next "name=" follows (a password "Tr0ub4dor&3-horse" is one value).
# A bare value ends at whitespace, a quote, a separator, an '&' before the next
# "name=", and a ')' that closes it rather than belongs to it (one followed by the end,
# whitespace or punctuation: "(password=x99)." keeps "x99", "pw=a)b" keeps "a)b").
_VALUE = (
    r"(?P<q>\\?[\"'])?" + _UNREDACTED + r"(?:(?:bearer|basic|token)\s+)?"
    r"(?P<secret>(?(q)(?:(?!(?P=q))(?:\\.|[^\n\\]))+"
    r"|(?:[^\s\"',;&})\]]|&(?![A-Za-z_][A-Za-z0-9_.\[\]-]*=)"
    r"|\)(?![\s.,;:!?)\]}\"']|$))+))"
)


def _basic_credentials(secret: str) -> bool:
    """``Basic`` credentials are base64 of ``user:password``."""
    try:
        decoded = base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


_SPECS: Final[tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]] = (
    # (name, regex, keywords, examples)
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[\s\S]*)",
        ("-----begin",),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n"
            "-----END RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        ),
    ),
    # Real JWT headers are at least 19 characters ({"alg":"none"}).
    (
        "jwt",
        rf"(?<![A-Za-z0-9_-])eyJ{_TOKEN}{{12,}}\.eyJ{_TOKEN}{{5,}}\.{_TOKEN}*",
        ("eyj",),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",),
    ),
    (
        "anthropic_api_key",
        rf"(?<![A-Za-z0-9_-])sk-ant-{_TOKEN}{{20,}}",
        ("sk-ant-",),
        ("sk-ant-api03-EXAMPLEexampleEXAMPLEexample0123456789",),
    ),
    (
        "openai_api_key",
        rf"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?{_TOKEN}{{20,}}",
        ("sk-",),
        ("sk-proj-EXAMPLEexample0123456789abcdefT3Bl", "sk-EXAMPLEexample0123456789abcdef"),
    ),
    (
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        ("ghp_EXAMPLEexample0123456789abcdefABCD", "github_pat_11EXAMPLE0example_0123456789"),
    ),
    (
        "gitlab_token",
        rf"(?<![A-Za-z0-9_-])glpat-{_TOKEN}{{20,}}",
        ("glpat-",),
        ("glpat-EXAMPLEexample012345",),
    ),
    (
        "huggingface_token",
        r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}",
        ("hf_",),
        ("hf_EXAMPLEexample0123456789abcdefABCD",),
    ),
    (
        "aws_access_key_id",
        r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
        ("akia", "asia"),
        ("AKIAIOSFODNN7EXAMPLE", "ASIAEXAMPLE012345678"),
    ),
    (
        "slack_token",
        r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}",
        tuple(f"xox{kind}-" for kind in "abposr"),
        ("xoxb-123456789012-1234567890123-EXAMPLEexample",),
    ),
    (
        "slack_webhook",
        r"(?<![A-Za-z0-9.-])hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>(?!\[REDACTED:)[A-Za-z0-9_/-]{16,})",
        ("hooks.slack.com/",),
        ("https://hooks.slack.com/services/T0EXAMPLE/B0EXAMPLE/EXAMPLEexample0123",),
    ),
    (
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}",
        ("aiza",),
        ("AIzaSyEXAMPLEexample0123456789abcdefghi",),
    ),
    (
        "google_oauth_token",
        rf"(?<![A-Za-z0-9_-])ya29\.{_TOKEN}{{20,}}",
        ("ya29.",),
        ("ya29.a0EXAMPLEexample0123456789abc",),
    ),
    (
        "stripe_key",
        r"(?<![A-Za-z0-9])(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[A-Za-z0-9]{24,})",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        ("sk_live_EXAMPLEexample0123", "whsec_EXAMPLEexample0123456789ab"),
    ),
    (
        "sendgrid_api_key",
        r"(?<![A-Za-z0-9_.-])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        ("sg.",),
        ("SG.EXAMPLEexample012345.EXAMPLEexample0123456789abcdefghijklmnopq",),
    ),
    (
        "npm_token",
        r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
        ("npm_",),
        ("npm_EXAMPLEexample0123456789abcdefABCDEF",),
    ),
    (
        "azure_storage_key",
        r"(?i)(?<![A-Za-z0-9])AccountKey=(?P<secret>(?!\[REDACTED:)[A-Za-z0-9+/]{20,}={0,2})",
        ("accountkey=",),
        ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=EXAMPLE+example/0123456789==",),
    ),
    (
        "azure_sas_signature",
        r"(?i)(?<![A-Za-z0-9_])sig=(?P<secret>(?!\[REDACTED:)[A-Za-z0-9%+/]{16,}(?:%3D|=){0,2})",
        ("sig=",),
        ("https://x.blob.core.windows.net/c?sv=2022-11-02&sig=EXAMPLE%2Bexample0123%3D",),
    ),
    (
        # An HTTP header line carrying credentials: the whole header value goes.
        # (Proxy-Authorization and Set-Cookie end with the same words.)
        "http_credentials",
        r"(?i)(?<![A-Za-z0-9])(?:authorization|cookie)[ \t]{0,16}:[ \t]*"
        r"(?P<secret>(?!\[REDACTED:)[^\r\n\"]+)",
        ("authorization", "cookie"),
        ("Authorization: Digest username=x", "Set-Cookie: sid=EXAMPLE; Path=/"),
    ),
    (
        # scheme://user:password@host (the user may be empty: redis://:password@host).
        "url_credentials",
        r"(?i)(?<=[a-z0-9+.-])://[^\s/:@?#\"]*:(?P<secret>(?!\[REDACTED:)[^\s/@?#\"]+)@",
        ("://",),
        ("postgres://admin:EXAMPLEpass@db:5432/app", "redis://:EXAMPLEpass@cache:6379"),
    ),
    (
        "bearer_token",
        r"(?i)(?<![A-Za-z0-9])bearer\s+(?P<secret>(?=[A-Za-z0-9._~+/=-]*[0-9])"
        r"[A-Za-z0-9._~+/=-]{8,})",
        ("bearer",),
        ("Bearer EXAMPLE0123example", "bearer\tEXAMPLE0123example"),
    ),
    (
        # Basic credentials wherever they appear (header lists, logs): base64 of user:pass.
        "basic_credentials",
        r"(?i)(?<![A-Za-z0-9])basic\s+(?P<secret>(?!\[REDACTED:)[A-Za-z0-9+/]{4,}={0,2})"
        r"(?![A-Za-z0-9+/=])",
        ("basic",),
        ("Basic dXNlcjpFWEFNUExF", '["Authorization", "Basic dXNlcjpFWEFNUExF"]'),
    ),
    (
        # Passwords on command lines: --password VALUE (--password=VALUE is an assignment).
        "cli_password",
        r"(?i)(?<![A-Za-z0-9_-])--(?:password|passwd|pass|pwd|token|secret|api-key)"
        r"[ \t]+" + _VALUE,
        ("--",),
        ("mysqldump --password EXAMPLEpass db", "tool --token 'EXAMPLE token'"),
    ),
    (
        "cli_password",
        r"(?<![A-Za-z0-9_-])(?i:mysql(?:dump|admin)?|mariadb)(?=[ \t])[^\n]*?"
        r"[ \t]-p(?P<secret>(?!\[REDACTED:)[^\s'\"-][^\s'\"]*)",
        ("mysql", "mariadb"),
        ("mysql -u root -pEXAMPLEpass app",),
    ),
    (
        "cli_password",
        r"(?i)(?<![A-Za-z0-9_-])sshpass[ \t]+-p[ \t]*(?P<secret>(?!\[REDACTED:)[^\s'\"]+)",
        ("sshpass",),
        ("sshpass -p EXAMPLEpass ssh host",),
    ),
    (
        "cli_password",
        r"(?<![A-Za-z0-9_-])(?i:curl)(?=[ \t])[^\n]*?[ \t](?:-u|-U|--user|--proxy-user)"
        r"(?:[ \t]+|=)?[\"']?[^\s:'\"]*:(?P<secret>(?!\[REDACTED:)[^\s'\"]+)",
        ("curl",),
        ("curl -u admin:EXAMPLEpass https://api.example.com",),
    ),
)

# The rule that finds "name: value" / "name=value" text, built from the key names.
ASSIGNMENT: Final = "secret_assignment"
# 40 characters of base64 mixing upper case, lower case and digits, alone.
AWS_SECRET: Final = "aws_secret_access_key"
_AWS_SECRET_FIND = (
    r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])"
    r"(?=[A-Za-z0-9/+]*[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_CHECKS: Final[dict[str, Callable[[str], bool]]] = {"basic_credentials": _basic_credentials}
# Rule.requires of each rule (see Rule); rules not named require nothing.
_REQUIRES: Final[dict[str, str]] = {
    "private_key": "-",
    "jwt": ".",
    "anthropic_api_key": "-",
    "openai_api_key": "-",
    "github_token": "_",
    "gitlab_token": "-",
    "huggingface_token": "_",
    "slack_token": "-",
    "slack_webhook": ".",
    "google_oauth_token": ".",
    "stripe_key": "_",
    "sendgrid_api_key": ".",
    "npm_token": "_",
    "azure_storage_key": "=",
    "azure_sas_signature": "=",
    "http_credentials": ":",
    "url_credentials": "@",
    "bearer_token": "0123456789",
    "cli_password": "-",
    ASSIGNMENT: ":=",
}
_INSIDE: Final[dict[str, tuple[str, ...]]] = {
    "jwt": ("eyJ",),
    "aws_access_key_id": ("AKIA", "ASIA"),
    "google_api_key": ("AIza",),
}
_REQUIRES.update({name: "A" for name in ("aws_access_key_id", "google_api_key")})
# Rule.token_run of the token rules (the fewest token characters in a row they match).
_TOKEN_RUNS: Final[dict[str, int]] = {
    "jwt": 15,
    "anthropic_api_key": 27,
    "openai_api_key": 23,
    "github_token": 33,
    "gitlab_token": 26,
    "huggingface_token": 33,
    "aws_access_key_id": 20,
    "slack_token": 15,
    "google_api_key": 39,
    "google_oauth_token": 20,
    "stripe_key": 18,
    "sendgrid_api_key": 16,
    "npm_token": 40,
}


BUILTIN_PATTERN_NAMES: Final[tuple[str, ...]] = (
    *dict.fromkeys(name for name, _, _, _ in _SPECS),
    ASSIGNMENT,
    AWS_SECRET,
)


def assignment_rule(names: Iterable[str]) -> Rule:
    """A sensitive name in free text (a number after it allowed: ``api_key_2``) followed
    by ':' or '=' (env dumps, query strings, logs, JSON embedded in a string): the value
    after it goes."""
    unique = sorted({name_in_text(name) for name in names}, key=len, reverse=True)
    keywords = tuple(sorted({key_words(name)[0] for name in names}))
    find = (
        rf"(?i)(?:{'|'.join(unique)})(?:[-_]?[0-9]{{1,{MAX_KEY_NUMBER}}})?(?![A-Za-z0-9])"
        rf"(?:\\?[\"'])?[ \t]{{0,16}}[:=][ \t]*{_VALUE}"
    )
    return Rule(
        ASSIGNMENT,
        re.compile(find),
        keywords,
        requires=_REQUIRES[ASSIGNMENT],
        anchor=":=",
        examples=(
            'password="correct horse battery staple"',
            "password\t: EXAMPLE",
            "Server=db;Uid=app;Pwd=EXAMPLE;",
            "OPENAI_API_KEY=EXAMPLE",
            '{"client_secret": "EXAMPLE"}',
        ),
    )


@functools.lru_cache(maxsize=1)
def _builtin_fixed() -> tuple[Rule, ...]:
    return tuple(
        Rule(
            name,
            re.compile(find),
            keywords,
            examples=examples,
            check=_CHECKS.get(name),
            requires=_REQUIRES.get(name, ""),
            inside=_INSIDE.get(name, ()),
            anchor=":" if name == "http_credentials" else "",
            token_run=_TOKEN_RUNS.get(name, 0),
        )
        for name, find, keywords, examples in _SPECS
    )


def aws_secret_rule() -> Rule:
    return Rule(
        AWS_SECRET,
        re.compile(_AWS_SECRET_FIND),
        shape=40,
        examples=("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",),
    )


def builtin_rules(names_in_text: Iterable[str], enabled: Iterable[str]) -> list[Rule]:
    """The built-in value rules switched on in ``enabled``, in the order they apply."""
    on = set(enabled)
    names = list(names_in_text)
    rules = [rule for rule in _builtin_fixed() if rule.name in on]
    if ASSIGNMENT in on and names:
        rules.append(assignment_rule(names))
    if AWS_SECRET in on:
        rules.append(aws_secret_rule())
    return rules


def user_rules(
    patterns: Mapping[str, str | re.Pattern[str]] | Iterable[str | re.Pattern[str]],
) -> list[Rule]:
    if isinstance(patterns, str | re.Pattern):
        patterns = (patterns,)
    items = (
        list(patterns.items())
        if isinstance(patterns, Mapping)
        else [(f"pattern_{i}", p) for i, p in enumerate(patterns, start=1)]
    )
    """The rules of ``Redactor(patterns=...)``, checked (ConfigError when one is wrong)."""
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
        result.append(Rule(name, compiled))
    return result
