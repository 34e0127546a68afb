"""``sftrace.minimize``: shrink a failing run's recorded outputs while the failure reproduces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import minimize_agents as flights
from sftrace import (
    BundleError,
    ConfigError,
    Expectations,
    MinimizeProgress,
    ReplayError,
    aminimize,
    load_bundle,
    minimize,
    record,
    replay_run,
    validate_bundle,
)


@pytest.fixture
def failing(tmp_path: Path) -> Path:
    return flights.record_failure(tmp_path / "failure.sftrace")


def output_of(bundle: Any, name: str) -> Any:
    (call,) = [call for call in load_bundle(bundle).calls if call.name == name]
    return call.output


def test_200_flights_minimize_to_the_one_that_triggers_the_bug(
    failing: Path, tmp_path: Path
) -> None:
    assert len(output_of(failing, "search_flights")) == 200
    result = minimize(failing, flights.book_cheapest, output=tmp_path / "small.sftrace")
    assert result.reproduces == "KeyError: 'XXX'"
    assert result.complete
    assert result.verified
    (flight,) = output_of(result.path, "search_flights")
    assert flight["currency"] == "XXX"  # the flight with no exchange rate, and little else
    assert set(flight) <= {"id", "price", "currency"}
    assert result.output_bytes_after < result.output_bytes_before / 100
    assert result.calls_before == result.calls_after == 2
    assert result.replays <= 500
    # The LLM call records the prompt the agent made from the shrunk result.
    llm = next(call for call in result.bundle.calls if call.kind == "llm")
    assert llm.input == flights.prompt([flight])


def test_the_minimized_bundle_replays_strictly_and_reproduces_the_failure(
    failing: Path, tmp_path: Path
) -> None:
    result = minimize(failing, flights.book_cheapest, output=tmp_path / "small.sftrace")
    replayed = replay_run(result.path, flights.book_cheapest, tiers=["exact"])
    assert replayed.status == "failed"
    assert replayed.reproduced
    assert replayed.unused == []
    assert [m.tier for m in replayed.matched] == ["exact", "exact"]
    assert (type(replayed.error), str(replayed.error)) == (KeyError, "'XXX'")


def test_the_minimized_bundle_is_valid_and_says_where_it_came_from(
    failing: Path, tmp_path: Path
) -> None:
    original = load_bundle(failing)
    result = minimize(failing, flights.book_cheapest, output=tmp_path / "small.sftrace")
    validate_bundle(result.path)
    manifest = result.bundle.manifest
    assert manifest.derived_from == {"run_id": original.run_id, "how": "minimize"}
    assert manifest.status == "failed"
    assert (manifest.failure.type, manifest.failure.message) == ("KeyError", "'XXX'")  # type: ignore[union-attr]
    assert result.bundle.run_input == "Lisbon"
    links = result.bundle.run_span.get("links", [])
    assert [(link["traceId"], link["spanId"]) for link in links] == [
        (original.manifest.trace_id, original.manifest.root_span_id)
    ]


def test_async_entrypoints_minimize_too(tmp_path: Path) -> None:
    bundle = flights.record_failure(tmp_path / "async.sftrace", flights.abook_cheapest)
    result = minimize(bundle, flights.abook_cheapest, output=tmp_path / "small.sftrace")
    assert result.verified
    assert [flight["currency"] for flight in output_of(result.path, "search_flights")] == ["XXX"]


def test_aminimize_awaits_the_entrypoint_in_the_running_loop(tmp_path: Path) -> None:
    import asyncio

    bundle = flights.record_failure(tmp_path / "async.sftrace", flights.abook_cheapest)
    loops: list[asyncio.AbstractEventLoop] = []

    async def entry(destination: str) -> Any:
        loops.append(asyncio.get_running_loop())
        return await flights.abook_cheapest(destination)

    async def main() -> Any:
        result = await aminimize(bundle, entry, output=tmp_path / "small.sftrace")
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.verified
    assert len(loops) == result.replays
    assert set(loops) == {loop}
    assert [flight["currency"] for flight in output_of(result.path, "search_flights")] == ["XXX"]


def test_minimizing_is_deterministic(failing: Path, tmp_path: Path) -> None:
    first = minimize(failing, flights.book_cheapest, output=tmp_path / "one.sftrace")
    second = minimize(failing, flights.book_cheapest, output=tmp_path / "two.sftrace")
    assert first.replays == second.replays
    assert [c.output_json for c in first.bundle.calls] == [
        c.output_json for c in second.bundle.calls
    ]


def test_max_replays_bounds_every_replay_and_the_result_is_still_a_reproduction(
    failing: Path, tmp_path: Path
) -> None:
    runs: list[str] = []

    def counted(destination: str) -> Any:
        runs.append(destination)
        return flights.book_cheapest(destination)

    seen: list[MinimizeProgress] = []
    result = minimize(
        failing, counted, output=tmp_path / "small.sftrace", max_replays=6, progress=seen.append
    )
    assert len(runs) == result.replays == 6
    assert [p.replays for p in seen] == [1, 2, 3, 4, 5, 6]
    assert all(p.max_replays == 6 for p in seen)
    assert not result.complete
    assert result.verified
    # Three candidates: all 200 flights removed (the bug goes), the first 100 (it stays),
    # then the first 50 of the other 100 (the bug goes: it was the 38th).
    assert len(output_of(result.path, "search_flights")) == 100
    assert seen[-1].output_bytes < seen[0].output_bytes == seen[0].output_bytes_before


def test_a_run_that_did_not_fail_needs_expectations(tmp_path: Path) -> None:
    with record("ok", output=tmp_path / "ok.sftrace", run_input="Lisbon") as session:
        session.set_output(flights.search_flights("Lisbon")[:1])
    with pytest.raises(ConfigError, match=r"nothing to minimize: .* completed without failing"):
        minimize(tmp_path / "ok.sftrace", flights.search_flights, output=tmp_path / "s.sftrace")
    assert not (tmp_path / "s.sftrace").exists()


def test_a_failure_the_entrypoint_does_not_bring_back_is_refused(
    failing: Path, tmp_path: Path
) -> None:
    def fixed(destination: str) -> Any:
        found = flights.search_flights(destination)
        return len([f for f in found if f["currency"] in flights.RATES])

    with pytest.raises(ReplayError, match=r"does not reproduce .* the replay with no failure"):
        minimize(failing, fixed, output=tmp_path / "s.sftrace")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_replays": 2}, ConfigError, "max_replays must be at least 3"),
        ({"max_replays": "many"}, ConfigError, "max_replays must be an integer"),
        (
            {"expect": Expectations(called=["x"]), "expect_output": "o.json"},
            ConfigError,
            "not both",
        ),
        ({"expect_output": "missing.json"}, ConfigError, "'missing.json' not found"),
        ({"entrypoint": "no_such_module:run"}, ConfigError, "cannot import"),
    ],
)
def test_bad_arguments_raise_before_any_replay(
    failing: Path, tmp_path: Path, options: dict[str, Any], error: type, message: str
) -> None:
    entrypoint = options.pop("entrypoint", flights.book_cheapest)
    with pytest.raises(error, match=message):
        minimize(failing, entrypoint, output=tmp_path / "s.sftrace", **options)


def test_an_existing_output_is_replaced_only_with_overwrite(failing: Path, tmp_path: Path) -> None:
    target = tmp_path / "small.sftrace"
    minimize(failing, flights.book_cheapest, output=target, max_replays=3)
    with pytest.raises(BundleError, match="already exists"):
        minimize(failing, flights.book_cheapest, output=target, max_replays=3)
    result = minimize(failing, flights.book_cheapest, output=target, max_replays=3, overwrite=True)
    assert result.path == target


# --- a run that completed with the wrong behaviour, minimized against expectations ----


def test_a_run_that_behaved_wrongly_minimizes_against_its_unmet_expectations(
    tmp_path: Path,
) -> None:
    flights.record_refunds(tmp_path / "r.sftrace")
    (tmp_path / "expected.json").write_text('{"refunded": []}')
    (tmp_path / "trajectory.toml").write_text('not_called = ["issue_refund"]\n')
    result = minimize(
        tmp_path / "r.sftrace",
        flights.refund_all,
        output=tmp_path / "small.sftrace",
        expect_output=tmp_path / "expected.json",
        expect_trajectory=tmp_path / "trajectory.toml",
    )
    assert result.reproduces == "2 expectations not met: output, not_called:issue_refund"
    assert result.verified
    (order,) = output_of(result.path, "lookup_orders")
    assert order["refundable"] is True
    assert "final_sale" not in order
    assert "total" not in order
    assert [call.name for call in result.bundle.calls] == ["lookup_orders", "issue_refund"]


def test_keep_passing_keeps_what_the_fix_reads(tmp_path: Path) -> None:
    """Minimized against the buggy agent alone, the order loses ``final_sale`` (the bug
    never reads it), and the fixed agent fails on the small bundle with KeyError. With
    keep_passing the fixed agent must pass on every kept shrink: ``final_sale`` stays, and
    the small bundle carries the fix's regression test."""
    flights.record_refunds(tmp_path / "r.sftrace")
    expect = Expectations(output={"refunded": []}, not_called=["issue_refund"])
    plain = minimize(
        tmp_path / "r.sftrace", flights.refund_all, output=tmp_path / "plain.sftrace", expect=expect
    )
    assert plain.fixed_passes is None
    fixed_on_plain = replay_run(plain.path, flights.refund_fixed)
    assert isinstance(fixed_on_plain.error, KeyError)
    kept = minimize(
        tmp_path / "r.sftrace",
        flights.refund_all,
        output=tmp_path / "kept.sftrace",
        expect=expect,
        keep_passing=flights.refund_fixed,
    )
    assert kept.verified
    assert kept.fixed_passes is True
    (order,) = output_of(kept.path, "lookup_orders")
    assert order["final_sale"] is True
    assert "total" not in order  # what neither agent reads still goes
    fixed = replay_run(kept.path, flights.refund_fixed)
    assert (fixed.status, fixed.divergence, fixed.output) == ("completed", None, {"refunded": []})


