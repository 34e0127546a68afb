"""Recording: runs, tools and LLM calls become spans and a bundle."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import functools
import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
import sftrace
from sftrace import (
    BundleError,
    ConfigError,
    TraceSerializationError,
    load_bundle,
    record,
    trace_tool,
)


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


def test_sync_record_writes_bundle_with_calls_in_order(tmp_path: Path) -> None:
    """A recorded run becomes a bundle whose calls are in the order they were reached."""
    with record("booking", output=tmp_path / "run.sftrace") as session:
        session.set_output(agents.booking_agent())
    bundle = load_bundle(tmp_path / "run.sftrace")
    assert session.path == tmp_path / "run.sftrace"
    assert bundle.manifest.status == "completed"
    assert bundle.manifest.agent_name == "booking"
    assert bundle.manifest.run_id == session.run_id
    assert bundle.manifest.trace_id == session.trace_id
    assert [(c.seq, c.kind, c.name) for c in bundle.calls] == [
        (1, "tool", "flight_search"),
        (2, "llm", "fake-1"),
        (3, "tool", "book"),
    ]
    assert bundle.calls[0].input == {"destination": "Lisbon", "max_results": 3}
    assert bundle.calls[0].output == [{"id": "TP1", "price": 120}, {"id": "FR2", "price": 90}]
    assert bundle.calls[1].provider == "fake"
    assert bundle.output == {"ok": True, "flight_id": "FR2"}
    totals = bundle.manifest.totals
    assert (totals.spans, totals.tool_calls, totals.llm_calls) == (4, 2, 1)
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens) == (7, 5, 12)


def test_async_record_and_gather_keep_task_local_parents(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """Concurrent asyncio tasks parent their tool calls to their own caller."""

    async def main() -> None:
        async with record("async-agent", output=tmp_path / "a.sftrace") as session:
            session.set_output(await agents.async_agent("otel"))

    asyncio.run(main())
    bundle = load_bundle(tmp_path / "a.sftrace")
    by_span = {c.span_id: c for c in bundle.calls}
    run_span_id = bundle.run_span["spanId"]
    parents = [c for c in bundle.calls if c.name == "gather_parent"]
    assert len(parents) == 2
    for parent in parents:
        assert parent.parent_span_id == run_span_id
        prefix = parent.input["prefix"]
        children = [c for c in bundle.calls if c.parent_span_id == parent.span_id]
        assert sorted(c.input["item"] for c in children) == [f"{prefix}-a", f"{prefix}-b"]
    llm = [c for c in bundle.calls if c.kind == "llm"]
    assert len(llm) == 1
    assert by_span[llm[0].span_id].parent_span_id == run_span_id
    assert bundle.output == "about otel"
    assert sorted(c.seq for c in bundle.calls) == list(range(1, 8))


def test_nested_tool_is_child_of_outer_tool(tmp_path: Path) -> None:
    """A tool called inside another tool is its child span."""

    @trace_tool
    def inner(x: int) -> int:
        return x + 1

    @trace_tool
    def outer(x: int) -> int:
        return inner(x) * 2

    with record("nested", output=tmp_path / "n.sftrace"):
        assert outer(1) == 4
    outer_call, inner_call = load_bundle(tmp_path / "n.sftrace").calls
    assert (outer_call.name, inner_call.name) == ("outer", "inner")
    assert inner_call.parent_span_id == outer_call.span_id
    assert (outer_call.seq, inner_call.seq) == (1, 2)


def test_methods_drop_self_and_async_methods_work(tmp_path: Path) -> None:
    """Inputs are bound by parameter name, without self."""
    box = agents.Toolbox()

    async def main() -> None:
        async with record("methods", output=tmp_path / "m.sftrace"):
            assert box.lookup("k") == "K"
            assert await box.alookup(key="Q") == "q"

    asyncio.run(main())
    calls = load_bundle(tmp_path / "m.sftrace").calls
    assert [c.input for c in calls] == [{"key": "k"}, {"key": "Q"}]


def test_failed_run_reraises_same_exception_and_records_failure(tmp_path: Path) -> None:
    """A raising block is recorded as failed and the original exception propagates."""
    with (
        pytest.raises(ValueError, match="sold out") as caught,
        record("failing", output=tmp_path / "f.sftrace"),
    ):
        agents.book("TP1")
    original = caught.value
    assert original.__traceback__ is not None
    bundle = load_bundle(tmp_path / "f.sftrace")
    assert bundle.manifest.status == "failed"
    assert bundle.failure is not None
    assert (bundle.failure.type, bundle.failure.message, bundle.failure.step) == (
        "ValueError",
        "sold out",
        1,
    )
    call = bundle.calls[0]
    assert call.error is not None
    assert (call.error.type, call.error.message, call.error.builtin) == (
        "ValueError",
        "sold out",
        True,
    )


def test_tool_exception_object_passes_through_unchanged() -> None:
    """The exception the caller sees is the very object the tool raised."""
    raised: list[BaseException] = []

    @trace_tool
    def explode() -> None:
        error = KeyError("x")
        raised.append(error)
        raise error

    with record("identity"), pytest.raises(KeyError) as caught:
        explode()
    assert caught.value is raised[0]


def test_custom_exception_type_is_recorded_with_module(tmp_path: Path) -> None:
    """Non-builtin exception types are recorded with their qualified name."""
    with pytest.raises(agents.PaymentDeclined), record("pay", output=tmp_path / "p.sftrace"):
        agents.charge(12.5)
    call = load_bundle(tmp_path / "p.sftrace").calls[0]
    assert call.error is not None
    assert call.error.type == "sample_agents.PaymentDeclined"
    assert not call.error.builtin


def test_outside_recording_tool_runs_unchanged(spans: InMemorySpanExporter) -> None:
    """Without record() the decorated function is a plain call: no span."""
    assert agents.book("FR2") == {"ok": True, "flight_id": "FR2"}
    assert spans.get_finished_spans() == ()


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Model(pydantic.BaseModel):
    name: str
    when: dt.datetime


def test_serialization_of_common_python_types(tmp_path: Path) -> None:
    """Dataclasses, pydantic models, enums, datetimes, bytes, sets and tuples become JSON."""

    @trace_tool
    def echo(value: Any) -> Any:
        return value

    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    value = {
        "point": Point(1, 2),
        "model": Model(name="m", when=when),
        "color": Color.RED,
        "when": when,
        "raw": b"\x00\x01",
        "tags": {"b", "a"},
        "pair": (1, 2),
        "id": uuid.UUID(int=1),
    }
    with record("types", output=tmp_path / "t.sftrace"):
        echo(value)
    recorded = load_bundle(tmp_path / "t.sftrace").calls[0].input["value"]
    assert recorded == {
        "point": {"x": 1, "y": 2},
        "model": {"name": "m", "when": "2026-01-02T03:04:05Z"},
        "color": "red",
        "when": "2026-01-02T03:04:05+00:00",
        "raw": "AAE=",
        "tags": ["a", "b"],
        "pair": [1, 2],
        "id": "00000000-0000-0000-0000-000000000001",
    }


class Opaque:
    pass


def test_unserializable_argument_names_parameter_type_and_fix() -> None:
    """An unconvertible input raises TraceSerializationError before the body runs."""
    ran: list[bool] = []

    @trace_tool(name="opaque_tool")
    def takes(thing: Any, other: int = 1) -> None:
        ran.append(True)

    with record("bad"), pytest.raises(TraceSerializationError) as caught:
        takes({"nested": [Opaque()]})
    message = str(caught.value)
    assert "opaque_tool" in message
    assert "thing.nested[0]" in caught.value.path
    assert "Opaque" in message
    assert "serializer=" in message
    assert caught.value.type_name == "Opaque"
    assert not ran
    assert isinstance(caught.value, TypeError)


def test_custom_serializer_converts_unknown_types(tmp_path: Path) -> None:
    """serializer= converts values JSON cannot hold; TypeError from it is reported."""

    def serializer(value: Any) -> Any:
        if isinstance(value, Opaque):
            return "<opaque>"
        raise TypeError("unknown")

    @trace_tool(serializer=serializer)
    def takes(thing: Any) -> Any:
        return [thing]

    with record("ser", output=tmp_path / "s.sftrace"):
        takes(Opaque())
    call = load_bundle(tmp_path / "s.sftrace").calls[0]
    assert (call.input, call.output) == ({"thing": "<opaque>"}, ["<opaque>"])


def test_existing_bundle_refused_unless_overwrite(tmp_path: Path) -> None:
    """An existing bundle is never silently replaced."""
    target = tmp_path / "x.sftrace"
    with record("one", output=target) as first:
        first.set_output(1)
    with (
        pytest.raises(BundleError, match=r"already exists.*overwrite=True"),
        record("two", output=target),
    ):
        pytest.fail("the block must not run")
    with record("two", output=target, overwrite=True) as second:
        second.set_output(2)
    bundle = load_bundle(target)
    assert (bundle.agent_name, bundle.output) == ("two", 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.sftrace"]


def test_default_path_uses_bundle_dir_and_sftrace_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without output, bundles go to bundle_dir, else $SFTRACE_DIR, else .sftrace/traces."""
    with record("Agent One") as session:
        pass
    assert session.path is not None
    assert session.path.parent == tmp_path / "traces"
    assert session.path.name == f"Agent_One-{session.run_id}.sftrace"
    sftrace.configure(bundle_dir=None)
    monkeypatch.setenv("SFTRACE_DIR", str(tmp_path / "env-dir"))
    with record("a") as from_env:
        pass
    assert from_env.path is not None
    assert from_env.path.parent == tmp_path / "env-dir"
    monkeypatch.delenv("SFTRACE_DIR")
    with record("a") as default:
        pass
    assert default.path is not None
    assert default.path.parent.resolve() == (tmp_path / ".sftrace" / "traces").resolve()


