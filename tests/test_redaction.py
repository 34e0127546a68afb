"""Redaction: secrets never reach a span, a bundle file or an exporter."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import secret_corpus as corpus
import sftrace
from otlp_sink import OtlpSink
from sftrace import (
    ConfigError,
    Redactor,
    _internal,
    allm_request,
    configure,
    llm_request,
    load_bundle,
    record,
    replay_run,
    trace_tool,
)
from sftrace._model.attributes import REDACTIONS
from sftrace._model.markers import unmarked
from sftrace._record.redaction import KnownSecrets


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    """Production behaviour: internal failures are logged once, never raised."""
    monkeypatch.setenv("SFTRACE_STRICT", "0")
    _internal._seen.clear()


def _every_byte_under(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def _exported(spans: InMemorySpanExporter) -> str:
    return "\n".join(span.to_json() for span in spans.get_finished_spans())


# --- the rules ------------------------------------------------------------------------


@pytest.mark.parametrize("secret", corpus.SHAPED, ids=lambda s: f"{s.rule}:{s.text[:8]}")
@pytest.mark.parametrize(
    "context",
    ["{}", "prefix {} suffix", "line one\n{}\nline three", "'{}'", "key={}&x=1", "({})"],
)
def test_shaped_secret_is_redacted_in_any_context(secret: corpus.Secret, context: str) -> None:
    """Each built-in value pattern finds its secret wherever it sits in a text."""
    text, found = Redactor().redact_text(context.format(secret.text))
    assert secret.fingerprint not in text
    assert secret.rule in {redaction.rule for redaction in found}
    assert f"[REDACTED:{secret.rule}]" in text or secret.rule == "bearer_token"


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=100 and token count 5",
        "The bearer of bad news arrived",
        "sha1 3f786850e387550fdab836ed7e6dc881de23001b",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "see https://example.com/path/to/page?q=lisbon",
        "keyboard: 5 keys, a monkey; task-abcdefghijklmnopqrstuvwxyz",
        "Enter your password:\nthen press OK",
        '{"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}',
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Look-alikes of secrets (token counts, hashes, UUIDs, plain URLs) are not redacted."""
    assert Redactor().redact_text(text) == (text, [])
    assert Redactor().redact_json(orjson.dumps(text).decode())[1] == []


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "passwd",
        "apiKey",
        "API_KEY",
        "x-api-key",
        "openai_api_key",
        "Authorization",
        "Proxy-Authorization",
        "set-cookie",
        "Cookie",
        "client_secret",
        "refresh_token",
        "access-token",
        "auth_token",
        "sessionToken",
        "privateKey",
        "private_key",
        "credentials",
        "aws_secret_access_key",
    ],
)
def test_sensitive_keys_match_in_any_case_and_separator_style(key: str) -> None:
    """The whole value of a member with a sensitive name is replaced, and where is noted."""
    value = {"outer": {key: "hunter2-value", "other": "kept"}}
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    redacted, found = Redactor().redact_json(text)
    assert orjson.loads(redacted)["outer"] == {key: "[REDACTED:sensitive_key]", "other": "kept"}
    assert [(r.rule, r.path.endswith(key) or key in r.path) for r in found] == [
        ("sensitive_key", True)
    ]


