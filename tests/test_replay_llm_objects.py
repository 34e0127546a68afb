"""An ``llm_request`` whose ``call`` returns an object (an SDK's pydantic model, a
dataclass) replays as that object: its class is recorded (``sftrace.output.type``) and
rebuilt from the recorded JSON when a module already imported holds it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pydantic
import pytest

from sftrace import (
    ConfigError,
    allm_request,
    fork,
    llm_request,
    load_bundle,
    record,
    replay,
    replay_run,
)
from sftrace._internal import _seen
from sftrace._model import attributes as A

SPANS_FILE = "spans.jsonl"


class Message(pydantic.BaseModel):
    role: str
    content: str


class Choice(pydantic.BaseModel):
    index: int
    message: Message


class Completion(pydantic.BaseModel):
    """An SDK-like response (as an ``openai`` ``ChatCompletion``)."""

    model: str
    choices: list[Choice]
    usage: dict[str, int]


@dataclasses.dataclass
class Verdict:
    label: str
    score: float
    raw: bytes  # recorded as base64 text: the tools' restorer decodes it


@dataclasses.dataclass
class Reply:
    verdict: Verdict
    tags: list[str]


def completion(text: str) -> Completion:
    return Completion(
        model="gpt-4o-2024-08-06",
        choices=[Choice(index=0, message=Message(role="assistant", content=text))],
        usage={"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    )


CALLS: list[str] = []


def fake_create(messages: list[dict[str, str]]) -> Completion:
    CALLS.append(messages[-1]["content"])
    return completion("Lisbon it is")


def agent(task: str) -> str:
    """The README's Record example: the agent reads the SDK object's attributes."""
    messages = [{"role": "user", "content": task}]
    reply = llm_request(
        provider="openai",
        model="gpt-4o",
        input={"messages": messages},
        call=lambda: fake_create(messages),
    )
    return reply.choices[0].message.content


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    _seen.clear()  # each test sees the warnings logged once per process


def recorded(path: Path, run: Callable[[str], Any], task: str = "book") -> Path:
    with record("llm-objects", output=path, run_input=task) as session:
        session.set_output(run(task))
    CALLS.clear()
    return path


def llm_attributes(path: Path) -> list[dict[str, Any]]:
    return [call.attributes for call in load_bundle(path).calls if call.kind == A.KIND_LLM]


def edit_output_type(path: Path, value: str | None) -> None:
    """Set (None: remove) ``sftrace.output.type`` on every LLM span of the bundle."""
    spans = [orjson.loads(line) for line in (path / SPANS_FILE).read_bytes().splitlines()]
    for span in spans:
        keys = {item["key"] for item in span["attributes"]}
        if A.OUTPUT_TYPE not in keys and not (value is not None and A.OUTPUT in keys):
            continue
        if not any(
            item["key"] == A.KIND and item["value"] == {"stringValue": A.KIND_LLM}
            for item in span["attributes"]
        ):
            continue
        span["attributes"] = [i for i in span["attributes"] if i["key"] != A.OUTPUT_TYPE]
        if value is not None:
            span["attributes"].append({"key": A.OUTPUT_TYPE, "value": {"stringValue": value}})
    (path / SPANS_FILE).write_bytes(b"".join(orjson.dumps(span) + b"\n" for span in spans))


def sftrace_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "sftrace" and r.levelno >= logging.WARNING
    ]


# --- the user trial: the README's Record example replays --------------------------------


def test_pydantic_response_replays_as_its_class(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agent)
    assert llm_attributes(bundle)[0][A.OUTPUT_TYPE] == f"{__name__}.Completion"

    result = replay_run(bundle, agent)

    assert (result.status, result.output, result.error) == ("completed", "Lisbon it is", None)
    assert CALLS == []  # answered from the recording


def test_replayed_object_equals_the_recorded_one(tmp_path: Path) -> None:
    got: list[Any] = []

    def keep(task: str) -> str:
        got.append(
            llm_request(
                provider="openai",
                model="gpt-4o",
                input={"task": task},
                call=lambda: completion("hello"),
            )
        )
        return "done"

    bundle = recorded(tmp_path / "b.sftrace", keep)
    with replay(bundle):
        keep("book")
    original, replayed = got
    assert type(replayed) is Completion
    assert replayed == original
    # The replayed span copies the usage and the class, as recorded.
    assert llm_attributes(bundle)[0][A.GEN_AI_USAGE_INPUT_TOKENS] == 5


def test_allm_request_replays_as_its_class(tmp_path: Path) -> None:
    async def async_agent(task: str) -> str:
        async def create() -> Completion:
            return fake_create([{"role": "user", "content": task}])

        reply = await allm_request(
            provider="openai", model="gpt-4o", input={"task": task}, call=create
        )
        return reply.choices[0].message.content

    bundle = tmp_path / "b.sftrace"

    async def main() -> None:
        async with record("llm-objects", output=bundle, run_input="book") as session:
            session.set_output(await async_agent("book"))

    asyncio.run(main())
    CALLS.clear()

    result = replay_run(bundle, async_agent)

    assert (result.status, result.output, result.error) == ("completed", "Lisbon it is", None)
    assert CALLS == []


def test_dataclass_response_replays_through_the_tools_restorer(tmp_path: Path) -> None:
    """A dataclass is rebuilt as a tool's annotated return is: nested dataclasses, and
    bytes (recorded as base64 text) decoded."""
    got: list[Any] = []

    def classify(task: str) -> str:
        reply = llm_request(
            provider="acme",
            model="judge-1",
            input={"task": task},
            call=lambda: Reply(Verdict("ok", 0.5, b"\x00\xff"), ["a", "b"]),
        )
        got.append(reply)
        return reply.verdict.label

    bundle = recorded(tmp_path / "b.sftrace", classify)
    assert llm_attributes(bundle)[0][A.OUTPUT_TYPE] == f"{__name__}.Reply"
    got.clear()

    result = replay_run(bundle, classify)

    assert (result.status, result.output) == ("completed", "ok")
    assert got == [Reply(Verdict("ok", 0.5, b"\x00\xff"), ["a", "b"])]


def test_plain_json_responses_record_no_type(tmp_path: Path) -> None:
    def plain(task: str) -> Any:
        return llm_request(
            provider="openai", model="gpt-4o", input={"task": task}, call=lambda: {"text": "hi"}
        )

    bundle = recorded(tmp_path / "b.sftrace", plain)
    assert A.OUTPUT_TYPE not in llm_attributes(bundle)[0]
    assert replay_run(bundle, plain).return_value == {"text": "hi"}


def test_saved_replay_keeps_the_type(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agent)
    saved = tmp_path / "replayed.sftrace"

    assert replay_run(bundle, agent, save=saved).status == "completed"

    assert llm_attributes(saved)[0][A.OUTPUT_TYPE] == f"{__name__}.Completion"
    assert replay_run(saved, agent).output == "Lisbon it is"


# --- older bundles, classes a replay cannot find, JSON that does not validate -----------


def test_bundle_without_the_type_replays_the_json_as_before(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agent)
    edit_output_type(bundle, None)  # as recorded before sftrace.output.type

    with replay(bundle):
        reply: Any = llm_request(
            provider="openai",
            model="gpt-4o",
            input={"messages": [{"role": "user", "content": "book"}]},
            call=lambda: completion("live"),
        )

    assert reply == completion("Lisbon it is").model_dump(mode="json")


def test_class_in_no_imported_module_is_never_imported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing a bundle names is imported: the JSON comes back, with one warning line."""
    module = types.ModuleType("sftrace_gone_sdk")
    exec(
        "import pydantic\nclass Answer(pydantic.BaseModel):\n    text: str\n",
        module.__dict__,
    )
    sys.modules[module.__name__] = module
    try:

        def ask(task: str) -> Any:
            return llm_request(
                provider="openai",
                model="gpt-4o",
                input={"task": task},
                call=lambda: module.Answer(text="hi"),
            )

        bundle = recorded(tmp_path / "b.sftrace", ask)
    finally:
        del sys.modules[module.__name__]
    assert llm_attributes(bundle)[0][A.OUTPUT_TYPE] == "sftrace_gone_sdk.Answer"

    with caplog.at_level(logging.WARNING, logger="sftrace"):
        result = replay_run(bundle, ask)

    assert (result.status, result.return_value) == ("completed", {"text": "hi"})
    assert "sftrace_gone_sdk" not in sys.modules
    (warning,) = sftrace_warnings(caplog)
    assert "'sftrace_gone_sdk.Answer'" in warning
    assert "response_type=" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("named", ["os.getcwd", "builtins.dict", "sftrace.record", "no.such.Thing"])
