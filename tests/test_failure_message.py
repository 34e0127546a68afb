"""A failed run reproduces when its replay fails with the same exception type AND message
(object addresses, UUIDs and times aside): another message is another failure."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from sftrace import FindingCode, compare, load_bundle, record, replay_run, trace_tool
from sftrace._model.normalize import message_key

REASON = {"text": "payment gateway down"}


@trace_tool
def lookup(order: str) -> dict[str, object]:
    return {"order": order, "amount": 59.0}


def refund(order: str) -> None:
    found = lookup(order)
    raise ValueError(f"refund of {found['amount']} EUR failed: {REASON['text']}")


class Session:
    """Its repr holds its address, as a default repr does."""


def volatile(order: str) -> None:
    lookup(order)
    raise RuntimeError(
        f"{Session()!r} lost request {uuid.uuid4()} at {dt.datetime.now(dt.UTC).isoformat()}"
    )


def recorded(path: Path, entrypoint: Callable[[str], None]) -> Path:
    with pytest.raises((ValueError, RuntimeError)), record("refund", output=path, run_input="A-1"):
        entrypoint("A-1")
    return path


def test_the_same_type_with_another_message_is_another_failure(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "m.sftrace", refund)
    assert replay_run(bundle, refund).reproduced
    REASON["text"] = "order too old"
    try:
        result = replay_run(bundle, refund)
    finally:
        REASON["text"] = "payment gateway down"
    assert (result.status, result.divergence) == ("failed", None)
    assert (result.reproduced_failure, result.reproduced) == (False, False)
    assert result.failure_message == "refund of 59.0 EUR failed: order too old"
    report = compare(bundle, result)
    assert not report.passed
    [finding] = [f for f in report.findings if f.code is FindingCode.STATUS_CHANGED]
    assert finding.message == (
        "run failure message changed (ValueError): recorded "
        '"refund of 59.0 EUR failed: payment gateway down", replayed '
        '"refund of 59.0 EUR failed: order too old"'
    )


def test_addresses_uuids_and_times_in_a_message_do_not_make_it_another(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "v.sftrace", volatile)
    recorded_message = load_bundle(bundle).failure
    assert recorded_message is not None
    result = replay_run(bundle, volatile)
    assert result.failure_message != recorded_message.message  # another address, id, time
    assert (result.reproduced_failure, result.reproduced) == (True, True)
    assert compare(bundle, result).passed


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        ("<Session object at 0x7f3a12bc40>", "<Session object at 0x7f00ee11aa>", True),
        (
            "id 123e4567-e89b-12d3-a456-426614174000",
            "id 9b2d1c4e-0f1a-4b6e-8c3d-2e4f5a6b7c8d",
            True,
        ),
        ("at 2026-12-01T21:02:42.123+00:00", "at 2026-12-02 08:00:01", True),
        ("took until 10:11:12", "took until 23:59:59.5", True),
        ("  padded ", "padded", True),
        ("refund of 59.0 EUR", "refund of 60.0 EUR", False),
        ("order 0x12", "order 0x13", False),
        ("sha 1f2e3d4c5b6a79881f2e3d4c5b6a7988", "sha 0000000000000000000000000000000a", False),
    ],
)
def test_message_key(left: str, right: str, same: bool) -> None:
    assert (message_key(left) == message_key(right)) is same
