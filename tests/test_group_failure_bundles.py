"""A run failure recorded, before 75e4e27, as the exception group holding it is read as the
exception inside, as a replay's failure is (tests/data/exception-group/, written by
``write_old_bundle`` below: the recording of ``run`` with the run's failure not yet read
through groups)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

import sftrace
from sftrace._bundle.upgrade import group_member

OLD = Path(__file__).parent / "data" / "exception-group" / "taskgroup.sftrace"


class BookingFailed(Exception):
    pass


@sftrace.trace_tool(name="book")
async def book(city: str) -> str:
    return f"booked {city}"


async def _work(city: str) -> None:
    await book(city)
    raise BookingFailed(f"no seats for {city}")


async def run(city: str) -> None:
    async with asyncio.TaskGroup() as group:
        group.create_task(_work(city))


def write_old_bundle(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record ``run`` the way sftrace did before 75e4e27 (the group itself as the failure)."""
    monkeypatch.setattr("sftrace._record.run.run_failure", lambda exc: exc)

    async def record() -> None:
        async with sftrace.record("group-agent", output=path, run_input="Lisbon"):
            await run("Lisbon")

    with pytest.raises(ExceptionGroup):
        asyncio.run(record())


def test_the_fixture_holds_the_old_shape() -> None:
    manifest = orjson.loads((OLD / "manifest.json").read_bytes())
    assert manifest["failure"]["type"] == "ExceptionGroup"
    assert "(1 sub-exception)" in manifest["failure"]["message"]


def test_an_old_group_failure_is_read_as_the_exception_inside() -> None:
    bundle = sftrace.load_bundle(OLD)
    assert bundle.failure is not None
    assert (bundle.failure.type, bundle.failure.message) == (
        "test_group_failure_bundles.BookingFailed",
        "no seats for Lisbon",
    )
    assert bundle.manifest.failure is not None
    assert bundle.manifest.failure.type == "ExceptionGroup"  # the file is left as recorded


def test_the_unchanged_agent_replays_an_old_group_failure_as_recorded() -> None:
    """Was STATUS_CHANGED: recorded ExceptionGroup, replayed ...BookingFailed."""
    result, report = sftrace.replay_and_compare(OLD, run)
    assert result.status == "failed"
    assert result.reproduced_failure
    assert report.verdict == "pass", report.format()


def test_a_fresh_recording_of_the_old_shape_matches_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write_old_bundle`` still writes what the fixture holds (so it can be rewritten)."""
    path = tmp_path / "old.sftrace"
    write_old_bundle(path, monkeypatch)
    assert sftrace.load_bundle(path).failure == sftrace.load_bundle(OLD).failure


def _trace(error: BaseException) -> str:
    import traceback

    try:
        raise error
    except BaseException as exc:
        return "".join(traceback.format_exception(exc))


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as raised:
        return raised


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ExceptionGroup("g", [_raised(KeyError("k"))]), ("KeyError", "'k'")),
        (
            ExceptionGroup("outer", [ExceptionGroup("inner", [_raised(BookingFailed("a: b"))])]),
            ("test_group_failure_bundles.BookingFailed", "a: b"),
        ),
        (ExceptionGroup("g", [_raised(ValueError())]), ("ValueError", "")),
        (ExceptionGroup("two", [ValueError("a"), KeyError("b")]), None),
        (ExceptionGroup("outer", [ExceptionGroup("two", [ValueError(), KeyError()])]), None),
    ],
)
def test_the_member_is_read_from_the_stack_trace(
    error: BaseException, expected: tuple[str, str] | None
) -> None:
    assert group_member("ExceptionGroup", _trace(error)) == expected


def test_a_member_raised_from_another_exception_is_the_last_one_shown() -> None:
    def inner() -> None:
        try:
            raise KeyError("cause")
        except KeyError as cause:
            raise BookingFailed("effect") from cause

    member = None
    try:
        inner()
    except BookingFailed as exc:
        member = exc
    assert member is not None
    text = _trace(ExceptionGroup("g", [member]))
    assert group_member("ExceptionGroup", text) == (
        "test_group_failure_bundles.BookingFailed",
        "effect",
    )
    assert group_member("ValueError", text) is None
    assert group_member("ExceptionGroup", None) is None
