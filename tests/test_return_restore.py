"""A replayed tool returns what its return annotation says, from the recorded JSON.

Recording stores a pydantic model as ``model_dump(mode="json")``: fields under their
names (not their aliases), computed fields included, ``exclude=True`` fields left out.
The replay must turn exactly that back into the model the agent got.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field

from sftrace import load_bundle, record, replay, replay_run, trace_tool
from sftrace._model import attributes as A
from sftrace._record.tool import return_restorer


class User(BaseModel):
    user_id: int = Field(alias="userId")  # a camelCase API's field


class Invoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    net: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gross(self) -> int:
        return self.net * 2


class Statement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    invoices: list[Invoice]


class Order(BaseModel):
    id: int
    risk: float = Field(0.0, exclude=True)  # internal: left out of every dump


@trace_tool
def get_user() -> User:
    return User(userId=7)


@trace_tool
def get_statement() -> Statement:
    return Statement(invoices=[Invoice(net=5), Invoice(net=8)])


@trace_tool
def list_files() -> Iterable[str]:
    return ["a.txt", "b.txt"]


@trace_tool
def get_order() -> Order:
    return Order(id=1, risk=0.93)


def recorded(path: Path, agent: Any) -> tuple[Path, Any]:
    with record("restore", output=path):
        value = agent()
    return path, value


def test_a_model_with_aliased_fields_comes_back_as_the_model(tmp_path: Path) -> None:
    bundle, value = recorded(tmp_path / "u.sftrace", get_user)
    with replay(bundle):
        replayed = get_user()
    assert type(replayed) is User
    assert replayed == value


def test_computed_fields_do_not_stop_a_model_that_forbids_extra_keys(tmp_path: Path) -> None:
    bundle, value = recorded(tmp_path / "s.sftrace", get_statement)
    with replay(bundle):
        replayed = get_statement()
    assert type(replayed) is Statement
    assert replayed == value
    assert [invoice.gross for invoice in replayed.invoices] == [10, 16]


def test_an_iterable_comes_back_as_a_list_that_can_be_walked_twice(tmp_path: Path) -> None:
    bundle, _ = recorded(tmp_path / "f.sftrace", list_files)
    with replay(bundle):
        replayed = list_files()
    assert list(replayed) == ["a.txt", "b.txt"]
    assert list(replayed) == ["a.txt", "b.txt"]


def test_fields_a_model_excludes_from_its_dumps_are_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recording cannot hold them: the replay says so, once, instead of silently
    handing back their defaults."""
    bundle, _ = recorded(tmp_path / "o.sftrace", lambda: (get_order(), get_order()))
    with caplog.at_level(logging.WARNING, logger="sftrace"), replay(bundle):
        replayed = [get_order(), get_order()]
    assert [order.risk for order in replayed] == [0.0, 0.0]  # the defaults
    warnings = [
        r.getMessage() for r in caplog.records if "excluded from its dumps" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "Order" in warnings[0]
    assert "risk" in warnings[0]
    assert "serializer=" in warnings[0]


def test_a_result_that_does_not_validate_is_returned_as_recorded_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hand-edited or minimized result that no longer fits the annotation comes back
    as its JSON, and the log says why in one line, without a traceback."""

    def wants_user() -> User:
        raise AssertionError("never called")

    restore = return_restorer(wants_user)
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        assert restore({"name": "x"}) == {"name": "x"}
    [logged] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert logged.exc_info is None
    assert "restoring the return type of" in logged.getMessage()
    assert "wants_user" in logged.getMessage()
    assert "answers with the recorded JSON (ValidationError" in logged.getMessage()
    assert "\n" not in logged.getMessage()


def test_an_annotation_that_cannot_be_resolved_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A class imported only under TYPE_CHECKING: the replay cannot rebuild it and hands
    back the JSON; it says so once, naming the annotation and what to do, instead of the
    agent failing later with "'dict' object has no attribute 'price'"."""
    namespace: dict[str, Any] = {}
    exec(  # a module written with from __future__ import annotations
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from shop import Quote\n"
        "def get_quote() -> Quote:\n"
        "    return {'price': 3}\n",
        namespace,
    )
    tool = trace_tool(namespace["get_quote"])
    bundle, _ = recorded(tmp_path / "q.sftrace", tool)
    with caplog.at_level(logging.WARNING, logger="sftrace"), replay(bundle):
        assert tool() == {"price": 3}
    [message] = [r.getMessage() for r in caplog.records if "cannot be resolved" in r.getMessage()]
    assert "'Quote'" in message
    assert "NameError" in message
    assert "TYPE_CHECKING" in message


class SearchParams(BaseModel):
    city: str
    max_results: int = 10
    sort: str = "price"


class Plan(BaseModel):
    steps: list[SearchParams]
    note: str = ""


@trace_tool
def plan_search(task: str) -> Plan:
    return Plan(steps=[SearchParams(city="Lisbon"), SearchParams(city="Porto", sort="time")])


@trace_tool
def search_with(params: list[dict[str, Any]]) -> list[str]:
    return ["TP123"]


def exclude_unset_agent(task: str) -> list[str]:
    plan = plan_search(task)
    return search_with([step.model_dump(exclude_unset=True) for step in plan.steps])


def test_fields_left_unset_stay_unset_on_the_replayed_model(tmp_path: Path) -> None:
    """A rebuilt model would have every field set, so model_dump(exclude_unset=True)
    (the next request built from a parameters model) sent more than the recorded run,
    and the unchanged agent diverged."""
    path = tmp_path / "unset.sftrace"
    with record("unset", output=path, run_input="t") as session:
        session.set_output(exclude_unset_agent("t"))
    calls = load_bundle(path).calls
    assert calls[0].attributes[A.OUTPUT_UNSET] == (
        '[["steps",0,"max_results"],["steps",0,"sort"],["steps",1,"max_results"],["note"]]'
    )
    assert calls[1].input == {"params": [{"city": "Lisbon"}, {"city": "Porto", "sort": "time"}]}
    assert A.OUTPUT_UNSET not in calls[1].attributes  # not a model: nothing to say
    result = replay_run(path, exclude_unset_agent)
    assert (result.status, result.divergence) == ("completed", None)
    with replay(path):
        replayed = plan_search("t")
    assert replayed.model_fields_set == {"steps"}
    assert [step.model_fields_set for step in replayed.steps] == [{"city"}, {"city", "sort"}]
