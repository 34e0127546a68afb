"""Coming from the peers: ``import --from stepfork|agenttrace`` and ``migrate-suite``.

The fixtures were recorded by the real stepfork 0.2.1 and agenttrace-vcr 0.1.0
(``scripts/make_peer_fixtures.py``); the agents of ``peer_agents.py`` make the same
calls with sftrace's instrumentation and must replay from the converted bundles.
"""

from __future__ import annotations

import importlib
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import peer_agents
import sftrace
from sftrace import (
    BundleError,
    ConfigError,
    SuiteError,
    import_peer_runs,
    load_bundle,
    migrate_suite,
    replay_run,
)
from sftrace._cli.main import cli
from sftrace._model import attributes as A

for _module in ("bundle", "replay", "regress", "otlp", "migrate"):
    importlib.import_module(f"sftrace._cli.{_module}").register(cli)

FIXTURES = Path(__file__).parent / "fixtures"
STEPFORK = FIXTURES / "stepfork"
AGENTTRACE = FIXTURES / "agenttrace"
# The credential-shaped value the fixture agents met in tool results.
FAKE_KEY = "sk-proj-Zt7Qm2Lx9Vb4Nc8Rk1Wp5Hs3Jd6Fg0Ya"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def recorded_output(bundle: Path) -> Any:
    return json.loads((bundle / "events.jsonl").read_text().splitlines()[-1])["output"]


def all_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


@pytest.fixture(autouse=True)
def no_real_bodies() -> None:
    peer_agents.BODIES_RUN.clear()


@pytest.fixture
def stepfork_bundles(tmp_path: Path) -> dict[str, Path]:
    result = import_peer_runs(
        [STEPFORK / "trip.sftrace", STEPFORK / "failed.sftrace"],
        source="stepfork",
        output=tmp_path / "imported",
    )
    assert not result.skipped
    return {"trip": result.runs[0].path, "failed": result.runs[1].path}  # type: ignore[dict-item]


# --- stepfork -----------------------------------------------------------------------


def test_loading_a_stepfork_bundle_names_the_import_command() -> None:
    with pytest.raises(BundleError, match="stepfork bundle") as caught:
        load_bundle(STEPFORK / "trip.sftrace")
    assert "sftrace import --from stepfork" in str(caught.value)


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "{bundle}"],
        ["inspect", "{bundle}"],
        ["replay", "{bundle}", "--entrypoint", "m:f"],
        ["diff", "{bundle}", "{bundle}"],
        ["export", "{bundle}", "--pytest", "--entrypoint", "m:f"],
    ],
)
def test_commands_on_a_stepfork_bundle_name_the_import_command(command: list[str]) -> None:
    bundle = str(STEPFORK / "trip.sftrace")
    result = invoke(*(part.format(bundle=bundle) for part in command))
    assert result.exit_code in (1, 2)
    assert "this is a stepfork bundle" in result.output
    assert "sftrace import --from stepfork" in result.output


def test_a_stepfork_run_replays_the_same_agent_instrumented_with_sftrace(
    stepfork_bundles: dict[str, Path],
) -> None:
    result = replay_run(stepfork_bundles["trip"], peer_agents.plan_trip, match="strict")
    assert result.status == "completed", result.divergence
    assert result.return_value == recorded_output(STEPFORK / "trip.sftrace")
    assert [(m.recorded.kind, m.recorded.name) for m in result.matched] == [
        ("tool", "search_flights"),
        ("llm", "gpt-4o-mini"),
        ("tool", "book_flight"),
        ("llm", "gpt-4o-mini"),
        ("llm", "claude-3-5-haiku"),
    ]
    assert [call.name for call in result.unused] == []
    assert peer_agents.BODIES_RUN == []


def test_a_failed_stepfork_run_replays_its_failure(stepfork_bundles: dict[str, Path]) -> None:
    bundle = load_bundle(stepfork_bundles["failed"])
    assert bundle.status == "failed"
    failure = bundle.manifest.failure
    assert failure is not None
    assert (failure.type, failure.message, failure.step) == (
        "ValueError",
        "no flight under 100 among 1",
        None,
    )
    result = replay_run(stepfork_bundles["failed"], peer_agents.plan_trip_failing)
    assert result.status == "failed"
    assert result.reproduced_failure


