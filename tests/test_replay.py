"""Replay: every instrumented call answered from the recording, in strict order."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
from sftrace import (
    Call,
    ConfigError,
    IncompleteReplayError,
    ReplayExhaustedError,
    ReplayMismatchError,
    ReplayPolicyError,
    areplay_run,
    llm_request,
    load_bundle,
    record,
    replay,
    replay_run,
    trace_tool,
)
from sftrace._model import attributes as A
from sftrace._model.serialize import dumps, loads, restore_nonfinite
from sftrace._record.tool import return_restorer


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


def recorded(path: Path, agent: Callable[[], Any], *, run_input: Any = None) -> Path:
    """Record ``agent()`` into ``path``; its exception, if any, is swallowed."""
    try:
        with record("agent", output=path, run_input=run_input) as session:
            session.set_output(agent())
    except Exception:
        pass
    agents.EXECUTED.clear()
    return path


def test_frozen_replay_returns_recorded_values_without_running_bodies(tmp_path: Path) -> None:
    """Frozen replay never runs an instrumented body and restores annotated return types."""
    bundle = recorded(tmp_path / "b.sftrace", agents.booking_agent)
    with replay(bundle) as session:
        flights = agents.search_flights("Lisbon")
        agents.ask(f"pick from {[f.id for f in flights]}")
        booked = agents.book("FR2")
    assert agents.EXECUTED == []
    assert flights == [agents.Flight("TP1", 120), agents.Flight("FR2", 90)]
    assert booked == {"ok": True, "flight_id": "FR2"}
    assert [m.action for m in session.matched] == ["substituted"] * 3
    assert session.unused == []
    assert session.divergence is None
    session.verify_complete()


def test_pydantic_return_annotation_is_restored(tmp_path: Path) -> None:
    """A tool annotated to return a pydantic model gets the model back on replay."""
    bundle = recorded(tmp_path / "q.sftrace", lambda: agents.quote("FR2"))
    with replay(bundle):
        value = agents.quote("FR2")
    assert value == agents.Quote(flight_id="FR2", total=99.5)
    assert agents.EXECUTED == []


@dataclasses.dataclass
class _Blob:
    data: bytes
    parts: list[bytes]


class _Doc(pydantic.BaseModel):
    name: str
    body: bytes  # a model dumps bytes as its own config says (UTF-8 text)
    blob: _Blob


_PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)


def test_bytes_return_values_come_back_as_the_recorded_bytes(tmp_path: Path) -> None:
    """Bytes are recorded as base64 text: a replay decodes them for an annotation holding
    bytes (top level, optional, in containers and dataclasses), not the text's bytes; a
    pydantic model's bytes come back as the model dumped them."""

    @trace_tool
    def download() -> bytes:
        return _PNG

    @trace_tool
    def maybe() -> bytes | None:
        return _PNG

    @trace_tool
    def chunks() -> list[bytes]:
        return [_PNG, b""]

    @trace_tool
    def files() -> dict[str, bytes]:
        return {"a.png": _PNG}

    @trace_tool
    def blob() -> _Blob:
        return _Blob(_PNG, [b"\xff"])

    @trace_tool
    def doc() -> _Doc:
        return _Doc(name="d", body=b"caf\xc3\xa9", blob=_Blob(b"x", [b"y"]))

    tools = (download, maybe, chunks, files, blob, doc)
    with record("agent", output=tmp_path / "b.sftrace"):
        live = [tool() for tool in tools]
    with replay(tmp_path / "b.sftrace"):
        replayed = [tool() for tool in tools]
    assert replayed == live


class _Stats(pydantic.BaseModel):
    mean: float
    spread: list[float]


@dataclasses.dataclass
class _Range:
    low: float
    high: float