def test_generator_functions_are_rejected_at_decoration() -> None:
    """Generators cannot be tools: the error says what to do."""
    with pytest.raises(TypeError, match="generator function"):

        @trace_tool
        def gen() -> Any:
            yield 1

    with pytest.raises(TypeError, match="generator function"):

        @trace_tool
        async def agen() -> Any:
            yield 1


def test_invalid_replay_policy_lists_valid_values() -> None:
    """replay_policy accepts its string values and rejects others with the choices."""
    with pytest.raises(ConfigError, match="'frozen', 'live', 'forbidden', 'manual', 'derived'"):
        trace_tool(replay_policy="sometimes")
    assert trace_tool(replay_policy="live") is not None


def test_spans_follow_genai_conventions(spans: InMemorySpanExporter) -> None:
    """Run, tool and LLM spans carry the GenAI semantic-convention names and attributes."""
    with record("conv"):
        agents.booking_agent()
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {
        "invoke_agent conv",
        "execute_tool flight_search",
        "chat fake-1",
        "execute_tool book",
    }
    run = finished["invoke_agent conv"].attributes or {}
    assert run["gen_ai.operation.name"] == "invoke_agent"
    assert run["gen_ai.agent.name"] == "conv"
    tool = finished["execute_tool flight_search"].attributes or {}
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "flight_search"
    assert tool["gen_ai.tool.call.arguments"] == '{"destination":"Lisbon","max_results":3}'
    assert tool["gen_ai.tool.call.result"] == tool["sftrace.output"]
    assert tool["sftrace.seq"] == 1
    llm_span = finished["chat fake-1"]
    llm = llm_span.attributes or {}
    assert llm_span.kind.name == "CLIENT"
    assert llm["gen_ai.provider.name"] == "fake"
    assert llm["gen_ai.request.model"] == "fake-1"
    assert llm["gen_ai.response.model"] == "fake-1-2025"
    assert (llm["gen_ai.usage.input_tokens"], llm["gen_ai.usage.output_tokens"]) == (7, 5)