def test_stepfork_steps_parents_tokens_cost_state_and_errors_are_kept(
    stepfork_bundles: dict[str, Path],
) -> None:
    bundle = load_bundle(stepfork_bundles["trip"], verify_integrity=True)
    calls = bundle.calls
    assert [(c.seq, c.kind, c.name) for c in calls] == [
        (1, "tool", "search_flights"),
        (2, "tool", "convert_currency"),
        (3, "llm", "gpt-4o-mini"),
        (4, "tool", "book_flight"),
        (5, "llm", "gpt-4o-mini"),
        (6, "llm", "claude-3-5-haiku"),
    ]
    search, convert, pick, book, _, translate = calls
    assert convert.parent_span_id == search.span_id  # the nested step
    assert search.parent_span_id == bundle.manifest.root_span_id
    assert pick.provider == "openai"
    assert pick.attributes[A.GEN_AI_USAGE_INPUT_TOKENS] == 42
    assert pick.attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert pick.attributes[A.COST_USD] == pytest.approx(0.00021)
    assert bundle.manifest.totals.total_tokens == 49
    assert bundle.manifest.totals.cost_usd == pytest.approx(0.00021)
    assert book.error is not None
    assert book.error.type == "TimeoutError"
    assert book.error.message == "booking service timed out for TP-101"
    assert translate.provider == "anthropic"
    assert translate.error is not None
    assert (translate.error.type, translate.error.message) == (
        "ConnectionError",
        "model overloaded",
    )
    # An error the agent reported itself has no span: the manifest keeps it.
    assert bundle.manifest.notes[1] == (
        "stepfork error event at step 16: FareRulesMissing: fare rules unavailable for TP-101"
    )
    assert [(s.key, s.before, s.after) for s in bundle.state_changes] == [
        ("stage", "searching", "booking"),
        ("stage", "booking", "retry-later"),
    ]
    assert bundle.run_input == {"destination": "Lisbon"}


def test_stepfork_redactions_become_sftrace_redactions(stepfork_bundles: dict[str, Path]) -> None:
    search = load_bundle(stepfork_bundles["trip"]).calls[0]
    assert search.output["api_key"] == "[REDACTED:sensitive_key]"
    records = json.loads(search.attributes[A.REDACTIONS])
    assert records == [{"field": "output", "path": "$.api_key", "rule": "sensitive_key"}]


def test_an_unfinished_stepfork_trace_is_skipped_with_the_reason(tmp_path: Path) -> None:
    result = import_peer_runs([STEPFORK / "partial.sftrace"], source="stepfork", output=tmp_path)
    assert result.written == []
    assert "not a finished run" in str(result.skipped[0].problem)


def test_import_is_deterministic_and_refuses_to_overwrite(tmp_path: Path) -> None:
    first = import_peer_runs([STEPFORK / "trip.sftrace"], source="stepfork", output=tmp_path)
    spans = (first.written[0].path / "spans.jsonl").read_bytes()  # type: ignore[operator]
    again = import_peer_runs([STEPFORK / "trip.sftrace"], source="stepfork", output=tmp_path)
    assert "already exists" in str(again.skipped[0].problem)
    forced = import_peer_runs(
        [STEPFORK / "trip.sftrace"], source="stepfork", output=tmp_path, overwrite=True
    )
    assert (forced.written[0].path / "spans.jsonl").read_bytes() == spans  # type: ignore[operator]


# --- agenttrace-vcr -----------------------------------------------------------------


def test_an_agenttrace_recording_replays_the_same_agent(tmp_path: Path) -> None:
    recording = AGENTTRACE / "recordings" / "two-orders.json"
    result = import_peer_runs([recording], source="agenttrace", output=tmp_path)
    bundle_path = result.written[0].path
    assert bundle_path is not None
    replayed = replay_run(bundle_path, peer_agents.run_agent, match="unordered")
    assert replayed.status == "completed", replayed.divergence
    assert replayed.return_value == json.loads(recording.read_text())["output"]
    assert len(replayed.matched) == 5
    assert replayed.unused == []
    assert peer_agents.BODIES_RUN == []


def test_agenttrace_values_are_redacted_and_metadata_kept(tmp_path: Path) -> None:
    recording = AGENTTRACE / "recordings" / "two-orders.json"
    assert FAKE_KEY in recording.read_text()  # agenttrace keeps recordings verbatim
    result = import_peer_runs([recording], source="agenttrace", output=tmp_path)
    path = result.written[0].path
    assert path is not None
    assert FAKE_KEY.encode() not in all_bytes(path)
    bundle = load_bundle(path)
    assert bundle.calls[0].output["token"] == "[REDACTED:sensitive_key]"
    run = bundle.spans[0]
    metadata = next(a for a in run["attributes"] if a["key"] == A.METADATA)
    assert json.loads(metadata["value"]["stringValue"]) == {"user_id": "u-7"}
    assert bundle.manifest.agent_version == "v1.2.0"
    notify = bundle.calls[3]
    assert notify.error is not None
    assert notify.error.type == "ConnectionError"