def test_non_finite_float_results_come_back_as_floats(tmp_path: Path) -> None:
    """NaN and the infinities in a result are stored as "NaN", "Infinity", "-Infinity"
    with their paths, and come back as floats whatever the annotation (none, float, a
    model, a dataclass); a string "NaN" stays a string. An input holding NaN matches
    itself, recorded as null as before."""
    nan, inf = math.nan, math.inf

    @trace_tool
    def score(x: float) -> float:
        return nan

    @trace_tool
    def limits():  # type: ignore[no-untyped-def]
        return {"max": inf, "min": -inf, "none": None, "text": "NaN", "xs": [1.5, nan]}

    @trace_tool
    def top() -> Any:
        return -inf

    @trace_tool
    def stats() -> _Stats:
        return _Stats(mean=nan, spread=[inf, 0.5])

    @trace_tool
    def bounds() -> _Range:
        return _Range(-inf, inf)

    def agent() -> list[Any]:
        return [score(nan), limits(), top(), stats(), bounds()]

    bundle = tmp_path / "n.sftrace"
    with record("agent", output=bundle) as recording:
        live = agent()
        recording.set_output(repr(live))
    calls = load_bundle(bundle).calls
    assert calls[0].input == {"x": None}
    assert calls[1].output_json == (
        '{"max":"Infinity","min":"-Infinity","none":null,"text":"NaN","xs":[1.5,"NaN"]}'
    )
    assert calls[1].attributes[A.OUTPUT_NONFINITE] == '[["max"],["min"],["xs",1]]'
    with replay(bundle) as session:
        replayed = agent()
    assert repr(replayed) == repr(live)
    assert isinstance(replayed[1]["text"], str)
    assert session.divergence is None
    assert [m.action for m in session.matched] == ["substituted"] * 5


def test_non_finite_floats_stay_null_outside_results() -> None:
    """Only a call's result, given ``nonfinite``, holds non-finite floats as strings:
    inputs and other values keep the null they were recorded as before."""
    value = {"a": [math.nan, None], "b": math.inf}
    assert dumps(value) == '{"a":[null,null],"b":null}'
    paths: list[list[str | int]] = []
    text = dumps(value, nonfinite=paths, sort_keys=False)
    assert text == '{"a":["NaN",null],"b":"Infinity"}'
    assert paths == [["a", 0], ["b"]]
    assert repr(restore_nonfinite(loads(text), paths)) == repr(value)
    assert dumps({"a": None}, nonfinite=paths) == '{"a":null}'
    assert len(paths) == 2


def test_json_shaped_return_annotations_get_the_parsed_value_itself() -> None:
    """``dict[str, Any]`` and ``list[Any]`` need no restoring: a replayed call returns the
    freshly parsed output itself (pydantic would copy it on every call); other generic
    annotations are still validated."""

    def as_dict() -> dict[str, Any]:
        return {}

    def as_list() -> list[object]:
        return []

    def as_ints() -> dict[str, int]:
        return {}

    value: dict[str, Any] = {"flights": [{"id": "TP1"}]}
    assert return_restorer(as_dict)(value) is value
    items = [value]
    assert return_restorer(as_list)(items) is items
    assert return_restorer(as_ints)({"seats": "2"}) == {"seats": 2}


def test_mismatch_reports_call_number_both_calls_and_differing_paths(tmp_path: Path) -> None:
    """A different input raises before the body runs, naming the paths and both values."""
    bundle = recorded(tmp_path / "m.sftrace", agents.booking_agent)
    with replay(bundle) as session:
        agents.search_flights("Lisbon")
        with pytest.raises(ReplayMismatchError) as caught:
            agents.ask("something else")  # the agent catches nothing: pytest does
    error = caught.value
    message = str(error)
    assert "call 2" in message
    assert "llm fake/fake-1" in message
    assert "$.prompt" in message
    assert "something else" in message
    assert "pick from ['TP1', 'FR2']" in message
    assert error.call_number == 2
    assert error.differences == [("$.prompt", "pick from ['TP1', 'FR2']", "something else")]
    assert error.recorded is not None
    assert error.recorded["input"] == {"prompt": "pick from ['TP1', 'FR2']"}
    assert session.divergence is error
    assert agents.EXECUTED == []


def test_wrong_tool_at_position_names_recorded_and_reached(tmp_path: Path) -> None:
    """Reaching another tool than recorded says what the recording has there."""
    bundle = recorded(tmp_path / "w.sftrace", agents.booking_agent)
    with replay(bundle), pytest.raises(ReplayMismatchError) as caught:
        agents.book("FR2")
    message = str(caught.value)
    assert "reached tool book, but the recording has tool flight_search" in message