@pytest.mark.parametrize(
    "key",
    ["max_tokens", "input_tokens", "token_count", "keyboard", "secretary", "author", "cookies_ok"],
)
def test_ordinary_keys_are_left_alone(key: str) -> None:
    """Keys that merely contain a sensitive word keep their value."""
    text = orjson.dumps({key: "value-123"}).decode()
    assert Redactor().redact_json(text) == (text, [])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "reset my password=Tr0ub4dor&3-horse please",
            "reset my password=[REDACTED:secret_assignment] please",
        ),
        (
            "https://x.example/login?password=Tr0ub4dor&user=ann&pw=s3cr3t&next=/",
            "https://x.example/login?password=[REDACTED:secret_assignment]&user=ann"
            "&pw=[REDACTED:secret_assignment]&next=/",
        ),
        ("note: pw=Sup3rS3cret99, call me", "note: pw=[REDACTED:secret_assignment], call me"),
    ],
)
def test_a_bare_value_ends_at_an_ampersand_only_before_the_next_parameter(
    text: str, expected: str
) -> None:
    """An "&" inside a password is part of it (only "&name=" starts a query string's
    next parameter), and ``pw`` names a password too."""
    assert Redactor().redact_text(text)[0] == expected
    assert (
        Redactor().redact_json(orjson.dumps({"note": text}).decode())[0]
        == orjson.dumps({"note": expected}).decode()
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("login(password=x99secretA)", "login(password=[REDACTED:secret_assignment])"),
        ("(pw=x99secretA). next", "(pw=[REDACTED:secret_assignment]). next"),
        ("token=ab)cd)ef rest", "token=[REDACTED:secret_assignment] rest"),
        ("password=Tr0ub)4dor rest", "password=[REDACTED:secret_assignment] rest"),
    ],
)
def test_a_bare_value_ends_at_a_closing_parenthesis_that_closes_it(
    text: str, expected: str
) -> None:
    """ "(password=x99secretA)": the ')' closes the parenthesis, not the password. Taking it
    made the rule's text differ by one character from the same secret redacted as known
    (``known_secret`` leaves the ')'), so an unchanged agent diverged where one run had
    learned the secret and the other had not. A ')' inside the value stays in it."""
    assert Redactor().redact_text(text)[0] == expected


def test_a_secret_in_parentheses_is_redacted_alike_by_its_rule_and_as_known() -> None:
    by_rule = Redactor().redact_text("login(password=x99secretA)")[0]
    known = KnownSecrets()
    known.add("x99secretA")
    as_known = Redactor().redact_text("login(password=x99secretA)", known=known)[0]
    assert by_rule == "login(password=[REDACTED:secret_assignment])"
    assert unmarked(as_known) == unmarked(by_rule)


def test_empty_and_flag_values_of_sensitive_keys_are_kept() -> None:
    """null, "", false and empty containers under a sensitive key say nothing secret."""
    value = {"password": None, "token": "", "secret": False, "credentials": {}}
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    assert Redactor().redact_json(text) == (text, [])


def test_secret_used_as_a_key_is_redacted_with_its_path() -> None:
    """A secret can be a dict key: the key is replaced and the recorded path holds no secret."""
    value = {corpus.GITHUB_PAT.text: {"scopes": ["repo"]}}
    redacted, found = Redactor().redact(value)
    assert redacted == {"[REDACTED:github_token]": {"scopes": ["repo"]}}
    assert all(corpus.GITHUB_PAT.fingerprint not in r.path for r in found)


def test_redaction_is_idempotent() -> None:
    """Redacting an already redacted value changes nothing and records nothing more."""
    redactor = Redactor()
    value = {"api_key": "abc", "note": f"use {corpus.OPENAI.text} or password=hunter2"}
    once = redactor.redact_json(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())[0]
    assert redactor.redact_json(once) == (once, [])


def test_json_embedded_in_a_string_is_redacted() -> None:
    """Secrets in JSON text inside a string value (a tool returning raw JSON) are found."""
    inner = orjson.dumps({"api_key": "plain-words-secret", "user": "bob"}).decode()
    redacted, found = Redactor().redact_json(orjson.dumps({"body": inner}).decode())
    assert "plain-words-secret" not in redacted
    assert [r.rule for r in found] == ["secret_assignment"]


# --- user rules --------------------------------------------------------------------------


