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
from sftrace._model.markers import unmarked
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


def test_unmarked() -> None:
    assert unmarked('{"k":"[REDACTED:openai_api_key]"}') == '{"k":"[REDACTED:]"}'
    assert unmarked("a [REDACTED:x] b [REDACTED:known_secret]") == "a [REDACTED:] b [REDACTED:]"
    text = "no marker here"
    assert unmarked(text) is text
    assert normalize({"[REDACTED:a]": " [REDACTED:b] "}) == {"[REDACTED:]": "[REDACTED:]"}