def test_keep_passing_needs_an_agent_that_passes_on_the_recorded_run(tmp_path: Path) -> None:
    flights.record_refunds(tmp_path / "r.sftrace")
    with pytest.raises(ConfigError, match="on the recorded run it does not pass"):
        minimize(
            tmp_path / "r.sftrace",
            flights.refund_all,
            output=tmp_path / "small.sftrace",
            expect=Expectations(not_called=["issue_refund"]),
            keep_passing=flights.refund_all,  # the buggy agent itself
        )
    with pytest.raises(ConfigError, match="max_replays must be at least 5"):
        minimize(
            tmp_path / "r.sftrace",
            flights.refund_all,
            output=tmp_path / "small.sftrace",
            expect=Expectations(not_called=["issue_refund"]),
            keep_passing=flights.refund_fixed,
            max_replays=4,
        )


def test_a_run_that_meets_the_expectations_is_refused(tmp_path: Path) -> None:
    flights.record_refunds(tmp_path / "r.sftrace")
    with pytest.raises(ReplayError, match="meets every expectation"):
        minimize(
            tmp_path / "r.sftrace",
            flights.refund_all,
            output=tmp_path / "small.sftrace",
            expect=Expectations(called=["issue_refund"]),
        )


def test_a_minimized_bundle_whose_strict_replay_does_not_reproduce_is_not_verified(
    failing: Path, tmp_path: Path
) -> None:
    flights.RUNS.clear()
    result = minimize(failing, flights.flaky, output=tmp_path / "s.sftrace", max_replays=3)
    assert len(flights.RUNS) == 3  # the first replay, the one that saves, the check
    assert not result.verified
    assert result.bundle.manifest.failure is not None  # saved from the second, which failed