def test_a_bundle_naming_anything_else_gets_its_json(tmp_path: Path, named: str) -> None:
    """A name that is not a pydantic model or dataclass of an imported module is never
    called: the replay answers with the JSON."""
    bundle = recorded(tmp_path / "b.sftrace", agent)
    edit_output_type(bundle, named)

    result = replay_run(bundle, agent)

    assert result.status == "failed"
    assert isinstance(result.error, AttributeError)  # the agent got the dict
    assert "'dict' object has no attribute 'choices'" in str(result.error)


class Changed(pydantic.BaseModel):
    """A class whose fields the recorded JSON does not have."""

    answer: str


def test_json_that_does_not_validate_comes_back_as_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agent)
    edit_output_type(bundle, f"{__name__}.Changed")
    got: list[Any] = []

    def keep(task: str) -> None:
        messages = [{"role": "user", "content": task}]
        got.append(
            llm_request(
                provider="openai",
                model="gpt-4o",
                input={"messages": messages},
                call=lambda: completion("live"),
            )
        )

    with caplog.at_level(logging.WARNING, logger="sftrace"):
        result = replay_run(bundle, keep)

    assert result.status == "completed"
    assert got == [completion("Lisbon it is").model_dump(mode="json")]
    (warning,) = sftrace_warnings(caplog)
    assert "Changed" in warning
    assert "ValidationError" in warning
    assert "\n" not in warning