def test_a_crashed_agenttrace_run_replays_its_failure(tmp_path: Path) -> None:
    recording = AGENTTRACE / "recordings" / "crash.json"
    path = import_peer_runs([recording], source="agenttrace", output=tmp_path).written[0].path
    assert path is not None
    failure = load_bundle(path).manifest.failure
    assert failure is not None
    assert failure.type == "RuntimeError"
    replayed = replay_run(path, peer_agents.run_agent)
    assert replayed.status == "failed"
    assert replayed.reproduced_failure


# --- the CLI ------------------------------------------------------------------------


def test_cli_import_prints_a_cases_snippet_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(
        "import", "--from", "stepfork", STEPFORK / "trip.sftrace", STEPFORK / "failed.sftrace",
        "-o", "bundles",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 bundle(s) written" in result.output
    snippet = result.output[result.output.index("[[cases]]") :]
    cases = tomllib.loads(snippet)["cases"]
    assert [case["name"] for case in cases] == ["trip", "failed"]
    for case in cases:
        assert load_bundle(tmp_path / case["bundle"]).agent_name == "trip-planner"


def test_cli_import_from_agenttrace(tmp_path: Path) -> None:
    result = invoke(
        "import", "--from", "agenttrace", *sorted((AGENTTRACE / "recordings").glob("*.json")),
        "-o", tmp_path / "out",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.count("[[cases]]") == 2
    assert len(list((tmp_path / "out").glob("*.sftrace"))) == 2


def test_cli_import_exits_1_when_a_run_is_skipped(tmp_path: Path) -> None:
    result = invoke(
        "import", "--from", "stepfork", STEPFORK / "trip.sftrace", STEPFORK / "partial.sftrace",
        "-o", tmp_path,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "skipped" in result.output
    assert "not a finished run" in result.output


# --- bad input: one clear error, exit 2, nothing written ------------------------------


def unknown_schema(tmp_path: Path) -> Path:
    bundle = tmp_path / "future.sftrace"
    shutil.copytree(STEPFORK / "trip.sftrace", bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["schema_version"] = "0.9"
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def truncated_recording(tmp_path: Path) -> Path:
    text = (AGENTTRACE / "recordings" / "two-orders.json").read_text()
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    return path


BAD_INPUTS = {
    "stepfork": (unknown_schema, "schema_version '0.9' is not supported"),
    "agenttrace": (truncated_recording, "not a complete JSON document"),
}


@pytest.mark.parametrize("source", sorted(BAD_INPUTS))
def test_bad_recordings_are_refused_through_the_api(tmp_path: Path, source: str) -> None:
    make, message = BAD_INPUTS[source]
    good = (
        STEPFORK / "trip.sftrace"
        if source == "stepfork"
        else AGENTTRACE / "recordings" / "crash.json"
    )
    with pytest.raises(BundleError, match=message):
        import_peer_runs([good, make(tmp_path)], source=source, output=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", sorted(BAD_INPUTS))
def test_bad_recordings_are_refused_through_the_cli(tmp_path: Path, source: str) -> None:
    make, message = BAD_INPUTS[source]
    good = (
        STEPFORK / "trip.sftrace"
        if source == "stepfork"
        else AGENTTRACE / "recordings" / "crash.json"
    )
    result = invoke("import", "--from", source, good, make(tmp_path), "-o", tmp_path / "out")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("sftrace: error: ")
    assert message in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_tampered_stepfork_bundle_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "tampered.sftrace"
    shutil.copytree(STEPFORK / "trip.sftrace", bundle)
    events = bundle / "events.jsonl"
    events.write_text(events.read_text().replace("Lisbon", "Berlin"))
    with pytest.raises(BundleError, match="does not match its digest"):
        import_peer_runs([bundle], source="stepfork", output=tmp_path / "out")


def test_an_sftrace_bundle_is_not_a_stepfork_one(tmp_path: Path) -> None:
    first = import_peer_runs([STEPFORK / "trip.sftrace"], source="stepfork", output=tmp_path)
    with pytest.raises(BundleError, match="not a stepfork bundle"):
        import_peer_runs([first.written[0].path], source="stepfork", output=tmp_path / "x")  # type: ignore[list-item]


def test_an_unknown_source_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown source 'vcr'"):
        import_peer_runs([STEPFORK / "trip.sftrace"], source="vcr", output=tmp_path)


# --- migrate-suite ------------------------------------------------------------------


def copy_suite(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """A copy of the fixture suite and its recordings, ``old`` replaced by ``new``."""
    root = tmp_path / "old"
    shutil.copytree(AGENTTRACE, root)
    suite = root / "suite.toml"
    if old:
        suite.write_text(suite.read_text().replace(old, new))
    return suite


def test_migrate_suite_writes_a_suite_that_sftrace_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "support_agent.py").write_text("from peer_agents import run_agent\n")
    output = tmp_path / "new" / "support.sftrace-suite.toml"
    migrated = migrate_suite(copy_suite(tmp_path), output)
    assert [path.name for path in migrated.bundles] == ["two-orders.sftrace", "crash.sftrace"]
    suite = sftrace.load_suite(output)
    assert [case.name for case in suite.cases] == ["two-orders", "crash"]
    two_orders, crash = suite.cases
    assert two_orders.entrypoint == "support_agent:run_agent"
    assert two_orders.match == "unordered"
    assert dict(two_orders.policy.severity_overrides) == {
        "CALL_ORDER_CHANGED": "info",
        "OUTPUT_TEXT_CHANGED": "error",
        "CALL_INPUT_NORMALIZED": "warning",  # agenttrace-vcr's default
    }
    assert dict(crash.policy.severity_overrides)["MISSING_CALL"] == "warning"
    assert dict(crash.policy.severity_overrides)["STATUS_CHANGED"] == "warning"
    # agenttrace-vcr's dot paths are sftrace paths too (shown in their canonical form).
    assert list(crash.policy.ignore_paths) == ["$.generated_at", "$.orders[*].id"]
    outcomes = [result.outcome for result in suite.run()]
    assert outcomes == ["passed", "passed"], [r.error or r.report for r in suite.run()]


def test_a_migrated_suite_fails_on_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # A module name of its own: the previous test imported support_agent.
    (tmp_path / "support_agent_v2.py").write_text(
        "from peer_agents import run_agent_regressed as run_agent\n"
    )
    output = tmp_path / "new.sftrace-suite.toml"
    migrate_suite(copy_suite(tmp_path, "support_agent:", "support_agent_v2:"), output)
    result = sftrace.load_suite(output).cases[0].run()
    assert result.outcome == "failed"
    assert result.report is not None
    assert {f.code for f in result.report.findings if f.severity == "error"} >= {"MISSING_CALL"}


def test_cli_migrate_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    suite = copy_suite(tmp_path)
    result = invoke("migrate-suite", suite, "-o", "tests/support.sftrace-suite.toml")
    assert result.exit_code == 0, result.output
    assert "wrote tests/support.sftrace-suite.toml (2 case(s))" in result.output
    assert sorted(p.name for p in (tmp_path / "tests" / "bundles").iterdir()) == [
        "crash.sftrace",
        "two-orders.sftrace",
    ]
    again = invoke("migrate-suite", suite, "-o", "tests/support.sftrace-suite.toml")
    assert again.exit_code == 2
    assert "already exists" in again.output


BAD_SUITES = {
    "unknown key": (("[policy]", "timeout = 5\n\n[policy]"), "unknown key 'timeout'"),
    "unknown code": (("AGENT_ERROR", "AGENT_CRASHED"), "unknown finding code 'AGENT_CRASHED'"),
}


@pytest.mark.parametrize("kind", sorted(BAD_SUITES))
def test_bad_suites_are_refused_through_the_api(tmp_path: Path, kind: str) -> None:
    edit, message = BAD_SUITES[kind]
    output = tmp_path / "new" / "s.sftrace-suite.toml"
    with pytest.raises(SuiteError, match=message):
        migrate_suite(copy_suite(tmp_path, *edit), output)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("kind", sorted(BAD_SUITES))
def test_bad_suites_are_refused_through_the_cli(tmp_path: Path, kind: str) -> None:
    edit, message = BAD_SUITES[kind]
    result = invoke("migrate-suite", copy_suite(tmp_path, *edit), "-o", tmp_path / "new" / "s.toml")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert message in lines[0]
    assert not (tmp_path / "new").exists()


def test_every_problem_of_a_suite_is_named_in_one_error(tmp_path: Path) -> None:
    suite = copy_suite(tmp_path, "TOOL_ORDER_CHANGED", "ORDER")
    suite.write_text(suite.read_text().replace("[policy]", "timeout = 5\n\n[policy]", 1))
    (suite.parent / "recordings" / "crash.json").write_text("{")
    with pytest.raises(SuiteError) as caught:
        migrate_suite(suite, tmp_path / "new.toml")
    message = str(caught.value)
    assert "3 problems" in message
    assert "'ORDER'" in message
    assert "not a complete JSON document" in message


@pytest.mark.parametrize("source", ["stepfork", "agenttrace"])
def test_a_missing_recording_is_named(tmp_path: Path, source: str) -> None:
    missing = tmp_path / "nowhere.sftrace"
    with pytest.raises(BundleError, match=r"nowhere\.sftrace"):
        import_peer_runs([missing], source=source, output=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_malformed_ignore_path_is_named(tmp_path: Path) -> None:
    suite = copy_suite(tmp_path, '"generated_at"', '"items[oops"')
    with pytest.raises(SuiteError, match=r"items\[oops"):
        migrate_suite(suite, tmp_path / "new" / "s.sftrace-suite.toml")
    assert not (tmp_path / "new").exists()