def test_strict_mismatch_names_the_later_recorded_call_it_matches(tmp_path: Path) -> None:
    """A call the recording makes later (concurrent calls in another order) is named, with
    the match mode that matches by input; a call the recording never makes gets no hint."""
    bundle = recorded(tmp_path / "o.sftrace", agents.booking_agent)
    booked = next(call for call in load_bundle(bundle).calls if call.name == "book")
    with replay(bundle), pytest.raises(ReplayMismatchError) as caught:
        agents.book(booked.input["flight_id"])
    message = str(caught.value)
    assert f"the recording makes this call later, as call {booked.seq}" in message
    assert f"the agent now skips recorded calls 1-{booked.seq - 1} before it" in message
    assert "match='unordered'" in message
    with replay(bundle), pytest.raises(ReplayMismatchError) as caught:
        agents.book("XX9")
    assert "the recording makes this call later" not in str(caught.value)


def test_divergence_is_kept_when_the_agent_catches_it(tmp_path: Path) -> None:
    """The first divergence stays on the session even if the agent swallows the error."""
    bundle = recorded(tmp_path / "c.sftrace", agents.booking_agent)
    with replay(bundle) as session, contextlib.suppress(ReplayMismatchError):
        agents.book("nope")
    assert isinstance(session.divergence, ReplayMismatchError)


def test_exhausted_after_all_recorded_calls(tmp_path: Path) -> None:
    """A call after every recorded call was used raises ReplayExhaustedError."""
    bundle = recorded(tmp_path / "e.sftrace", lambda: agents.book("FR2"))
    with replay(bundle) as session:
        agents.book("FR2")
        with pytest.raises(ReplayExhaustedError, match="the 1 recorded call was already used"):
            agents.book("FR2")
    assert isinstance(session.divergence, ReplayExhaustedError)


def test_verify_complete_lists_unused_calls(tmp_path: Path) -> None:
    """Recorded calls never reached are reported by verify_complete()."""
    bundle = recorded(tmp_path / "u.sftrace", agents.booking_agent)
    with replay(bundle) as session:
        agents.search_flights("Lisbon")
    assert [c.seq for c in session.unused] == [2, 3]
    with pytest.raises(IncompleteReplayError, match="2 of 3 recorded calls") as caught:
        session.verify_complete()
    assert "call 3: tool book" in str(caught.value)


def test_recorded_builtin_exception_is_raised_again(tmp_path: Path) -> None:
    """A recorded ValueError replays as a ValueError with the same message."""
    bundle = recorded(tmp_path / "x.sftrace", lambda: agents.book("TP1"))
    with replay(bundle) as session, pytest.raises(ValueError, match=r"^sold out$"):
        agents.book("TP1")
    assert agents.EXECUTED == []
    assert session.divergence is None


def test_recorded_custom_exception_is_raised_again_as_its_class(tmp_path: Path) -> None:
    """A non-builtin exception whose class is imported replays as that class."""
    bundle = recorded(tmp_path / "d.sftrace", lambda: agents.charge(3.0))
    with replay(bundle) as session, pytest.raises(agents.PaymentDeclined) as caught:
        agents.charge(3.0)
    assert caught.value.args == ("card declined for 3.0",)
    assert session.divergence is None
    assert agents.EXECUTED == []


def test_unordered_match_answers_calls_in_any_order(tmp_path: Path) -> None:
    """In unordered mode each call takes the earliest unused identical recorded call."""

    async def gather(items: list[str]) -> list[Any]:
        return list(await asyncio.gather(*(agents.fetch(item) for item in items)))

    bundle = recorded(tmp_path / "g.sftrace", lambda: asyncio.run(gather(["a", "b", "a"])))
    with replay(bundle, match="unordered") as session:
        assert asyncio.run(gather(["b", "a", "a"])) == [{"item": "b"}, {"item": "a"}, {"item": "a"}]
    assert agents.EXECUTED == []
    assert [m.recorded.seq for m in session.matched] == [2, 1, 3]
    assert session.unused == []
    # The recording shows the three calls overlapping (gathered tasks): a strict replay
    # takes them in any order too (tests/test_strict_concurrency.py has the rule).
    with replay(bundle) as strict:
        asyncio.run(gather(["b", "a", "a"]))
    assert strict.divergence is None
    assert [m.recorded.seq for m in strict.matched] == [2, 1, 3]