def test_user_keys_patterns_and_callback() -> None:
    """Users add key names, regexes (redacting a `secret` group) and a callable."""
    redactor = Redactor(
        keys=["ssn", "card number"],
        patterns={"employee_id": r"EMP-\d{6}", "ticket": r"ticket #(?P<secret>\d+)"},
        callback=lambda path, value: "vip" if value == "Ada Lovelace" else None,
    )
    value = {
        "ssn": "078-05-1120",
        "billing": {"cardNumber": 4111111111111111},
        "note": "EMP-123456 opened ticket #9981",
        "name": "Ada Lovelace",
        "other": "kept",
    }
    redacted, found = redactor.redact(value)
    assert redacted == {
        "ssn": "[REDACTED:sensitive_key]",
        "billing": {"cardNumber": "[REDACTED:sensitive_key]"},
        "note": "[REDACTED:employee_id] opened ticket #[REDACTED:ticket]",
        "name": "[REDACTED:vip]",
        "other": "kept",
    }
    assert {(r.path, r.rule) for r in found} == {
        ("$.ssn", "sensitive_key"),
        ("$.billing.cardNumber", "sensitive_key"),
        ("$.note", "employee_id"),
        ("$.note", "ticket"),
        ("$.name", "vip"),
    }


def test_glued_user_key_matches_separated_spelling() -> None:
    """A user key written glued ("apitoken") also matches "api_token" in JSON text."""
    redactor = Redactor(keys=["internalref"], builtins=False)
    text = orjson.dumps({"internal_ref": "x-1"}).decode()
    assert orjson.loads(redactor.redact_json(text)[0]) == {
        "internal_ref": "[REDACTED:sensitive_key]"
    }


def test_builtins_can_be_switched_off_whole_or_by_name() -> None:
    """builtins=False keeps everything; disable= switches off single built-in rules."""
    value = {"password": "pw", "note": corpus.OPENAI.text}
    assert Redactor(builtins=False).redact(value) == (value, [])
    redacted, _ = Redactor(disable=["openai_api_key"]).redact(value)
    assert redacted == {"password": "[REDACTED:sensitive_key]", "note": corpus.OPENAI.text}
    redacted, _ = Redactor(disable=["sensitive_key"]).redact(value)
    assert redacted == {"password": "pw", "note": "[REDACTED:openai_api_key]"}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"disable": ["no_such_rule"]}, "unknown built-in rule"),
        ({"patterns": {"bad": "("}}, "not a valid regular expression"),
        ({"patterns": {"everything": ".*"}}, "matches the empty string"),
        ({"keys": ["--"]}, "letters or digits"),
        ({"callback": "not callable"}, "must be callable"),
    ],
)
def test_invalid_rules_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    """Bad redaction rules raise ConfigError saying what is wrong."""
    with pytest.raises(ConfigError, match=fragment):
        Redactor(**kwargs)


def test_configure_rejects_what_is_not_a_redactor() -> None:
    """configure(redaction=...) takes a Redactor only."""
    with pytest.raises(ConfigError, match=r"sftrace\.Redactor"):
        configure(redaction={"keys": ["x"]})  # type: ignore[arg-type]


def test_failing_callback_raises_under_tests() -> None:
    """A callback that raises is a bug to find: strict mode raises it."""

    def broken(path: str, value: Any) -> str | None:
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        Redactor(callback=broken).redact_json('{"a":"b"}')


@pytest.mark.usefixtures("production")
def test_failing_callback_fails_closed_in_production(caplog: pytest.LogCaptureFixture) -> None:
    """In production a raising callback is logged once and the value is dropped, not kept."""

    def broken(path: str, value: Any) -> str | None:
        raise RuntimeError("callback bug")

    redactor = Redactor(callback=broken)
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        first = redactor.redact_json('{"a":"secret-ish"}')
        redactor.redact_json('{"b":"again"}')
    assert first == (
        '{"a":"[REDACTED:redaction_failed]"}',
        [sftrace.Redaction("$.a", "redaction_failed")],
    )
    assert len([r for r in caplog.records if "callback bug" in r.getMessage()]) == 1


# --- the fast path never misses ------------------------------------------------------------

_names = st.sampled_from(
    ["password", "apiKey", "x-api-key", "token", "note", "content", "max_tokens", "Cookie", "id"]
)
_fragments = st.sampled_from(
    [s.text for s in corpus.SHAPED]
    + ["password=hunter2", "Authorization: Basic dXNlcjpw", "api_key: 'abc'", "plain", " ", "\n"]
)
_free_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
_texts = st.lists(st.one_of(_fragments, _free_text), max_size=4).map("".join)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), _texts),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_names | _texts, children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json)
def test_cheap_check_never_skips_a_value_the_walk_would_redact(value: Any) -> None:
    """Whenever walking a value redacts something, the cheap check on its JSON said so."""
    redactor = Redactor()
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    expected, found = redactor.redact(orjson.loads(text))
    if found:
        assert redactor.suspicious(text)
    redacted, _ = redactor.redact_json(text)
    assert orjson.loads(redacted) == expected