def test_tool_error_sets_span_status_and_exception_event(spans: InMemorySpanExporter) -> None:
    """A failing tool sets the span status to ERROR and records the exception."""
    with pytest.raises(ValueError, match="sold out"), record("err"):
        agents.book("TP1")
    span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool book")
    assert span.status.status_code.name == "ERROR"
    assert [e.name for e in span.events] == ["exception"]


def test_state_changes_and_manual_llm_call(tmp_path: Path) -> None:
    """State changes are span events; session.llm_call records a manual LLM call."""
    with record("manual", output=tmp_path / "m.sftrace", metadata={"ticket": 7}) as session:
        session.record_state_change(key="cart", before=[], after=["TP1"])
        with session.llm_call(model="gpt-x", input={"q": 1}, provider="openai") as handle:
            assert not handle.replayed
            handle.set_output(
                {"a": 2}, prompt_tokens=10, completion_tokens=3, total_tokens=13, cost_usd=0.25
            )
    bundle = load_bundle(tmp_path / "m.sftrace")
    change = bundle.state_changes[0]
    assert (change.key, change.before, change.after) == ("cart", [], ["TP1"])
    call = bundle.calls[0]
    assert (call.kind, call.provider, call.name, call.output) == (
        "llm",
        "openai",
        "gpt-x",
        {"a": 2},
    )
    totals = bundle.manifest.totals
    assert (totals.total_tokens, totals.cost_usd) == (13, 0.25)