def test_unordered_mismatch_names_nearest_unused_call(tmp_path: Path) -> None:
    """When no identical call is left, the error shows the nearest unused recorded call."""
    bundle = recorded(tmp_path / "n.sftrace", agents.booking_agent)
    with replay(bundle, match="unordered"), pytest.raises(ReplayMismatchError) as caught:
        agents.search_flights("Porto")
    message = str(caught.value)
    assert "nearest unused recorded call: call 1: tool flight_search" in message
    assert '$.destination: recorded "Lisbon", reached "Porto"' in message
    assert caught.value.differences == [("$.destination", "Lisbon", "Porto")]


def test_nearest_unused_call_among_equally_different_ones_is_the_most_alike(
    tmp_path: Path,
) -> None:
    """Two unused calls differ from the reached one in one path each: the error names the
    one whose value is nearly the reached one, not the first recorded."""
    bundle = recorded(
        tmp_path / "t.sftrace",
        lambda: [agents.search_flights(d) for d in ("Oslo", "Lisbon-2026", "Bergen")],
    )
    with replay(bundle, match="unordered"), pytest.raises(ReplayMismatchError) as caught:
        agents.search_flights("Lisbon-2027")
    message = str(caught.value)
    assert "nearest unused recorded call: call 2: tool flight_search" in message
    assert caught.value.differences == [("$.destination", "Lisbon-2026", "Lisbon-2027")]


def test_calls_inside_a_substituted_tool_are_covered_not_unused(tmp_path: Path) -> None:
    """Tools recorded inside a frozen tool are not reached, and not reported as unused."""
    bundle = recorded(tmp_path / "c.sftrace", lambda: asyncio.run(agents.async_agent("c")))
    with replay(bundle) as session:
        assert asyncio.run(agents.async_agent("c")) == "about c"
    assert [m.recorded.name for m in session.matched] == [
        "gather_parent",
        "gather_parent",
        "fake-1",
    ]
    assert len(session.controller.covered) == 4
    session.verify_complete()


def test_gather_agent_replays_in_strict_mode(tmp_path: Path) -> None:
    """An asyncio.gather agent replays in strict mode when its order is stable."""
    bundle = recorded(tmp_path / "s.sftrace", lambda: asyncio.run(agents.async_agent("z")))
    result = replay_run(bundle, lambda: asyncio.run(agents.async_agent("z")))
    assert result.status == "completed"
    assert result.return_value == "about z"
    assert result.unused == []
    assert agents.EXECUTED == []


def test_live_mode_runs_llms_and_only_allowed_tools(tmp_path: Path) -> None:
    """Live mode runs LLM calls; a tool runs only when allowed, else ReplayPolicyError."""
    bundle = recorded(tmp_path / "l.sftrace", agents.booking_agent)
    with replay(bundle, mode="live"), pytest.raises(ReplayPolicyError, match="allow_live_tools"):
        agents.search_flights("Lisbon")
    assert agents.EXECUTED == []
    with replay(bundle, mode="live", allow_live_tools=["flight_search", "book"]) as session:
        agents.booking_agent()
    assert agents.EXECUTED == ["search:Lisbon", "llm", "book:FR2"]
    assert [m.action for m in session.matched] == ["executed"] * 3


def test_hybrid_mode_runs_named_llms_live_with_changed_inputs(tmp_path: Path) -> None:
    """Hybrid keeps tools frozen and runs the named LLM live, even with a new prompt."""
    bundle = recorded(tmp_path / "h.sftrace", agents.booking_agent)
    with replay(bundle, mode="hybrid", live_llms=["fake/fake-1"]) as session:
        agents.search_flights("Lisbon")
        reply = agents.ask("a brand new prompt")
        agents.book("FR2")
    assert reply["text"] == "answer to a brand new prompt"
    assert agents.EXECUTED == ["llm"]
    assert [m.action for m in session.matched] == ["substituted", "executed", "substituted"]
    session.verify_complete()


def _policy_bundle(tmp_path: Path, policy: str, body: Callable[[int], int]) -> tuple[Path, Any]:
    tool = trace_tool(name=f"{policy}_tool", replay_policy=policy)(body)
    path = tmp_path / f"{policy}.sftrace"
    with record("p", output=path):
        tool(2)
    return path, tool


def test_forbidden_policy_raises_when_reached(tmp_path: Path) -> None:
    """replay_policy='forbidden' refuses the call during replay."""
    path, tool = _policy_bundle(tmp_path, "forbidden", lambda x: x)
    with replay(path), pytest.raises(ReplayPolicyError, match="forbidden"):
        tool(2)


