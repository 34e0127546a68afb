"""What a replayed failure was raised from comes back: ``raise ... from`` (``__cause__``),
an exception raised while handling another (``__context__``), and ``add_note``'s notes,
so a handler reading them replays the recorded run."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import orjson

from sftrace import compare, load_bundle, record, replay_run, trace_tool
from sftrace._model.calls import CallFailure
from sftrace._replay.rebuild import rebuild_exception


class LowLevel(OSError):
    """A transport's error, raised from deep inside."""


@trace_tool
def fetch(url: str) -> str:
    try:
        try:
            raise KeyError("socket")
        except KeyError:
            raise LowLevel(111, "Connection refused") from None
    except OSError as exc:
        error = RuntimeError(f"fetch {url} failed")
        error.add_note("hint: is the proxy up?")
        raise error from exc


@trace_tool
def parse(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise LookupError(f"no number in {text!r}")  # noqa: B904 (implicit context)


def agent(url: str) -> dict[str, object]:
    try:
        return {"ok": fetch(url)}
    except RuntimeError as exc:
        cause = exc.__cause__
        seen: dict[str, object] = {
            "cause": type(cause).__name__,
            "errno": getattr(cause, "errno", None),
            "notes": getattr(exc, "__notes__", None),
            "hidden": cause.__suppress_context__ if cause is not None else None,
        }
    try:
        parse("ten")
    except LookupError as exc:
        seen["context"] = type(exc.__context__).__name__
        seen["explicit"] = exc.__cause__ is not None
    return seen


EXPECTED = {
    "cause": "LowLevel",
    "errno": 111,
    "notes": ["hint: is the proxy up?"],
    "hidden": True,
    "context": "ValueError",
    "explicit": False,
}


def test_causes_contexts_and_notes_come_back(tmp_path: Path) -> None:
    with record("chains", output=tmp_path / "c.sftrace", run_input="http://x") as session:
        session.set_output(agent("http://x"))
    bundle = load_bundle(tmp_path / "c.sftrace")
    assert bundle.output == EXPECTED
    error = bundle.calls[0].error
    assert error is not None
    assert error.cause_json is not None
    cause = orjson.loads(error.cause_json)
    assert (cause["type"], cause["explicit"], cause["args"]) == (
        f"{__name__}.LowLevel",
        True,
        [111, "Connection refused"],
    )
    assert "cause" not in cause  # "from None" hides the KeyError
    result = replay_run(bundle, agent)
    assert (result.status, result.divergence) == ("completed", None)
    assert result.output == EXPECTED
    assert result.reproduced
    assert compare(bundle, result).passed


def test_a_crafted_chain_is_rebuilt_only_as_deep_as_allowed() -> None:
    link: dict[str, object] = {"type": "ValueError", "message": "m", "builtin": True}
    for _ in range(20):
        link = {
            "type": "KeyError",
            "message": "k",
            "builtin": True,
            "explicit": True,
            "cause": link,
        }
    rebuilt = rebuild_exception(
        CallFailure(
            type="RuntimeError", message="top", builtin=True, cause_json=orjson.dumps(link).decode()
        )
    )
    depth = 0
    current: BaseException | None = rebuilt
    while current is not None and current.__cause__ is not None:
        current = current.__cause__
        depth += 1
    assert depth == 8


async def _fails(task: str) -> None:
    raise KeyError("missing")


def test_an_async_agents_failure_gets_no_context_from_the_replay_itself(tmp_path: Path) -> None:
    """replay_run started asyncio.run inside an `except RuntimeError` block: every
    exception of an async agent had RuntimeError('no running event loop') as its
    __context__, which a saved replay recorded as the failure's cause."""
    path = tmp_path / "a.sftrace"
    with contextlib.suppress(KeyError), record("async", output=path, run_input="t"):
        asyncio.run(_fails("t"))
    result = replay_run(path, _fails)
    assert isinstance(result.error, KeyError)
    assert result.error.__context__ is None