def test_tool_called_from_raw_thread_is_parented_to_run(tmp_path: Path) -> None:
    """A raw thread does not inherit the context; its calls still join the run."""
    with record("threads", output=tmp_path / "t.sftrace"):
        worker = threading.Thread(target=agents.book, args=("FR2",))
        worker.start()
        worker.join()
    bundle = load_bundle(tmp_path / "t.sftrace")
    assert [c.name for c in bundle.calls] == ["book"]
    assert bundle.calls[0].parent_span_id == bundle.run_span["spanId"]


def test_to_thread_and_executor_calls_are_recorded(tmp_path: Path) -> None:
    """asyncio.to_thread copies the context; executors fall back to the active run."""
    from concurrent.futures import ThreadPoolExecutor

    async def main() -> None:
        async with record("exec", output=tmp_path / "e.sftrace"):
            await asyncio.to_thread(agents.book, "FR2")
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(agents.book, ["A", "B"]))

    asyncio.run(main())
    bundle = load_bundle(tmp_path / "e.sftrace")
    assert sorted(c.input["flight_id"] for c in bundle.calls) == ["A", "B", "FR2"]


def test_run_input_and_metadata_are_stored(tmp_path: Path) -> None:
    """run_input is what replay_run calls the entrypoint with."""
    with record("in", output=tmp_path / "i.sftrace", run_input={"task": "go"}):
        pass
    bundle = load_bundle(tmp_path / "i.sftrace")
    assert bundle.has_run_input
    assert bundle.run_input == {"task": "go"}
    assert not bundle.has_output


def test_session_methods_outside_block_raise_clear_error() -> None:
    """Using a session before entering it says how to fix it."""
    session = record("early")
    with pytest.raises(ConfigError, match="inside the `with record"):
        session.set_output(1)


def test_agent_name_must_be_non_empty() -> None:
    """A blank agent name is a configuration error."""
    with pytest.raises(ConfigError, match="agent_name"):
        record("  ")


@trace_tool
def spread(x: int, *rest: int, **options: Any) -> int:
    return x + sum(rest) + len(options)


@trace_tool
def tagged(name: str, /, **labels: str) -> str:
    return name + "".join(sorted(labels))


def test_keyword_arguments_are_merged_into_the_input_unless_a_name_collides(
    tmp_path: Path,
) -> None:
    """``**kwargs`` are merged into the named arguments; a keyword named like ``*args``
    or a positional-only parameter keeps them apart, so two calls never record as one."""
    with record("kw", output=tmp_path / "kw.sftrace") as session:
        session.set_output(
            [spread(1, 2), spread(1, rest=[2]), spread(1, mode="a"), tagged("n", name="v")]
        )
    inputs = [call.input for call in load_bundle(tmp_path / "kw.sftrace").calls]
    assert inputs == [
        {"x": 1, "rest": [2]},
        {"x": 1, "rest": [], "**options": {"rest": [2]}},
        {"x": 1, "rest": [], "mode": "a"},
        {"name": "n", "**labels": {"name": "v"}},
    ]
    changed = sftrace.replay_run(tmp_path / "kw.sftrace", lambda: [spread(1, 2), spread(1, 2)])
    assert changed.status == "diverged"