def test_manual_policy_asks_handler_or_explains(tmp_path: Path) -> None:
    """replay_policy='manual' calls manual= with the recorded Call, or names the call."""
    path, tool = _policy_bundle(tmp_path, "manual", lambda x: x * 10)
    seen: list[Call] = []

    def handler(call: Call) -> int:
        seen.append(call)
        return 99

    with replay(path, manual=handler):
        assert tool(2) == 99
    assert seen[0].output == 20
    with replay(path), pytest.raises(ReplayPolicyError, match=r"manual_tool.*manual handler"):
        tool(2)


def test_live_policy_runs_body(tmp_path: Path) -> None:
    """replay_policy='live' runs the body even in a frozen replay."""
    runs: list[int] = []
    path, tool = _policy_bundle(tmp_path, "live", lambda x: runs.append(x) or x)
    runs.clear()
    with replay(path):
        assert tool(2) == 2
    assert runs == [2]


def test_derived_policy_checks_result_equals_recording(tmp_path: Path) -> None:
    """replay_policy='derived' reruns the body and fails if the result changed."""
    factor = [3]
    path, tool = _policy_bundle(tmp_path, "derived", lambda x: x * factor[0])
    with replay(path) as session:
        assert tool(2) == 6
    assert session.divergence is None
    factor[0] = 4
    with replay(path) as changed, pytest.raises(ReplayMismatchError, match="derived") as caught:
        tool(2)
    assert caught.value.differences == [("$", 6, 8)]
    assert changed.divergence is caught.value


@pytest.mark.parametrize(
    "runner",
    [
        lambda: asyncio.run(asyncio.to_thread(agents.book, "FR2")),
        lambda: list(ThreadPoolExecutor(1).map(agents.book, ["FR2"])),
        lambda: _raw_thread(agents.book, "FR2"),
    ],
    ids=["to_thread", "executor", "raw-thread"],
)
def test_frozen_replay_never_runs_bodies_called_from_threads(
    tmp_path: Path, runner: Callable[[], Any]
) -> None:
    """Threads that do not inherit the context are still answered from the recording."""
    bundle = recorded(tmp_path / "t.sftrace", lambda: agents.book("FR2"))
    with replay(bundle) as session:
        runner()
    assert agents.EXECUTED == []
    assert [m.action for m in session.matched] == ["substituted"]


def _raw_thread(func: Callable[..., Any], *args: Any) -> None:
    worker = threading.Thread(target=func, args=args)
    worker.start()
    worker.join()


def test_record_is_inert_inside_replay(tmp_path: Path) -> None:
    """record() inside a replay writes nothing and reports its output to the replay."""
    bundle = recorded(tmp_path / "r.sftrace", agents.booking_agent)

    def entry() -> None:
        with record("agent", output=tmp_path / "new.sftrace") as session:
            session.set_output(agents.booking_agent())
        assert session.inert

    result = replay_run(bundle, entry)
    assert result.status == "completed"
    assert result.output == {"ok": True, "flight_id": "FR2"}
    assert result.reproduced
    assert not (tmp_path / "new.sftrace").exists()
    assert not (tmp_path / "traces").exists()


def test_replay_run_passes_run_input_and_reports_failure(tmp_path: Path) -> None:
    """replay_run calls the entrypoint with the recorded run_input and reproduces failures."""
    seen: list[str] = []

    def entry(destination: str) -> dict[str, Any]:
        seen.append(destination)
        flights = agents.search_flights(destination)
        return agents.book(flights[0].id)  # the bug: not the cheapest

    bundle = recorded(tmp_path / "f.sftrace", lambda: entry("Lisbon"), run_input="Lisbon")
    seen.clear()
    result = replay_run(bundle, entry)
    assert seen == ["Lisbon"]
    assert result.status == "failed"
    assert isinstance(result.error, ValueError)
    assert result.reproduced_failure
    assert result.reproduced
    assert agents.EXECUTED == []


