"""on_miss="live": a call the recording cannot answer runs for real, when allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sample_agents as agents
from sample_agents import recorded
from sftrace import (
    ConfigError,
    FindingCode,
    ReplayMismatchError,
    Severity,
    compare,
    load_bundle,
    replay,
    replay_run,
)


@pytest.fixture(autouse=True)
def _clear_executed() -> None:
    agents.EXECUTED.clear()


def buggy() -> dict[str, Any]:
    agents.search_flights("Lisbon")
    return agents.book("FR2")


def fixed() -> dict[str, Any]:
    """The fix adds a quote and an LLM check before booking."""
    agents.search_flights("Lisbon")
    agents.quote("FR2")
    agents.ask("is FR2 refundable?")
    return agents.book("FR2")


def test_new_calls_run_live_and_matched_calls_stay_frozen(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    result = replay_run(bundle, fixed, on_miss="live", allow_live_tools=["quote"])
    assert result.status == "completed", result.divergence
    assert agents.EXECUTED == ["quote:FR2", "llm"]  # search and book answered from the bundle
    assert [(m.action, m.recorded.name, m.recorded.seq) for m in result.matched] == [
        ("substituted", "flight_search", 1),
        ("live", "quote", 0),
        ("live", "fake-1", 0),
        ("substituted", "book", 2),
    ]
    assert result.unused == []
    assert result.match_counts == {
        "exact": 2,
        "normalized": 0,
        "relaxed": 0,
        "live": 2,
        "unused": 0,
    }
    report = compare(bundle, result)
    assert [(f.code, f.severity) for f in report.findings] == [
        (FindingCode.CALL_ADDED_LIVE, Severity.INFO),
        (FindingCode.CALL_ADDED_LIVE, Severity.INFO),
    ]
    assert report.verdict == "pass"


def test_a_tool_not_allowed_live_still_diverges(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    result = replay_run(bundle, fixed, on_miss="live")
    assert result.status == "diverged"
    assert isinstance(result.divergence, ReplayMismatchError)
    assert "quote" in str(result.divergence)
    assert "pass allow_live_tools=['quote'] (CLI: --allow-live-tool quote)" in str(
        result.divergence
    )
    assert agents.EXECUTED == []


def test_star_allows_every_tool_and_live_llms_limits_llm_calls(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    allowed = replay_run(bundle, fixed, on_miss="live", allow_live_tools=["*"])
    assert allowed.status == "completed"
    agents.EXECUTED.clear()
    limited = replay_run(
        bundle, fixed, on_miss="live", allow_live_tools=["*"], live_llms=["other/model"]
    )
    assert limited.status == "diverged"
    assert agents.EXECUTED == ["quote:FR2"]  # the LLM call was refused before running


def test_default_on_miss_error_diverges_as_before(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    result = replay_run(bundle, fixed, allow_live_tools=["quote"], mode="live")
    assert result.status == "diverged"


def test_strict_miss_uses_up_no_recorded_call_and_skipped_calls_become_unused(
    tmp_path: Path,
) -> None:
    def three() -> Any:
        agents.search_flights("Lisbon")
        agents.quote("FR2")
        return agents.book("FR2")

    bundle = recorded(tmp_path / "b.sftrace", three)
    with replay(bundle, on_miss="live", allow_live_tools=["quote"]) as session:
        agents.search_flights("Lisbon")
        agents.quote("TP1")  # no match at the position or ahead: runs live
        agents.book("FR2")  # skips the recorded quote("FR2"), which becomes unused
    assert [(m.action, m.recorded.seq) for m in session.matched] == [
        ("substituted", 1),
        ("live", 0),
        ("substituted", 3),
    ]
    assert [call.seq for call in session.unused] == [2]
    assert agents.EXECUTED == ["quote:TP1"]


def test_unordered_on_miss_live(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    result = replay_run(bundle, fixed, on_miss="live", match="unordered", allow_live_tools=["*"])
    assert [m.action for m in result.matched] == ["substituted", "live", "live", "substituted"]


def test_saved_refreshed_bundle_replays_frozen_with_no_body_run(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    refreshed = tmp_path / "refreshed.sftrace"
    result = replay_run(bundle, fixed, on_miss="live", allow_live_tools=["quote"], save=refreshed)
    assert result.saved_path == refreshed
    saved = load_bundle(refreshed)
    assert [call.name for call in saved.calls] == ["flight_search", "quote", "fake-1", "book"]
    assert saved.output == {"ok": True, "flight_id": "FR2"}
    agents.EXECUTED.clear()
    frozen = replay_run(refreshed, fixed)
    assert frozen.status == "completed"
    assert frozen.unused == []
    assert agents.EXECUTED == []
    assert compare(refreshed, frozen).verdict == "pass"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_miss": "retry"}, "invalid on_miss='retry'"),
        ({"allow_live_tools": ["quote"]}, "needs mode='live' or on_miss='live'"),
        ({"live_llms": ["fake/fake-1"]}, "or on_miss='live'"),
        ({"on_miss": "live", "live_llms": ["fake"]}, "'provider/model'"),
    ],
)
def test_bad_on_miss_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    with pytest.raises(ConfigError, match=message):
        replay_run(bundle, fixed, **options)


def test_refreshed_bundle_says_where_it_came_from_and_links_to_it(tmp_path: Path) -> None:
    bundle = recorded(tmp_path / "b.sftrace", buggy)
    refreshed = tmp_path / "refreshed.sftrace"
    result = replay_run(bundle, fixed, on_miss="live", allow_live_tools=["quote"], save=refreshed)
    original = load_bundle(bundle)
    saved = load_bundle(refreshed)
    assert saved.manifest.derived_from == {"run_id": original.run_id, "how": "on_miss"}
    assert saved.manifest.to_json()["derived_from"] == saved.manifest.derived_from
    assert "replay_of" not in saved.manifest.to_json()
    run_span = next(span for span in result.spans if span.parent is None)
    assert [
        (format(link.context.span_id, "016x"), format(link.context.trace_id, "032x"))
        for link in run_span.links
    ] == [(original.manifest.root_span_id, original.manifest.trace_id)]


def test_an_old_bundle_with_replay_of_still_loads_as_derived_from(tmp_path: Path) -> None:
    import shutil

    import orjson

    bundle = recorded(tmp_path / "b.sftrace", buggy)
    saved = tmp_path / "saved.sftrace"
    replay_run(bundle, buggy, save=saved)
    old = tmp_path / "old.sftrace"
    shutil.copytree(saved, old)
    manifest = orjson.loads((old / "manifest.json").read_bytes())
    manifest["replay_of"] = manifest.pop("derived_from")["run_id"]
    (old / "manifest.json").write_bytes(orjson.dumps(manifest))
    loaded = load_bundle(old)
    assert loaded.manifest.replay_of == load_bundle(bundle).run_id
    assert loaded.manifest.derived_from == {"run_id": loaded.manifest.replay_of, "how": "replay"}


def test_refund_example_fix_that_adds_a_policy_check_passes_its_on_miss_suite() -> None:
    from sftrace import load_suite

    suite_path = (
        Path(__file__).parent.parent / "examples" / "refund_agent"
    ) / "policy_check.sftrace-suite.toml"
    (result,) = load_suite(suite_path).run()
    assert result.outcome == "passed", result.failure_text() or result.error
    assert result.replay is not None
    assert "live" in [m.action for m in result.replay.matched]
    assert result.replay.match_counts["live"] == 1


def test_a_deriving_command_names_how_the_saved_run_was_derived(tmp_path: Path) -> None:
    import dataclasses

    from sftrace._replay.options import ReplayOptions
    from sftrace._replay.run import run_replay

    bundle = recorded(tmp_path / "b.sftrace", buggy)
    options = dataclasses.replace(
        ReplayOptions.build(save=tmp_path / "m.sftrace"), derived_from={"how": "minimize"}
    )
    result = run_replay(bundle, buggy, options)
    saved = load_bundle(tmp_path / "m.sftrace")
    assert saved.manifest.derived_from == {"run_id": result.bundle.run_id, "how": "minimize"}


def test_a_diverged_replay_is_not_saved(tmp_path: Path) -> None:
    """A tool not allowed live diverges: saving that replay would make a bundle whose
    "recorded" failure is the replay's own error, which every later replay "reproduces".
    Nothing is written, no journal is left behind, and a bundle already at the path with
    overwrite stays as it was."""
    from click.testing import CliRunner

    from sftrace._cli.main import cli
    from sftrace._cli.replay import register

    bundle = recorded(tmp_path / "b.sftrace", buggy)
    target = tmp_path / "refreshed.sftrace"
    result = replay_run(bundle, fixed, on_miss="live", save=target)
    assert result.status == "diverged"
    assert result.saved_path is None
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sftrace"]  # no journal left
    kept = recorded(target, buggy)
    before = (kept / "spans.jsonl").read_bytes()
    again = replay_run(bundle, fixed, on_miss="live", save=target, overwrite=True)
    assert again.saved_path is None
    assert (kept / "spans.jsonl").read_bytes() == before
    assert replay_run(bundle, buggy, save=tmp_path / "ok.sftrace").saved_path is not None
    register(cli)
    output = CliRunner().invoke(
        cli,
        [
            "replay",
            str(bundle),
            "-e",
            "test_replay_on_miss:fixed",
            "--on-miss",
            "live",
            "--save",
            str(tmp_path / "cli.sftrace"),
        ],
    )
    assert output.exit_code == 1, output.output
    assert "not saved to" in output.output
    assert "the replay diverged" in output.output
    assert not (tmp_path / "cli.sftrace").exists()