# --- end to end: nothing reaches a file or an exporter ------------------------------------


class GatewayError(Exception):
    """A dependency's exception carrying a credential in its message."""


@trace_tool
def login(username: str, password: str) -> dict[str, Any]:
    return {
        "access_token": corpus.JWT.text,
        "refresh_token": corpus.PASSWORD + "-refresh",
        "motd": f"welcome; your backup key: {corpus.AWS_SECRET.text}",
    }


@trace_tool
def call_api(url: str, headers: dict[str, str]) -> str:
    return f"HTTP/1.1 200 OK\nSet-Cookie: {corpus.SESSION_COOKIE}\n\n{corpus.PEM.text}"


@trace_tool
def deploy(target: str) -> None:
    try:
        raise KeyError(f"no credentials for {corpus.AWS_ID.text}")
    except KeyError as exc:
        raise GatewayError(f"deploy failed, token {corpus.SLACK.text} rejected") from exc


@trace_tool
async def fetch_repo(name: str, token: str) -> dict[str, str]:
    return {"clone_url": f"https://x-access-token:{corpus.GITHUB_APP.text}@github.com/{name}"}


def _secret_agent(session: sftrace.RecordingSession, task: dict[str, Any]) -> dict[str, Any]:
    """An agent leaking every kind of secret through every recorded channel."""
    session_key = "state"
    token = login("ada", corpus.PASSWORD)["access_token"]
    call_api(
        corpus.URL.text,
        {"Authorization": corpus.BEARER.text, "X-Api-Key": corpus.GOOGLE.text},
    )
    llm_request(
        provider="openai",
        model="gpt-4o",
        input={"messages": [{"role": "user", "content": f"key {corpus.OPENAI.text} ok?"}]},
        call=lambda: {
            "choices": [{"message": {"content": f"try {corpus.ANTHROPIC.text}"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3},
        },
    )
    asyncio.run(fetch_repo("acme/app", corpus.GITHUB_PAT.text))

    async def ask() -> Any:
        return await allm_request(
            provider="anthropic",
            model="claude",
            input={"system": f"stripe: {corpus.STRIPE.text}"},
            call=lambda: _async_value({"text": corpus.STRIPE_RESTRICTED.text}),
        )

    asyncio.run(ask())
    with session.llm_call(model="m", input={"prompt": corpus.OPENAI_LEGACY.text}) as handle:
        handle.set_output({"text": corpus.AWS_TEMP_ID.text})
    session.record_state_change(
        key=session_key, before={"cookie": corpus.SESSION_COOKIE}, after={"jwt": token}
    )
    with contextlib.suppress(GatewayError):
        deploy("prod")
    return {"summary": f"done with {corpus.GITHUB_FINE.text}"}


async def _async_value(value: Any) -> Any:
    return value


def _record_leaky_run(path: Path) -> None:
    task = {"goal": "deploy", "stripe_key": corpus.STRIPE.text, "db": corpus.URL.text}
    with record(
        "leaky",
        output=path,
        run_input=task,
        metadata={"deploy_token": corpus.PASSWORD, "owner": "ada"},
    ) as session:
        session.set_output(_secret_agent(session, task))
        deploy("again")


def test_no_secret_reaches_any_bundle_byte_or_any_exported_span(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """Secrets in tool and LLM inputs and outputs, run input/output, metadata, state
    changes and errors appear in no file of the bundle and in no exported span."""
    with pytest.raises(GatewayError):
        _record_leaky_run(tmp_path / "traces" / "leaky.sftrace")
    files = _every_byte_under(tmp_path / "traces")
    exported = _exported(spans)
    assert len(spans.get_finished_spans()) == 9
    for fingerprint in corpus.fingerprints():
        assert fingerprint.encode() not in files, fingerprint
        assert fingerprint not in exported, fingerprint

    bundle = load_bundle(tmp_path / "traces" / "leaky.sftrace", verify_integrity=True)
    assert bundle.status == "failed"
    assert bundle.failure is not None
    assert bundle.failure.message == "deploy failed, token [REDACTED:slack_token] rejected"
    fields = {(r["seq"], r["field"]) for r in bundle.redactions}
    assert {(0, "run.input"), (0, "run.metadata"), (0, "run.output"), (0, "state.before")} <= fields
    assert {(0, "state.after"), (0, "error.message"), (0, "error.stacktrace")} <= fields
    assert {call.seq for call in bundle.calls} <= {seq for seq, _ in fields}
    assert all(
        set(r) == {"seq", "field", "path", "rule"} | ({"key"} & set(r)) for r in bundle.redactions
    )
    login_call = bundle.calls[0]
    assert login_call.input == {"password": "[REDACTED:sensitive_key]", "username": "ada"}
    redactions = orjson.loads(login_call.attributes[REDACTIONS])
    assert sorted(redactions, key=lambda r: (r["field"], r["path"])) == [
        {"field": "input", "path": "$.password", "rule": "sensitive_key"},
        {"field": "output", "path": "$.access_token", "rule": "sensitive_key"},
        {"field": "output", "path": "$.motd", "rule": "aws_secret_access_key"},
        {"field": "output", "path": "$.refresh_token", "rule": "sensitive_key"},
    ]
    failed = bundle.calls[-1]
    assert failed.error is not None
    assert failed.error.message == "deploy failed, token [REDACTED:slack_token] rejected"


@pytest.mark.otlp
def test_no_secret_reaches_a_real_otlp_receiver(tmp_path: Path) -> None:
    """What a collector receives over OTLP/HTTP (protobuf) holds none of the secrets."""
    sink = OtlpSink()
    sink.start_http()
    provider = TracerProvider()
    try:
        assert sink._http is not None
        configure(
            tracer_provider=provider,
            otlp_endpoint=f"http://127.0.0.1:{sink._http.server_address[1]}",
        )
        with pytest.raises(GatewayError):
            _record_leaky_run(tmp_path / "otlp.sftrace")
        provider.force_flush()
        trace_id = load_bundle(tmp_path / "otlp.sftrace").manifest.trace_id
        received = sink.wait_for_trace(trace_id, 9)
        assert len(received) == 9
        wire = b"".join(request.SerializeToString() for request in sink.requests)
        as_json = b"".join(sink.file_lines())
        for fingerprint in corpus.fingerprints():
            assert fingerprint.encode() not in wire, fingerprint
            assert fingerprint.encode() not in as_json, fingerprint
        assert b"[REDACTED:openai_api_key]" in wire
    finally:
        provider.shutdown()
        sink.stop()


def test_exception_event_message_and_stacktrace_are_redacted(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """The exception event sftrace writes carries the redacted message and stack trace."""
    with pytest.raises(GatewayError), record("x", output=tmp_path / "x.sftrace"):
        deploy("prod")
    events = [
        event
        for span in spans.get_finished_spans()
        for event in span.events
        if event.name == "exception"
    ]
    assert len(events) == 2  # the tool's and the run's
    for event in events:
        attributes = dict(event.attributes or {})
        assert attributes["exception.type"] == f"{__name__}.GatewayError"
        assert "[REDACTED:slack_token]" in str(attributes["exception.message"])
        stack = str(attributes["exception.stacktrace"])
        assert "Traceback" in stack
        assert "[REDACTED:aws_access_key_id]" in stack  # the chained cause, too
        assert corpus.SLACK.fingerprint not in stack
        assert corpus.AWS_ID.fingerprint not in stack


@trace_tool
def charge(card_token: str, amount: int) -> dict[str, Any]:
    return {"charge_id": "ch_1", "receipt_secret": corpus.PASSWORD, "amount": amount}


def _paying_agent(amount: int) -> dict[str, Any]:
    result = charge(corpus.STRIPE.text, amount)
    return {"charged": result["amount"], "receipt": result["receipt_secret"]}


def test_replay_matches_redacted_inputs(tmp_path: Path) -> None:
    """A run recorded with a secret in a tool input replays: both sides compare the
    redacted forms."""
    path = tmp_path / "pay.sftrace"
    with record("pay", output=path, run_input=40) as session:
        session.set_output(_paying_agent(40))
    bundle = load_bundle(path)
    assert bundle.calls[0].input["card_token"] == "[REDACTED:sensitive_key]"
    result = replay_run(path, _paying_agent)
    assert result.status == "completed", result.divergence
    assert [m.action for m in result.matched] == ["substituted"]
    # The replay answers with the redacted recording; the recorded output had the same
    # receipt, recognised as a secret the run had already seen.
    assert result.return_value == {"charged": 40, "receipt": "[REDACTED:sensitive_key]"}
    assert bundle.output == {"charged": 40, "receipt": "[REDACTED:known_secret]"}


@trace_tool
def connect(host: str, password: str) -> None:
    raise ConnectionError(f"{host} refused the login {password!r}")


@trace_tool
def audit(entry: str) -> str:
    return entry


def test_secret_seen_under_a_key_is_redacted_where_it_shows_up_again(tmp_path: Path) -> None:
    """A value redacted by its key is also redacted when the run later shows it without
    one (in an error message, another tool's input)."""
    with record("db", output=tmp_path / "db.sftrace"):
        with pytest.raises(ConnectionError):
            connect("db.internal", corpus.PASSWORD)
        audit(f"retrying with {corpus.PASSWORD}")
    assert corpus.PASSWORD.encode() not in _every_byte_under(tmp_path)
    connect_call, audit_call = load_bundle(tmp_path / "db.sftrace").calls
    assert connect_call.error is not None
    assert connect_call.error.message == "db.internal refused the login '[REDACTED:known_secret]'"
    assert audit_call.input == {"entry": "retrying with [REDACTED:known_secret]"}
    assert audit_call.output == "retrying with [REDACTED:known_secret]"


def test_configure_sets_the_rules_for_new_runs(tmp_path: Path) -> None:
    """configure(redaction=...) applies to the runs that follow; configuring again without
    it brings back the built-in rules."""
    configure(
        tracer_provider=sftrace._record.config.get_state().provider,
        redaction=Redactor(keys=["amount"], builtins=False),
    )
    with record("pay", output=tmp_path / "a.sftrace"):
        charge(corpus.STRIPE.text, 12)
    call = load_bundle(tmp_path / "a.sftrace").calls[0]
    assert call.input == {"amount": "[REDACTED:sensitive_key]", "card_token": corpus.STRIPE.text}
    configure(tracer_provider=sftrace._record.config.get_state().provider)
    with record("pay", output=tmp_path / "b.sftrace"):
        charge(corpus.STRIPE.text, 12)
    call = load_bundle(tmp_path / "b.sftrace").calls[0]
    assert call.input == {"amount": 12, "card_token": "[REDACTED:sensitive_key]"}


# --- no gaps: values the rules used to miss ---------------------------------------------


@pytest.mark.parametrize(
    ("password", "fragment"),
    [('pa"ss\\wordXY-9', "wordXY-9"), (12345678, "12345678")],
    ids=["quote-backslash", "number"],
)
def test_any_value_under_a_sensitive_key_is_remembered(
    tmp_path: Path, spans: InMemorySpanExporter, password: Any, fragment: str
) -> None:
    """Passwords with quotes or backslashes, and numbers, are known secrets too: their
    echoes (as they are, or as their repr) in error messages, stack traces and span
    status are redacted."""
    with record("db", output=tmp_path / "db.sftrace"), pytest.raises(ConnectionError):
        connect("db.internal", password)
    assert fragment.encode() not in _every_byte_under(tmp_path)
    assert fragment not in _exported(spans)
    (call,) = load_bundle(tmp_path / "db.sftrace").calls
    assert call.error is not None
    assert "[REDACTED:known_secret]" in call.error.message
    statuses = [span.status.description or "" for span in spans.get_finished_spans()]
    assert any("[REDACTED:known_secret]" in status for status in statuses)


@trace_tool
def post_raw(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nSet-Cookie: " + corpus.SESSION_COOKIE.encode() + b"\r\n\r\n"


def test_bytes_are_redacted_before_they_are_base64_encoded(tmp_path: Path) -> None:
    """A raw request body is stored as base64 of its redacted text, not of the key."""
    body = f"POST /v1 HTTP/1.1\r\nAuthorization: Bearer {corpus.OPENAI.text}\r\n\r\n{{}}"
    with record("raw", output=tmp_path / "raw.sftrace"):
        post_raw(body.encode())
    (call,) = load_bundle(tmp_path / "raw.sftrace").calls
    sent = base64.b64decode(call.input["body"]).decode()
    received = base64.b64decode(call.output).decode()
    assert corpus.OPENAI.fingerprint not in sent
    assert sent.startswith("POST /v1 HTTP/1.1\r\nAuthorization: [REDACTED:")
    assert corpus.SESSION_COOKIE not in received
    assert base64.b64decode(base64.b64encode(b"\xff\xfe binary")) == b"\xff\xfe binary"


def test_binary_bytes_are_recorded_as_they_are(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 text are encoded unchanged."""
    data = bytes(range(256))
    with record("raw", output=tmp_path / "bin.sftrace"):
        post_raw(data)
    (call,) = load_bundle(tmp_path / "bin.sftrace").calls
    assert base64.b64decode(call.input["body"]) == data


def test_state_change_keys_go_through_the_key_rules(tmp_path: Path) -> None:
    """record_state_change(key="openai_api_key", ...) redacts the value whole."""
    with record("state", output=tmp_path / "s.sftrace") as session:
        session.record_state_change(key="openai_api_key", before=None, after="plain-words-key")
        session.record_state_change(key="note", before=None, after="uses plain-words-key")
    assert b"plain-words-key" not in _every_byte_under(tmp_path)
    bundle = load_bundle(tmp_path / "s.sftrace")
    fields = {(r["field"], r.get("key"), r["rule"]) for r in bundle.redactions}
    assert ("state.after", "openai_api_key", "sensitive_key") in fields
    assert ("state.after", "note", "known_secret") in fields


def test_a_secret_split_across_streamed_chunks_is_redacted_in_every_chunk() -> None:
    """Deltas that only together hold a key have their parts replaced."""
    key = corpus.ANTHROPIC.text
    pieces = ["here: ", key[:10], key[10:40], key[40:] + " done"]
    chunks = [{"choices": [{"delta": {"content": piece}}], "id": "c1"} for piece in pieces]
    redacted, found = Redactor().redact_stream(chunks)
    contents = [chunk["choices"][0]["delta"]["content"] for chunk in redacted]
    assert contents == [
        "here: ",
        "[REDACTED:anthropic_api_key]",
        "[REDACTED:anthropic_api_key]",
        "[REDACTED:anthropic_api_key] done",
    ]
    assert [r.path for r in found] == [f"$.chunks[{i}].choices[0].delta.content" for i in (1, 2, 3)]
    assert chunks[1]["choices"][0]["delta"]["content"] == key[:10]  # the input is kept


def test_configure_again_keeps_the_compiled_builtin_rules() -> None:
    """The built-in rules take ~50 ms to compile: configure() without ``redaction`` (a
    service configuring again, a test per case) goes back to the same compiled rules
    instead of compiling them for the next run; a Redactor of one's own still wins."""
    from sftrace._record.config import get_state
    from sftrace._record.redaction import current_redactor

    builtin = current_redactor()
    provider = get_state().provider
    sftrace.configure(tracer_provider=provider)
    assert current_redactor() is builtin
    own = sftrace.Redactor(keys=["pin"])
    sftrace.configure(tracer_provider=provider, redaction=own)
    assert current_redactor() is own
    sftrace.configure(tracer_provider=provider)
    assert current_redactor() is builtin