def test_replay_run_resolves_module_function_entrypoints(tmp_path: Path) -> None:
    """'module:function' entrypoints are imported; unimportable ones are clear errors."""
    bundle = recorded(tmp_path / "mf.sftrace", lambda: agents.booking_agent())
    result = replay_run(bundle, "sample_agents:booking_agent")
    assert result.status == "completed"
    assert result.return_value == {"ok": True, "flight_id": "FR2"}
    with pytest.raises(ConfigError, match="cannot import the entrypoint module 'no_such_mod'"):
        replay_run(bundle, "no_such_mod:run")
    with pytest.raises(ConfigError, match="has no attribute 'missing'"):
        replay_run(bundle, "sample_agents:missing")
    (tmp_path / "broken_agent.py").write_text("import no_such_dependency\n")
    (tmp_path / "raising_agent.py").write_text("raise RuntimeError('bad config')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        # a module that exists but fails to import is not called missing
        with pytest.raises(
            ConfigError, match=r"No module named 'no_such_dependency'; the module itself raised"
        ):
            replay_run(bundle, "broken_agent:run")
        with pytest.raises(
            ConfigError, match=r"RuntimeError: bad config; the module itself raised"
        ):
            replay_run(bundle, "raising_agent:run")
        with pytest.raises(ConfigError, match="check the name and that it is importable"):
            replay_run(bundle, "no_such_mod:run")
    finally:
        sys.path.remove(str(tmp_path))


def test_replay_run_awaits_async_entrypoints_also_inside_a_loop(tmp_path: Path) -> None:
    """Async entrypoints are awaited, from sync code and from inside a running loop."""
    bundle = recorded(tmp_path / "a.sftrace", lambda: asyncio.run(agents.async_agent("q")))
    direct = replay_run(bundle, lambda: agents.async_agent("q"))
    assert (direct.status, direct.return_value) == ("completed", "about q")

    async def inside_loop() -> tuple[Any, Any]:
        nested = replay_run(bundle, lambda: agents.async_agent("q"))
        awaited = await areplay_run(bundle, lambda: agents.async_agent("q"))
        return nested.return_value, awaited.return_value

    assert asyncio.run(inside_loop()) == ("about q", "about q")
    assert agents.EXECUTED == []


def test_replay_run_diverged_status_and_save(tmp_path: Path) -> None:
    """A divergence gives status 'diverged' and is not saved (see test_replay_on_miss);
    save= writes a replay that did not diverge as a bundle derived from the recording."""
    bundle = recorded(tmp_path / "d.sftrace", agents.booking_agent)
    result = replay_run(bundle, lambda: agents.booking_agent("Porto"), save=tmp_path / "re.sftrace")
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert not result.reproduced
    assert result.saved_path is None
    assert not (tmp_path / "re.sftrace").exists()
    result = replay_run(bundle, agents.booking_agent, save=tmp_path / "re.sftrace")
    saved = load_bundle(tmp_path / "re.sftrace")
    assert saved.manifest.derived_from == {"run_id": load_bundle(bundle).run_id, "how": "replay"}
    assert saved.manifest.replay_of is None  # replaced by derived_from
    assert result.saved_path == tmp_path / "re.sftrace"


def test_replay_is_a_traced_run_linked_to_the_recording(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """The replay's run span links to the recorded run and names it in sftrace.replay_of."""
    bundle = recorded(tmp_path / "k.sftrace", agents.booking_agent)
    loaded = load_bundle(bundle)
    spans.clear()
    result = replay_run(bundle, agents.booking_agent)
    run_span = next(s for s in result.spans if (s.attributes or {}).get("sftrace.kind") == "run")
    assert (run_span.attributes or {})["sftrace.replay_of"] == loaded.run_id
    link = run_span.links[0]
    assert f"{link.context.trace_id:032x}" == loaded.manifest.trace_id
    assert [c.name for c in result.calls] == ["flight_search", "fake-1", "book"]
    assert len(spans.get_finished_spans()) == 4  # exported like any other run


def test_replay_options_are_validated() -> None:
    """Bad modes, matchers and live_llms names are configuration errors."""
    with pytest.raises(ConfigError, match="invalid mode='warp'"):
        replay("x.sftrace", mode="warp")
    with pytest.raises(ConfigError, match="invalid match='fuzzy'"):
        replay("x.sftrace", match="fuzzy")
    with pytest.raises(ConfigError, match="provider/model"):
        replay("x.sftrace", mode="hybrid", live_llms=["gpt-4o"])
    with pytest.raises(ConfigError, match="needs mode='hybrid'"):
        replay("x.sftrace", live_llms=["openai/gpt-4o"])


def test_llm_request_replay_returns_recorded_response(tmp_path: Path) -> None:
    """llm_request in frozen replay returns the recorded response without calling."""
    path = tmp_path / "llm.sftrace"
    with record("l", output=path):
        llm_request(provider="p", model="m", input=[1], call=lambda: {"r": 1})
    calls: list[int] = []
    with replay(path):
        response = llm_request(
            provider="p", model="m", input=[1], call=lambda: calls.append(1) or {"r": 2}
        )
    assert response == {"r": 1}
    assert calls == []


def test_existing_save_target_is_refused_before_the_replay_starts(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """save= onto an existing bundle fails up front, leaving no half-started replay."""
    from sftrace import BundleError

    bundle = recorded(tmp_path / "s.sftrace", agents.booking_agent)
    spans.clear()
    with pytest.raises(BundleError, match="already exists"):
        replay_run(bundle, agents.booking_agent, save=bundle)
    assert spans.get_finished_spans() == ()
    assert agents.EXECUTED == []


def test_agent_calling_sys_exit_is_a_failed_replay(tmp_path: Path) -> None:
    """An entrypoint that exits is reported as a failure, not a crash of the runner."""
    bundle = recorded(tmp_path / "x.sftrace", agents.booking_agent)

    def exits() -> None:
        agents.booking_agent()
        raise SystemExit(3)

    result = replay_run(bundle, exits)
    assert result.status == "failed"
    assert isinstance(result.error, SystemExit)


def test_replayed_tool_result_keeps_its_key_order(tmp_path: Path) -> None:
    """A replayed dict iterates like the original, so re-serializing it gives the same text."""
    import json

    @trace_tool
    def weather(city: str) -> dict[str, Any]:
        return {"zeta": 1, "alpha": {"y": 2, "b": 3}, "mid": [{"k2": 1, "k1": 2}]}

    path = tmp_path / "order.sftrace"
    with record("order", output=path):
        original = json.dumps(weather("Oslo"))
    with replay(path):
        replayed = json.dumps(weather("Oslo"))
    assert replayed == original


def test_replayed_spans_carry_recorded_usage_and_output_redactions(tmp_path: Path) -> None:
    """A substituted call's span has the recorded output, usage and redaction records."""

    @trace_tool
    def login(user: str) -> dict[str, str]:
        return {"user": user, "session_token": "s3cr3t-value-123"}

    path = tmp_path / "u.sftrace"
    with record("u", output=path):
        login("ada")
        agents.ask("hi")
    result = replay_run(path, lambda: (login("ada"), agents.ask("hi")))
    assert result.status == "completed"
    by_name = {s.name: dict(s.attributes or {}) for s in result.spans}
    tool = by_name["execute_tool login"]
    assert "s3cr3t-value-123" not in tool["sftrace.output"]
    assert '"field":"output"' in tool["sftrace.redactions"]
    llm = by_name["chat fake-1"]
    assert (llm["gen_ai.usage.input_tokens"], llm["gen_ai.usage.output_tokens"]) == (7, 5)
    assert llm["gen_ai.response.model"] == "fake-1-2025"


ORDER = {"tags": ["wind", "heat", "uv"]}


@trace_tool
def alert(tags: list[str], text: str) -> str:
    return text


def tagging_agent() -> str:
    tags = ORDER["tags"]
    return alert(tags, "alerts: " + ", ".join(tags))


def test_a_mismatch_of_the_same_items_in_another_order_says_so(tmp_path: Path) -> None:
    """Inputs that differ only in the order of their items (a set iterated in another
    process) get a hint naming the likely cause, for lists and for texts."""
    with record("tags", output=tmp_path / "t.sftrace") as session:
        session.set_output(tagging_agent())
    ORDER["tags"] = ["uv", "wind", "heat"]
    try:
        result = replay_run(tmp_path / "t.sftrace", tagging_agent)
    finally:
        ORDER["tags"] = ["wind", "heat", "uv"]
    assert result.status == "diverged"
    message = str(result.divergence)
    assert "$.tags, $.text: the same items in another order" in message
    assert "iterating a set" in message


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (["a", {"b": 1}], [{"b": 1}, "a"], True),
        (["a", "b"], ["a", "c"], False),
        ("abc, def", "def, abc", True),
        ("abc", "abd", False),
        ("ab", "ab ", False),
        (1, 1.0, False),
    ],
)
def test_reordered_only(left: Any, right: Any, expected: bool) -> None:
    from sftrace._replay.mismatch import reordered_only

    assert reordered_only(left, right) is expected
