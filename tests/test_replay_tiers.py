"""Match tiers: exact, then normalized, then relaxed (only where the user asks)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sample_agents as agents
from sample_agents import recorded
from sftrace import (
    ComparisonPolicy,
    ConfigError,
    FindingCode,
    ReplayMismatchError,
    Severity,
    compare,
    llm_request,
    replay,
    replay_run,
)


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


def ask(prompt: str, **extra: Any) -> dict[str, Any]:
    return llm_request(
        provider="fake",
        model="fake-1",
        input={"prompt": prompt, **extra},
        call=lambda: agents.fake_llm(prompt),
    )


def test_exact_match_is_tier_exact_without_differences(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", agents.booking_agent)
    result = replay_run(bundle, agents.booking_agent)
    assert result.status == "completed"
    assert [(m.tier, m.differences) for m in result.matched] == [("exact", ())] * 3
    assert result.match_counts == {
        "exact": 3,
        "normalized": 0,
        "relaxed": 0,
        "live": 0,
        "unused": 0,
    }


def test_whitespace_and_integral_float_match_normalized_with_differences(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "n.sftrace", lambda: agents.search_flights("Lisbon", 2))
    with replay(bundle) as session:
        flights = agents.search_flights(" Lisbon\n", 2.0)  # type: ignore[arg-type]
    assert agents.EXECUTED == []
    assert [f.id for f in flights] == ["TP1", "FR2"]
    (matched,) = session.matched
    assert matched.tier == "normalized"
    assert matched.action == "substituted"
    paths = {path: (left, right) for path, left, right in matched.differences}
    assert paths == {"$.destination": ("Lisbon", " Lisbon\n")}  # 2 and 2.0 are equal JSON


def test_integral_float_alone_matches_normalized(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "f.sftrace", lambda: ask("hi", temperature=1))
    with replay(bundle, tiers=("exact",)) as strict, pytest.raises(ReplayMismatchError):
        ask("hi", temperature=1.0)
    assert strict.matched == []
    with replay(bundle) as session:
        ask("hi", temperature=1.0)
    assert [m.tier for m in session.matched] == ["normalized"]


def test_none_valued_key_matches_a_missing_key_normalized(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "k.sftrace", lambda: ask("hi"))
    with replay(bundle) as session:
        ask("hi", temperature=None)
    assert [m.tier for m in session.matched] == ["normalized"]


def test_exact_only_tiers_turn_tolerance_off(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "x.sftrace", lambda: agents.search_flights("Lisbon"))
    with (
        replay(bundle, tiers=("exact",)) as session,
        pytest.raises(ReplayMismatchError, match="different input"),
    ):
        agents.search_flights("Lisbon ")
    assert session.matched == []
    assert agents.EXECUTED == []


@pytest.mark.parametrize("key", ["llm", "fake/fake-1", "*"])
def test_relaxed_ignores_named_paths_for_llm_calls(tmp_path: Path, key: str) -> None:
    bundle = recorded(tmp_path / "r.sftrace", lambda: ask("pick TP1", request_id="a"))
    ignore = {"*": ["request_id"]}
    ignore.setdefault(key, []).append("$.prompt")
    with replay(bundle, match_ignore=ignore) as session:
        reply = ask("Pick one of TP1, FR2", request_id="b")
    assert reply["text"] == "answer to pick TP1"  # the recorded answer
    assert agents.EXECUTED == []
    (matched,) = session.matched
    assert matched.tier == "relaxed"
    assert {path for path, _, _ in matched.differences} == {"$.prompt", "$.request_id"}


def test_relaxed_for_a_tool_name_does_not_apply_to_other_calls(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "t.sftrace", agents.booking_agent)
    with replay(bundle, match_ignore={"flight_search": ["$.destination"]}) as session:
        agents.search_flights("Porto")
        with pytest.raises(ReplayMismatchError):
            agents.ask("pick from something else")
    assert [m.tier for m in session.matched] == ["relaxed"]


def test_ignoring_the_root_path_matches_calls_by_kind_and_name_in_order(tmp_path: Path) -> None:
    def two_searches() -> None:
        agents.search_flights("Lisbon")
        agents.search_flights("Porto", max_results=1)

    bundle = recorded(tmp_path / "root.sftrace", two_searches)
    with replay(bundle, match_ignore={"flight_search": ["$"]}) as session:
        first = agents.search_flights("Oslo")
        second = agents.search_flights("Rome", max_results=9)
    assert [f.id for f in first] == ["TP1", "FR2"]  # the first recorded answer
    assert [f.id for f in second] == ["TP1"]  # then the second
    assert [(m.recorded.seq, m.tier) for m in session.matched] == [(1, "relaxed"), (2, "relaxed")]
    assert agents.EXECUTED == []
    with (
        replay(bundle, match_ignore={"flight_search": ["$"]}) as other,
        pytest.raises(ReplayMismatchError),
    ):
        agents.book("TP1")  # another name still diverges
    assert other.matched == []


def test_a_match_ignore_key_naming_no_recorded_call_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo, or a model named without its provider, ignores nothing: the replay says so
    instead of staying as strict as without it with nothing said."""
    bundle = recorded(tmp_path / "w.sftrace", lambda: ask("pick TP1", request_id="a"))
    with caplog.at_level(logging.WARNING, logger="sftrace"):
        with replay(bundle, match_ignore={"fake-1": ["$.prompt"]}):
            ask("pick TP1", request_id="a")
        with replay(bundle, match_ignore={"fligth_search": ["$.x"], "fake/fake-1": ["$.y"]}):
            ask("pick TP1", request_id="a")
    messages = [r.getMessage() for r in caplog.records if "match_ignore names" in r.getMessage()]
    assert len(messages) == 2
    assert "'fake-1', which no call of the recording has" in messages[0]
    assert "an LLM is named as 'provider/model': 'fake/fake-1'" in messages[0]
    assert "'fligth_search'" in messages[1]
    assert "the recording's tools are" in messages[1]