def _inject_db(func: Any) -> Any:
    """A ``functools.wraps`` decorator that supplies the first argument itself."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func("DB", *args, **kwargs)

    return wrapper


def _inject_db_method(func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return func(self, "DB", *args, **kwargs)

    return wrapper


@trace_tool
@_inject_db
def injected_lookup(db: str, q: str, limit: int = 1) -> str:
    return f"{db}:{q}:{limit}"


class _Repository:
    @trace_tool
    @_inject_db_method
    def find(self, db: str, q: str) -> str:
        return f"{db}:{q}"


def test_a_wraps_decorator_that_supplies_an_argument_records_the_call_as_passed(
    tmp_path: Path,
) -> None:
    """``inspect`` reports the inner function's signature (through ``__wrapped__``), which
    a call the wrapper accepts does not bind to: the call runs as without recording, its
    input is its arguments as passed (``self`` dropped), and a replay matches it."""
    path = tmp_path / "inject.sftrace"

    def agent() -> list[str]:
        return [injected_lookup("q"), injected_lookup("r", limit=2), _Repository().find("s")]

    with record("inject", output=path) as session:
        session.set_output(agent())
    inputs = [call.input for call in load_bundle(path).calls]
    assert inputs == [
        {"args": ["q"], "kwargs": {}},
        {"args": ["r"], "kwargs": {"limit": 2}},
        {"args": ["s"], "kwargs": {}},
    ]
    result = sftrace.replay_run(path, agent, match="strict")
    assert result.status == "completed"
    assert result.return_value == ["DB:q:1", "DB:r:2", "DB:s"]
    assert [m.action for m in result.matched] == ["substituted"] * 3


def test_a_call_that_binds_is_recorded_by_name_and_a_bad_call_still_raises(
    tmp_path: Path,
) -> None:
    """Calls that bind to the reported signature keep their input by parameter name; a
    call the function's own signature refuses raises its TypeError before anything is
    recorded; one only the inner function refuses raises it from there, as without
    recording, and is recorded as a failed call."""

    @trace_tool
    def lookup(q: str, limit: int = 1) -> str:
        return q

    path = tmp_path / "bad.sftrace"
    with record("bad", output=path):
        with pytest.raises(TypeError, match="missing a required argument: 'q'"):
            lookup(limit=2)  # type: ignore[call-arg]
        assert lookup("q") == "q"
        with pytest.raises(TypeError, match="positional arguments but 5 were given"):
            injected_lookup("q", "r", 3, 4)
    calls = load_bundle(path).calls
    assert [call.input for call in calls] == [
        {"q": "q", "limit": 1},
        {"args": ["q", "r", 3, 4], "kwargs": {}},
    ]
    assert calls[1].error is not None
    assert calls[1].error.type == "TypeError"


def _search(city: str, limit: int = 3) -> list[str]:
    return [city] * limit


class _Shout:
    def __call__(self, q: str) -> str:
        return q + "!"


def test_partials_and_callable_objects_are_named_without_repr() -> None:
    """A partial is named after the function it wraps (nested ones too), a callable
    object after its class: never its repr, which holds bound arguments and an address."""
    nested = functools.partial(functools.partial(_search, limit=2), "Lisbon")
    assert trace_tool(functools.partial(_search, limit=2)).__sftrace_tool__.name == "_search"
    assert trace_tool(nested).__sftrace_tool__.name == "_search"
    assert trace_tool(_Shout()).__sftrace_tool__.name == "_Shout"
    assert trace_tool(name="shout")(_Shout()).__sftrace_tool__.name == "shout"


def test_partials_and_callable_objects_replay_when_wrapped_again(tmp_path: Path) -> None:
    """A new process wraps new objects (other addresses): the replay still matches."""
    path = tmp_path / "partial.sftrace"

    def agent_of(search: Any, shout: Any) -> Callable[[str], list[Any]]:
        return lambda task: [search(task), shout(task)]

    recorded = agent_of(trace_tool(functools.partial(_search, limit=2)), trace_tool(_Shout()))
    with record("partial", output=path, run_input="Lisbon") as session:
        session.set_output(recorded("Lisbon"))
    calls = load_bundle(path).calls
    assert [(call.name, call.input) for call in calls] == [
        ("_search", {"city": "Lisbon", "limit": 2}),
        ("_Shout", {"q": "Lisbon"}),
    ]
    fresh = agent_of(trace_tool(functools.partial(_search, limit=2)), trace_tool(_Shout()))
    result = sftrace.replay_run(path, fresh)
    assert result.status == "completed"
    assert result.return_value == [["Lisbon", "Lisbon"], "Lisbon!"]


class _AsyncLookup:
    async def __call__(self, q: str) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"found": q}


async def _async_search(city: str, limit: int = 5) -> list[str]:
    await asyncio.sleep(0)
    return [city] * limit


def test_callable_objects_and_partials_that_are_async_are_async_tools(tmp_path: Path) -> None:
    """A callable object with an ``async def __call__`` (and a partial of an async
    function) is an async tool: recorded with its awaited result, replayed as a coroutine
    the agent awaits, not as a sync call whose output is a coroutine object."""
    path = tmp_path / "async.sftrace"

    def agent_of(lookup: Any, search: Any) -> Callable[[str], Any]:
        async def agent(task: str) -> list[Any]:
            return [await lookup(task), await search(task)]

        return agent

    recorded = agent_of(
        trace_tool(_AsyncLookup()), trace_tool(functools.partial(_async_search, limit=1))
    )
    with record("async", output=path, run_input="Faro") as session:
        session.set_output(asyncio.run(recorded("Faro")))
    calls = load_bundle(path).calls
    assert [(call.name, call.output) for call in calls] == [
        ("_AsyncLookup", {"found": "Faro"}),
        ("_async_search", ["Faro"]),
    ]
    fresh = agent_of(
        trace_tool(_AsyncLookup()), trace_tool(functools.partial(_async_search, limit=1))
    )
    result = sftrace.replay_run(path, fresh)
    assert result.status == "completed", result.error
    assert result.return_value == [{"found": "Faro"}, ["Faro"]]


def test_a_secret_bound_in_a_partial_is_in_no_file_of_the_bundle(tmp_path: Path) -> None:
    """A partial's bound keywords are parameters with defaults: recorded as inputs and
    redacted like any input; its bound positional arguments are not parameters and are
    not recorded. The name holds neither."""
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"

    def call_api(q: str, *, api_key: str, header: str = "") -> str:
        return "ok"

    by_keyword = trace_tool(functools.partial(call_api, api_key=key))
    by_header = trace_tool(functools.partial(call_api, api_key="x", header=key))
    positional = trace_tool(functools.partial(functools.partial(_search, key), limit=1))
    path = tmp_path / "secret.sftrace"
    with record("secret", output=path):
        by_keyword("hello")
        by_header("hello")
        positional()
    calls = load_bundle(path).calls
    assert [call.name for call in calls] == ["call_api", "call_api", "_search"]
    assert calls[2].input == {"limit": 1}
    assert all("REDACTED" in call.input["api_key"] for call in calls[:2])
    stored = b"".join(file.read_bytes() for file in path.rglob("*") if file.is_file())
    assert key.encode() not in stored


class _Opaque:
    pass


class _Fetch:
    def __call__(self, q: str) -> _Opaque:
        return _Opaque()


def test_a_callable_object_whose_return_type_cannot_be_restored_replays(tmp_path: Path) -> None:
    """Restoring the annotated return type of a callable object or a partial (which have
    no ``__qualname__``) logs its failure under the tool's name instead of raising."""
    path = tmp_path / "opaque.sftrace"
    fetch = trace_tool(_Fetch(), serializer=lambda value: "opaque")
    with record("opaque", output=path):
        assert isinstance(fetch("a"), _Opaque)
    with sftrace.replay(path):
        assert trace_tool(_Fetch(), serializer=lambda value: "opaque")("a") == "opaque"


def test_a_record_nested_in_a_recording_says_a_replay_of_the_outer_run_will_diverge(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The inner block's calls go to the inner bundle; a replay of the outer run (in which
    the inner record() writes nothing) reaches them and diverges. Said once, at the time
    the problem is made, naming the run."""

    @trace_tool
    def step(i: int) -> int:
        return i

    def outer() -> int:
        step(0)
        for index in range(2):
            with record("inner", output=tmp_path / f"inner{index}.sftrace"):
                step(5)
        return step(9)

    with (
        caplog.at_level(logging.WARNING, logger="sftrace"),
        record("outer", output=tmp_path / "outer.sftrace") as session,
    ):
        session.set_output(outer())
    warnings = [
        r.getMessage() for r in caplog.records if "started inside the recording" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert session.run_id in warnings[0]
    assert "will reach those calls and diverge" in warnings[0]
    assert [c.input for c in load_bundle(tmp_path / "outer.sftrace").calls] == [{"i": 0}, {"i": 9}]
    result = sftrace.replay_run(tmp_path / "outer.sftrace", outer)
    assert result.status == "diverged"  # as the warning said
