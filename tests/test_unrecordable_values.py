"""A result that cannot be recorded never breaks the host.

Outside strict mode the value reaches the caller unchanged (the same object) and the
bundle holds a marker saying it could not be recorded, and why; a replay reaching that
call fails with ``UnrecordedResultError`` naming the call. In strict mode (tests,
``SFTRACE_STRICT=1``) recording fails with a ``TraceSerializationError`` naming the call,
never a raw ``TypeError`` or ``RuntimeError`` from deep inside a conversion.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pydantic
import pytest

from sftrace import (
    TraceSerializationError,
    UnrecordedResultError,
    llm_request,
    load_bundle,
    record,
    replay,
    trace_tool,
)
from sftrace._internal import _seen
from sftrace._model import attributes as A


class _DumpRaises:
    def model_dump(self, **_: Any) -> Any:
        raise RuntimeError("model_dump exploded")


class _FieldSerializerRaises(pydantic.BaseModel):
    x: int

    @pydantic.field_serializer("x")
    def _x(self, value: int) -> int:
        raise ValueError("field serializer exploded")


class _ObjectValued(enum.Enum):
    ONLY = object()


@dataclasses.dataclass
class _Holder:
    value: Any


class _IterRaises(Mapping[str, int]):
    def __getitem__(self, key: str) -> int:
        return 1

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iteration exploded")


class _OffsetRaises(dt.tzinfo):
    def utcoffset(self, _: dt.datetime | None) -> dt.timedelta:
        raise RuntimeError("utcoffset exploded")


class _Opaque:
    pass


def _cycle() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _dict_cycle() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


def _deep() -> list[Any]:
    value: list[Any] = []
    for _ in range(1000):
        value = [value]
    return value


def _generator() -> Iterator[int]:
    yield 1


# What the host's tool returns; each cannot become JSON, for its own reason.
UNRECORDABLE: dict[str, Callable[[], Any]] = {
    "int-2**64": lambda: 2**64,
    "int-minus-2**64": lambda: -(2**64),
    "big-int-in-dataclass": lambda: _Holder(2**70),
    "path-with-surrogate": lambda: Path("report-\udcff.txt"),
    "str-with-surrogate": lambda: "half \ud800 a pair",
    "dict-key-with-surrogate": lambda: {"\udc80": 1},
    "model-dump-raises": _DumpRaises,
    "field-serializer-raises": lambda: _FieldSerializerRaises(x=1),
    "list-cycle": _cycle,
    "dict-cycle": _dict_cycle,
    "nested-1000-deep": _deep,
    "complex": lambda: 1j,
    "plain-object": _Opaque,
    "generator": _generator,
    "function": lambda: len,
    "lock": threading.Lock,
    "tuple-dict-keys": lambda: {(1, 2): "pair"},
    "enum-with-object-value": lambda: _ObjectValued.ONLY,
    "mapping-whose-iteration-raises": _IterRaises,
    "datetime-whose-offset-raises": lambda: dt.datetime(2026, 1, 1, tzinfo=_OffsetRaises()),
    "magic-mock": MagicMock,
}


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRACE_STRICT", "0")
    _seen.clear()


def _record_tool(path: Path, value: Any) -> Any:
    @trace_tool(name="fetch_report")
    def fetch_report(day: int) -> Any:
        return value

    with record("agent", output=path) as session:
        result = fetch_report(3)
        session.set_output("done")
    return result


@pytest.mark.parametrize("make", UNRECORDABLE.values(), ids=UNRECORDABLE.keys())
@pytest.mark.usefixtures("production")
def test_an_unrecordable_result_reaches_the_caller_and_is_marked(
    tmp_path: Path, make: Callable[[], Any]
) -> None:
    """The same object comes back, no exception; the bundle marks the result as not
    recorded; replaying the call fails with UnrecordedResultError naming it."""
    value = make()
    path = tmp_path / "r.sftrace"
    assert _record_tool(path, value) is value
    bundle = load_bundle(path, verify_integrity=True)
    assert bundle.status == "completed"
    (call,) = bundle.calls
    assert call.output_json is None
    reason = call.attributes[A.OUTPUT_UNRECORDED]
    assert reason.startswith("cannot record tool 'fetch_report' result")

    @trace_tool(name="fetch_report")
    def fetch_report(day: int) -> Any:
        raise AssertionError("a frozen replay never runs the body")

    with replay(path), pytest.raises(UnrecordedResultError) as caught:
        fetch_report(3)
    message = str(caught.value)
    assert message.startswith("call 1 (tool fetch_report) cannot be answered")
    assert "could not be recorded" in message
    assert caught.value.call_number == 1
    assert caught.value.reason == reason


@pytest.mark.parametrize("make", UNRECORDABLE.values(), ids=UNRECORDABLE.keys())
def test_an_unrecordable_result_raises_a_clear_error_in_strict_mode(
    tmp_path: Path, make: Callable[[], Any]
) -> None:
    """Under tests the same values raise TraceSerializationError naming the tool."""
    with pytest.raises(TraceSerializationError, match="fetch_report"):
        _record_tool(tmp_path / "r.sftrace", make())


@pytest.mark.usefixtures("production")
def test_an_unrecordable_llm_response_reaches_the_caller(tmp_path: Path) -> None:
    """The same for an LLM response: returned unchanged, marked in the bundle."""
    response = {"usage": {"total_tokens": 2**64}}
    with record("agent", output=tmp_path / "l.sftrace"):
        got = llm_request(provider="openai", model="m", input={"q": 1}, call=lambda: response)
    assert got is response
    (call,) = load_bundle(tmp_path / "l.sftrace").calls
    assert A.OUTPUT_UNRECORDED in call.attributes
    with replay(tmp_path / "l.sftrace"), pytest.raises(UnrecordedResultError, match="llm"):
        llm_request(provider="openai", model="m", input={"q": 1}, call=lambda: response)


@pytest.mark.usefixtures("production")
def test_an_unrecordable_result_with_a_serializer_that_raises(tmp_path: Path) -> None:
    """A serializer= hook that raises (not TypeError) is a value that cannot be recorded."""

    def serializer(value: Any) -> Any:
        raise RuntimeError("serializer exploded")

    @trace_tool(serializer=serializer)
    def tool() -> Any:
        return _Opaque()

    with record("agent", output=tmp_path / "s.sftrace"):
        value = tool()
    assert isinstance(value, _Opaque)
    (call,) = load_bundle(tmp_path / "s.sftrace").calls
    assert "serializer exploded" in call.attributes[A.OUTPUT_UNRECORDED]


@pytest.mark.parametrize("make", UNRECORDABLE.values(), ids=UNRECORDABLE.keys())
@pytest.mark.usefixtures("production")
def test_an_unrecordable_tool_input_never_breaks_the_host_and_replays(
    tmp_path: Path, make: Callable[[], Any]
) -> None:
    """A lock, a generator, a 65-bit integer... passed to a tool: the tool runs with the
    very object, the input is recorded with a placeholder naming its type, and a replay
    passing the same kind of object matches the call (also in strict mode)."""
    value = make()
    seen: list[Any] = []

    @trace_tool(name="inspect_value")
    def inspect_value(day: int, value: Any) -> str:
        seen.append(value)
        return "inspected"

    path = tmp_path / "i.sftrace"
    with record("agent", output=path):
        assert inspect_value(3, value) == "inspected"
    assert seen[0] is value
    (call,) = load_bundle(path, verify_integrity=True).calls
    assert call.input["day"] == 3
    assert "<unrecordable " in call.input_json
    for strict in ("0", "1"):
        _seen.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SFTRACE_STRICT", strict)
            with replay(path) as session:
                assert inspect_value(3, make()) == "inspected"
        assert [m.action for m in session.matched] == ["substituted"]
    assert len(seen) == 1


def test_an_unrecordable_tool_input_raises_a_clear_error_in_strict_mode(tmp_path: Path) -> None:
    """Under tests, recording a lock passed to a tool raises TraceSerializationError."""

    @trace_tool(name="inspect_value")
    def inspect_value(value: Any) -> str:
        return "inspected"

    with (
        pytest.raises(TraceSerializationError, match=r"inspect_value' input\.value of type lock"),
        record("agent", output=tmp_path / "i.sftrace"),
    ):
        inspect_value(threading.Lock())


@pytest.mark.usefixtures("production")
def test_an_unrecordable_result_is_logged_as_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning says what failed and how to fix it, without a traceback (kept at DEBUG
    level): it is the user's value, not a fault of sftrace."""
    with caplog.at_level("WARNING", logger="sftrace"):
        _record_tool(tmp_path / "r.sftrace", {"lock": threading.Lock()})
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "cannot record tool 'fetch_report' result.lock" in warning.getMessage()
    assert "serializer=" in warning.getMessage()
    assert warning.exc_info is None
    _seen.clear()
    with caplog.at_level("DEBUG", logger="sftrace"):
        _record_tool(tmp_path / "d.sftrace", {"lock": threading.Lock()})
    assert any(r.levelname == "DEBUG" and r.exc_info for r in caplog.records)


@pytest.mark.usefixtures("production")
def test_a_mock_is_unrecordable_at_once_not_taken_for_a_pydantic_model(tmp_path: Path) -> None:
    """A ``Mock`` has a callable ``model_dump`` (and every attribute of it another Mock):
    only real pydantic models are dumped, so a mock passed to or returned from a tool
    is an unrecordable value like any other, without calling ``model_dump``, instead of
    a conversion ~200 levels deep (seconds per call) blamed on "a cycle"."""
    client = MagicMock()

    @trace_tool(name="send")
    def send(client: Any, text: str) -> Any:
        return client

    path = tmp_path / "mock.sftrace"
    with record("agent", output=path):
        assert send(client, "hi") is client
    assert not client.model_dump.called
    (call,) = load_bundle(path).calls
    assert call.input == {"client": "<unrecordable unittest.mock.MagicMock>", "text": "hi"}
    reason = call.attributes[A.OUTPUT_UNRECORDED]
    assert "of type MagicMock: it is not JSON-serializable" in reason
    assert "levels deep" not in reason
