"""Sets are serialized in one order whatever the hash seed: in pydantic models,
dataclasses and nested containers, in inputs and outputs.

String hashes change with ``PYTHONHASHSEED``, and so does the iteration order of a set
of strings: each check runs the same code in subprocesses with different seeds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sftrace import diff, load_bundle
from sftrace._model.serialize import dumps, to_json

SEEDS = ("1", "2", "3")

AGENT = """
import dataclasses, enum, sys
from typing import Any
import pydantic
from sftrace import record, replay, trace_tool

WORDS = ["sms", "fax", "email", "push", "pager", "voice", "letter", "pigeon"]


class Kind(enum.Enum):
    A = "a"


@dataclasses.dataclass(frozen=True)
class Tag:
    labels: frozenset[str]


class Notice(pydantic.BaseModel):
    channels: set[str]
    nested: dict[str, frozenset[str]]
    tags: list[Tag]
    anything: Any = None
    groups: frozenset[frozenset[str]] = frozenset()

    @pydantic.field_serializer("anything")
    def _anything(self, value: Any) -> Any:
        return value


class Outer(pydantic.BaseModel):
    n: Notice
    mixed: set[Any]


def build() -> Outer:
    words = set(WORDS)
    return Outer(
        n=Notice(
            channels=words,
            nested={"x": frozenset(WORDS[:5])},
            tags=[Tag(frozenset(WORDS[2:]))],
            anything={"y": set(WORDS[:6])},
            groups=frozenset({frozenset(WORDS[:3]), frozenset(WORDS[3:])}),
        ),
        mixed={"b", 3, 1.5, ("t", 2), None, True, Kind.A, frozenset({"q", "r"})},
    )


@dataclasses.dataclass
class Report:
    outer: Outer
    seen: set[str]


@trace_tool
def send(notice: Outer) -> Report:
    return Report(outer=notice, seen=set(WORDS))


def agent() -> None:
    send(build())


if sys.argv[1] == "record":
    with record("agent", output=sys.argv[2]) as session:
        agent()
        session.set_output({"words": set(WORDS), "notice": build()})
else:
    with replay(sys.argv[2]) as session:
        agent()
    session.verify_complete()
    assert session.divergence is None, session.divergence
"""


def _run(tmp_path: Path, seed: str, *args: str) -> None:
    script = tmp_path / "seeded_agent.py"
    script.write_text(AGENT)
    env = {**os.environ, "PYTHONHASHSEED": seed, "SFTRACE_STRICT": "1"}
    done = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_recording_and_replay_under_different_hash_seeds_match(tmp_path: Path) -> None:
    """Recorded with one hash seed, replayed with others: no divergence; two recordings
    with different seeds hold the same text and ``diff`` finds nothing."""
    for seed in SEEDS[:2]:
        _run(tmp_path, seed, "record", str(tmp_path / f"{seed}.sftrace"))
    _run(tmp_path, SEEDS[2], "replay", str(tmp_path / "1.sftrace"))
    first, second = (load_bundle(tmp_path / f"{seed}.sftrace") for seed in SEEDS[:2])
    assert [c.input_json for c in first.calls] == [c.input_json for c in second.calls]
    assert [c.output_json for c in first.calls] == [c.output_json for c in second.calls]
    assert first.output == second.output
    report = diff(first, second)
    assert list(report.findings) == [], report.findings
    notice = first.calls[0].input["notice"]
    assert notice["n"]["channels"] == sorted(notice["n"]["channels"])
    assert notice["n"]["anything"]["y"] == sorted(notice["n"]["anything"]["y"])


VALUES = """
import dataclasses, sys
import pydantic
from sftrace._model.serialize import dumps, to_json

WORDS = {"sms", "fax", "email", "push", "pager", "voice", "letter", "pigeon"}

@dataclasses.dataclass
class D:
    s: set[str]

class M(pydantic.BaseModel):
    d: D
    f: frozenset[str]
    m: dict[str, set[str]]

values = [
    WORDS,
    {"a": [frozenset(WORDS)]},
    D(WORDS),
    M(d=D(WORDS), f=frozenset(WORDS), m={"k": WORDS}),
    [M(d=D(set()), f=frozenset(WORDS), m={})],
    {1, "1", 2.5, None, ("x", 1), frozenset({"y", "z"})},
]
for value in values:
    print(dumps(value))
    print(dumps(value, sort_keys=False))
    print(dumps(to_json(value)))
"""


def test_dumps_is_the_same_text_under_every_hash_seed(tmp_path: Path) -> None:
    """dumps() and to_json() of sets (nested in models, dataclasses, dicts and lists, and
    of mixed types) give one text whatever the hash seed."""
    script = tmp_path / "values.py"
    script.write_text(VALUES)
    outputs = set()
    for seed in SEEDS:
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1, outputs
    (text,) = outputs
    assert json.loads(text.splitlines()[0]) == sorted(
        ["sms", "fax", "email", "push", "pager", "voice", "letter", "pigeon"]
    )


@dataclasses.dataclass
class _Holder:
    items: set[Any]


class _Model(pydantic.BaseModel):
    items: set[Any]
    holder: _Holder


_ELEMENTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.tuples(st.text(max_size=3), st.integers(0, 9)),
    st.frozensets(st.text(max_size=3), max_size=4),
)


@settings(deadline=None)  # the first example builds the pydantic schemas
@given(st.lists(_ELEMENTS, max_size=12))
def test_a_set_serializes_the_same_whatever_its_insertion_order(items: list[Any]) -> None:
    """A set built in any order gives the same text: sorted by a total order over mixed
    types, also inside dataclasses and pydantic models."""
    # 0 == False == 0.0: which of them a set keeps depends on the order; leave those out.
    assume(len(set(items)) == len({(type(item), item) for item in items}))
    forward, backward = set(items), set(reversed(items))
    for make in (
        lambda s: s,
        lambda s: {"k": [frozenset(s)]},
        lambda s: _Holder(s),
        lambda s: _Model(items=s, holder=_Holder(s)),
    ):
        assert dumps(make(forward)) == dumps(make(backward))
        assert dumps(to_json(make(forward))) == dumps(to_json(make(backward)))


@pytest.mark.parametrize("sort_keys", [True, False])
def test_a_set_of_values_needing_the_serializer_is_sorted(sort_keys: bool) -> None:
    """Elements only the ``serializer=`` hook can convert are sorted by their JSON too."""

    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    def serializer(value: Any) -> Any:
        if isinstance(value, Point):
            return {"x": value.x}
        raise TypeError(type(value).__qualname__)

    text = dumps({Point(3), Point(1), Point(2)}, serializer=serializer, sort_keys=sort_keys)
    assert json.loads(text) == [{"x": 1}, {"x": 2}, {"x": 3}]


def test_a_model_with_a_field_named_type_serializes() -> None:
    """Schema keys that are field names (``type``) do not confuse the set detection."""

    class Block(pydantic.BaseModel):
        type: dict[str, int]
        tags: set[str]

    assert dumps(Block(type={"a": 1}, tags={"y", "x"})) == '{"tags":["x","y"],"type":{"a":1}}'
