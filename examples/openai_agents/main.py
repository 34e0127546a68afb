"""Record an OpenAI Agents SDK run (a handoff and two tools), then replay it offline.

Run from anywhere: ``python examples/openai_agents/main.py`` (needs ``sftrace[openai-agents]``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fake_responses  # noqa: E402
import trip_agents  # noqa: E402

import sftrace  # noqa: E402

QUESTION = "I fly to Lisbon tomorrow with 200 EUR. What should I expect?"
BUNDLES = Path(".sftrace") / "openai_agents"


def replay(bundle: Path, entrypoint: str, answer: str) -> bool:
    fake_responses.REQUESTS.clear()
    trip_agents.TOOL_RUNS.clear()
    result = sftrace.replay_run(bundle, entrypoint)
    for matched in result.matched:
        print(f"   #{matched.recorded.seq} {matched.recorded.label:<28} {matched.action}")
    print(f"   answer: {result.return_value}")
    print(
        f"   requests sent: {len(fake_responses.REQUESTS)}; tools run: {len(trip_agents.TOOL_RUNS)}"
    )
    return (
        result.status == "completed"
        and result.return_value == answer
        and not fake_responses.REQUESTS
        and not trip_agents.TOOL_RUNS
        and not result.unused
    )


def main() -> int:
    bundle, streamed = BUNDLES / "trip.sftrace", BUNDLES / "trip-streamed.sftrace"
    print(f"1. Recording the travel assistant (Runner.run_sync): {QUESTION!r}")
    with sftrace.record("travel", output=bundle, overwrite=True, run_input=QUESTION) as session:
        answer = trip_agents.run_agent(QUESTION)
        session.set_output(answer)
    print(f"   answer: {answer}")
    print(f"   {len(fake_responses.REQUESTS)} requests sent to the (offline) OpenAI API\n")

    print("2. What was recorded:")
    for call in sftrace.load_bundle(bundle).calls:
        tokens = call.attributes.get("sftrace.usage.total_tokens", "")
        print(f"   #{call.seq} {call.label:<28} {f'{tokens} tokens' if tokens else call.input}")
    print()

    print("3. Replaying it offline (frozen: no request, no tool runs)")
    ok = replay(bundle, "trip_agents:run_agent", answer)

    print("\n4. The same with Runner.run_streamed: recorded event by event, then replayed")
    with sftrace.record("travel", output=streamed, overwrite=True, run_input=QUESTION) as run:
        streamed_answer = asyncio.run(trip_agents.run_agent_streamed(QUESTION))
        run.set_output(streamed_answer)
    ok = replay(streamed, "trip_agents:run_agent_streamed", streamed_answer) and ok
    print("\nThe runs replay deterministically, offline." if ok else "\nUNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