def test_without_match_ignore_a_changed_input_still_diverges(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "d.sftrace", lambda: ask("pick TP1"))
    result = replay_run(bundle, lambda: ask("pick FR2"))
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert result.match_counts["unused"] == 1


def test_unordered_exact_match_anywhere_beats_an_earlier_normalized_one(tmp_path: Path) -> None:
    def agent() -> None:
        agents.search_flights(" Lisbon")
        agents.search_flights("Lisbon")

    bundle = recorded(tmp_path / "u.sftrace", agent)
    with replay(bundle, match="unordered") as session:
        agents.search_flights("Lisbon")
    (matched,) = session.matched
    assert (matched.recorded.seq, matched.tier) == (2, "exact")
    assert [call.seq for call in session.unused] == [1]


def test_unordered_falls_back_to_normalized_then_relaxed(tmp_path: Path) -> None:
    def agent() -> None:
        agents.search_flights("Lisbon")
        ask("first")

    bundle = recorded(tmp_path / "v.sftrace", agent)
    with replay(bundle, match="unordered", match_ignore={"llm": ["prompt"]}) as session:
        ask("second")
        agents.search_flights("Lisbon ")
    assert [(m.recorded.seq, m.tier) for m in session.matched] == [
        (2, "relaxed"),
        (1, "normalized"),
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tiers": ("fuzzy",)}, "unknown match tier 'fuzzy'"),
        ({"tiers": ("normalized",)}, "must include 'exact'"),
        ({"tiers": ("exact", "relaxed")}, "match_ignore is empty"),
        (
            {"tiers": ("exact",), "match_ignore": {"llm": ["$.prompt"]}},
            "leave out 'relaxed'",
        ),
        ({"match_ignore": {"llm": ["$.messages[x"]}}, "invalid match_ignore\\['llm'\\] path"),
        ({"match_ignore": {"llm": ["$.prompt", 3]}}, "match_ignore\\['llm'\\] path"),
        ({"match_ignore": ["$.prompt"]}, "match_ignore must map"),
        ({"match_ignore": {"": ["$.prompt"]}}, "match_ignore keys"),
    ],
)
def test_bad_tier_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    bundle = recorded(tmp_path / "e.sftrace", lambda: ask("x"))
    with pytest.raises(ConfigError, match=message):
        replay(bundle, **options)
    with pytest.raises(ConfigError, match=message):
        replay_run(bundle, lambda: ask("x"), **options)


# --- compare() says what each non-exact tier let through ------------------------------


def test_compare_reports_normalized_match_as_info_and_passes(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "c.sftrace", lambda: agents.search_flights("Lisbon"))
    result = replay_run(bundle, lambda: agents.search_flights("Lisbon "))
    assert [call.seq for call in result.calls] == [m.number for m in result.matched]
    report = compare(bundle, result)
    codes = [(f.code, f.severity) for f in report.findings]
    assert codes == [(FindingCode.CALL_INPUT_NORMALIZED, Severity.INFO)]
    assert report.verdict == "pass"
    strict = compare(
        bundle, result, ComparisonPolicy(severity_overrides={"CALL_INPUT_NORMALIZED": "error"})
    )
    assert strict.verdict == "fail"


def test_compare_reports_relaxed_match_as_warning_with_its_paths(tmp_path: Path) -> None:
    def agent(prompt: str) -> Callable[[], Any]:
        return lambda: (agents.search_flights("Lisbon"), ask(prompt))[1]

    bundle = recorded(tmp_path / "c.sftrace", agent("pick one"))
    result = replay_run(bundle, agent("Pick exactly one"), match_ignore={"llm": ["prompt"]})
    assert result.status == "completed"
    report = compare(bundle, result)
    (finding,) = report.findings
    assert (finding.code, finding.severity) == (FindingCode.CALL_INPUT_RELAXED, Severity.WARNING)
    assert [(d.path, d.baseline, d.candidate) for d in finding.differences] == [
        ("$.prompt", "pick one", "Pick exactly one")
    ]
    assert report.verdict == "pass"
    assert [row.status for row in report.alignment] == ["same", "changed"]


def test_compare_relaxed_still_reports_other_input_changes(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "c.sftrace", lambda: ask("pick one", n=1))
    result = replay_run(
        bundle, lambda: ask("Pick", n=1), match_ignore={"llm": ["prompt"]}, match="unordered"
    )
    report = compare(bundle, result)
    assert [f.code for f in report.findings] == [FindingCode.CALL_INPUT_RELAXED]
    # the same calls compared without the replay's tiers: an input change, an error
    plain = compare(bundle, load_bundle_of(tmp_path, lambda: ask("Pick", n=1)))
    assert FindingCode.CALL_INPUT_CHANGED in [f.code for f in plain.findings]
    assert plain.verdict == "fail"


def load_bundle_of(tmp_path: Path, agent: Callable[[], Any]) -> Path:
    return recorded(tmp_path / "other.sftrace", agent)