# --- response_type=: the class stated ------------------------------------------------


def test_response_type_rebuilds_a_bundle_without_the_type(tmp_path: Path) -> None:
    """``response_type=`` wins over the recorded class, and serves bundles that have none
    (recorded before it, or from a call that returned the JSON)."""

    def as_json(task: str) -> Any:
        return llm_request(
            provider="openai",
            model="gpt-4o",
            input={"task": task},
            call=lambda: completion("hi").model_dump(mode="json"),
        )

    bundle = recorded(tmp_path / "b.sftrace", as_json)
    assert A.OUTPUT_TYPE not in llm_attributes(bundle)[0]

    def typed(task: str) -> Any:
        return llm_request(
            provider="openai",
            model="gpt-4o",
            input={"task": task},
            call=lambda: completion("live"),
            response_type=Completion,
        )

    assert replay_run(bundle, typed).return_value == completion("hi")

    def typed_list(task: str) -> Any:
        return llm_request(
            provider="openai",
            model="gpt-4o",
            input={"task": task},
            call=lambda: completion("live"),
            response_type=dict[str, Any],
        )

    assert replay_run(bundle, typed_list).return_value == completion("hi").model_dump(mode="json")


@pytest.mark.parametrize("bad", ["Completion", 42, completion("x")])
def test_response_type_must_be_a_type(bad: Any) -> None:
    with pytest.raises(ConfigError, match="response_type must be a class"):
        llm_request(
            provider="openai", model="gpt-4o", input={}, call=lambda: None, response_type=bad
        )


# --- the other ways an LLM call is recorded and answered ------------------------------


def test_record_llm_call_records_the_type_as_llm_request(tmp_path: Path) -> None:
    bundle = tmp_path / "b.sftrace"
    messages = [{"role": "user", "content": "book"}]
    with record("llm-objects", output=bundle, run_input="book") as session:
        session.record_llm_call(
            provider="openai",
            model="gpt-4o",
            input={"messages": messages},
            output=completion("Lisbon it is"),
        )

    assert replay_run(bundle, agent).output == "Lisbon it is"


def test_manual_llm_call_hands_back_the_class(tmp_path: Path) -> None:
    bundle = tmp_path / "b.sftrace"
    answered: list[bool] = []

    def manual(task: str) -> str:
        # The agent records itself; inside a replay its record() block is inert.
        with record("llm-objects", output=bundle, overwrite=True, run_input=task) as session:
            with session.llm_call(provider="openai", model="gpt-4o", input={"t": task}) as call:
                answered.append(call.replayed)
                if call.replayed:
                    reply = call.output
                else:
                    reply = completion("by hand")
                    call.set_output(reply)
            text = str(reply.choices[0].message.content)
            session.set_output(text)
        return text

    manual("book")

    assert replay_run(bundle, manual).output == "by hand"
    assert answered == [False, True]


def test_fork_override_becomes_the_recorded_class(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agent)
    override = completion("Porto instead").model_dump(mode="json")

    result = fork(bundle, agent, at=1, override=override)

    assert (result.status, result.output) == ("completed", "Porto instead")
