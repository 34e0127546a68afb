"""Record the quickstart agent's failing run into a bundle, show it, and replay it offline.

Run from anywhere: ``python examples/quickstart/main.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quickstart  # noqa: E402

import sftrace  # noqa: E402

TASK = "Book the cheapest flight to Lisbon"
BUNDLE = Path(".sftrace") / "quickstart" / "failure.sftrace"


def main() -> int:
    print(f"1. Recording the booking agent: {TASK!r}")
    try:
        with sftrace.record(
            "booking-agent", output=BUNDLE, overwrite=True, run_input=TASK
        ) as session:
            session.set_output(quickstart.run_agent(TASK))
    except ValueError as exc:
        print(f"   the agent failed, as in production: ValueError: {exc}")
    print(f"   bundle written: {session.path}\n")

    bundle = sftrace.load_bundle(BUNDLE)
    manifest = bundle.manifest
    print(f"2. What was recorded (run {manifest.run_id}, status {manifest.status}):")
    for call in bundle.calls:
        outcome = f"raised {call.error.type}: {call.error.message}" if call.error else "ok"
        print(f"   #{call.seq} {call.label:<24} input={call.input_json[:60]}  -> {outcome}")
    totals = manifest.totals
    print(
        f"   {totals.tool_calls} tool calls, {totals.llm_calls} LLM call, "
        f"{totals.total_tokens} tokens, {totals.duration_ms:.1f} ms\n"
    )

    print("3. Replaying it offline (frozen: no tool or model runs for real)")
    quickstart.REAL_CALLS.clear()
    result = sftrace.replay_run(BUNDLE, "quickstart:run_agent")
    for matched in result.matched:
        print(f"   #{matched.recorded.seq} {matched.recorded.label:<24} {matched.action}")
    print(f"   status: {result.status}; error: {type(result.error).__name__}: {result.error}")
    print(f"   real calls made during the replay: {len(quickstart.REAL_CALLS)}")
    print(f"   recorded failure reproduced: {result.reproduced_failure}")
    ok = result.reproduced_failure and not quickstart.REAL_CALLS and not result.unused
    print("\nThe failure is now a deterministic, offline test case." if ok else "\nUNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
