"""A replay of an unchanged agent that handles secrets reproduces: its inputs hold the
recording's redaction markers, but not always under the same rule's name (a key
redacted under its parameter's name while recording comes back as the marker its
recorded output holds; a secret learned early in a recording is ``known_secret`` later,
where the replay, which never sees it, keeps the rule's marker). Markers are compared
as "a redacted value", whichever rule wrote them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sftrace import MatchMode, compare, load_bundle, record, replay_run, trace_tool
from sftrace._model.markers import masked, secrets_at_markers, secrets_near_markers, unmarked
from sftrace._model.normalize import normalize

KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
TAIL = {"text": "; check my usage"}


@trace_tool
def vault_get(name: str) -> str:
    return KEY


@trace_tool
def list_models(api_key: str) -> list[str]:
    return ["gpt-4o"]


@trace_tool
def summarize(text: str) -> str:
    return "summary"


def vault_agent() -> list[str]:
    return list_models(api_key=vault_get("openai"))


def prompt_agent(task: str) -> str:
    list_models(api_key=KEY)  # the run learns the key here
    return summarize(task + TAIL["text"])


@pytest.mark.parametrize("match", ["strict", "unordered"])
def test_a_key_passed_on_from_a_tools_output_replays(tmp_path: Path, match: MatchMode) -> None:
    with record("vault", output=tmp_path / "v.sftrace") as session:
        session.set_output(vault_agent())
    bundle = load_bundle(tmp_path / "v.sftrace")
    assert KEY not in (tmp_path / "v.sftrace" / "spans.jsonl").read_text()
    assert bundle.calls[1].input == {"api_key": "[REDACTED:sensitive_key]"}
    result = replay_run(bundle, vault_agent, match=match)
    assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)
    assert [m.tier for m in result.matched] == ["exact", "exact"]
    assert compare(bundle, result).passed


@pytest.mark.parametrize("match", ["strict", "unordered"])
def test_a_key_in_the_run_input_replays(tmp_path: Path, match: MatchMode) -> None:
    task = f"My OpenAI key is {KEY}"
    with record("prompt", output=tmp_path / "p.sftrace", run_input=task) as session:
        session.set_output(prompt_agent(task))
    bundle = load_bundle(tmp_path / "p.sftrace")
    assert bundle.calls[1].input == {
        "text": "My OpenAI key is [REDACTED:known_secret]; check my usage"
    }
    result = replay_run(bundle, prompt_agent, match=match)
    assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)
    assert compare(bundle, result).passed
    TAIL["text"] = "; check my bill"
    try:
        changed = replay_run(bundle, prompt_agent, match=match)
    finally:
        TAIL["text"] = "; check my usage"
    assert changed.status == "diverged"  # what is not a marker still counts


PASSWORD = "Zq9vX2mP7kLw4RtY"  # no known token shape: only its key gives it away
ANSWER = {"text": "Answer: what?"}


@trace_tool
def authenticate(user: str, password: str) -> dict[str, bool]:
    return {"ok": True}


@trace_tool
def connect(host: str) -> dict[str, str]:
    authenticate("svc", password=PASSWORD)  # a tool calling a tool: covered on replay
    return {"connected": host}


def nested_secret_agent(task: str) -> str:
    connected = connect("db.internal")
    summarize(f"Connected to {connected['connected']} as svc/{PASSWORD}. {ANSWER['text']}")
    return summarize(f"again as svc/{PASSWORD}")


@pytest.mark.parametrize("match", ["strict", "unordered"])
def test_a_secret_learned_inside_a_covered_call_replays_and_stays_redacted(
    tmp_path: Path, match: MatchMode
) -> None:
    """The recording learned the password in ``authenticate``, inside ``connect``; the
    replay answers ``connect`` from the recording, so it never sees that call and meets
    the password unredacted in the prompt. It matches there (the recording has the
    known-secret marker), learns it, and redacts it from then on: the unchanged agent
    reproduces, and neither the saved replay nor a report holds the password."""
    with record("nested", output=tmp_path / "n.sftrace", run_input="q") as session:
        session.set_output(nested_secret_agent("q"))
    recorded = tmp_path / "n.sftrace"
    assert PASSWORD not in (recorded / "spans.jsonl").read_text()
    result = replay_run(recorded, nested_secret_agent, match=match, save=tmp_path / "r.sftrace")
    assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)
    assert [m.tier for m in result.matched] == ["exact", "exact", "exact"]
    assert compare(recorded, result).passed
    assert PASSWORD not in (tmp_path / "r.sftrace" / "spans.jsonl").read_text()
    assert [c.input for c in load_bundle(tmp_path / "r.sftrace").calls][-1] == {
        "text": "again as svc/[REDACTED:known_secret]"
    }
    ANSWER["text"] = "Answer: why?"
    try:
        changed = replay_run(recorded, nested_secret_agent, match=match)
    finally:
        ANSWER["text"] = "Answer: what?"
    assert changed.status == "diverged"  # the rest of the text still counts
    assert PASSWORD not in str(changed.divergence)


def test_secrets_at_markers() -> None:
    recorded = '{"p":"as svc/[REDACTED:known_secret]. ok","k":"[REDACTED:sensitive_key]"}'
    assert secrets_at_markers(recorded, '{"p":"as svc/s3cr3t!x. ok","k":"[REDACTED:x]"}') == (
        "s3cr3t!x",
    )
    assert secrets_at_markers(recorded, '{"p":"as svc/short. ok","k":"[REDACTED:x]"}') is None
    assert secrets_at_markers(recorded, '{"p":"as svc/s3cr3t!x. no","k":"[REDACTED:x]"}') is None
    near = secrets_near_markers(recorded, '{"p":"as svc/s3cr3t!x! ok","k":"[REDACTED:x]"}')
    assert near == ("s3cr3t!x! ok",)  # changed right after the secret: all of it is kept out
    shown = masked('{"p":"as svc/s3cr3t!x! ok"}', near)
    assert shown == '{"p":"as svc/[REDACTED:known_secret]"}'
    near = secrets_near_markers(recorded, '{"p":"as svc/s3cr3t!x. nope","k":"[REDACTED:x]"}')
    assert near == ("s3cr3t!x",)
    # a hole never spans a JSON string's end
    assert secrets_at_markers('{"p":"[REDACTED:known_secret]"}', '{"p":"abcdef","q":"x"}') is None
    assert secrets_at_markers('{"p":"plain"}', '{"p":"plain"}') is None


def test_unmarked() -> None:
    assert unmarked('{"k":"[REDACTED:openai_api_key]"}') == '{"k":"[REDACTED:]"}'
    assert unmarked("a [REDACTED:x] b [REDACTED:known_secret]") == "a [REDACTED:] b [REDACTED:]"
    # a secret streamed in chunks is redacted piece by piece: adjacent markers are one
    assert unmarked("key [REDACTED:a][REDACTED:b][REDACTED:c]!") == "key [REDACTED:]!"
    assert unmarked("[REDACTED:a] [REDACTED:b]") == "[REDACTED:] [REDACTED:]"
    text = "no marker here"
    assert unmarked(text) is text
    assert normalize({"[REDACTED:a]": " [REDACTED:b] "}) == {"[REDACTED:]": "[REDACTED:]"}


GITHUB = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"


@trace_tool
def call_api(url: str, headers: dict[str, str]) -> dict[str, bool]:
    return {"ok": True}


def header_agent(task: str) -> str:
    from sftrace import llm_request

    reply = llm_request(
        provider="fake",
        model="m-1",
        input={"q": task},
        call=lambda: {"text": f"sure, token {GITHUB} for x"},
    )
    call_api("https://api.github.com", headers={"Authorization": f"token {GITHUB}"})
    return str(reply["text"])


def test_an_authorization_value_is_learned_without_its_scheme_word(tmp_path: Path) -> None:
    """The header's value is learned as the token alone: the run output (redacted when
    the run ends, the token known by then) keeps "token" as the reply did, and the replay,
    whose output holds the reply's marker, reproduces (markers of any rule are alike)."""
    with record("header", output=tmp_path / "h.sftrace", run_input="q") as session:
        session.set_output(header_agent("q"))
    bundle = load_bundle(tmp_path / "h.sftrace")
    assert GITHUB not in (tmp_path / "h.sftrace" / "spans.jsonl").read_text()
    assert bundle.output == "sure, token [REDACTED:known_secret] for x"
    result = replay_run(bundle, header_agent)
    assert result.output == "sure, token [REDACTED:github_token] for x"
    assert (result.status, result.divergence, result.reproduced) == ("completed", None, True)
    assert compare(bundle, result).passed
