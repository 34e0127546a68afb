"""Record the OpenAI support agent's run, then replay it offline with no request sent.

Run from anywhere: ``python examples/openai_agent/main.py`` (needs ``sftrace[openai]``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fake_openai  # noqa: E402
import support_agent  # noqa: E402

import sftrace  # noqa: E402

QUESTION = "My order A-1002 never arrived. Can you help?"
BUNDLE = Path(".sftrace") / "openai_agent" / "support.sftrace"


def main() -> int:
    print(f"1. Recording the support agent: {QUESTION!r}")
    with sftrace.record(
        "support-agent", output=BUNDLE, overwrite=True, run_input=QUESTION
    ) as session:
        answer = support_agent.run_agent(QUESTION)
        session.set_output(answer)
    print(f"   answer: {answer}")
    print(f"   {len(fake_openai.REQUESTS)} requests sent to the (offline) OpenAI API")
    print(f"   bundle written: {session.path}\n")

    bundle = sftrace.load_bundle(BUNDLE)
    print("2. What was recorded:")
    for call in bundle.calls:
        tokens = call.attributes.get("sftrace.usage.total_tokens", "")
        streamed = (
            " (streamed)" if isinstance(call.output, dict) and "chunks" in call.output else ""
        )
        print(f"   #{call.seq} {call.label:<28} {f'{tokens} tokens' if tokens else ''}{streamed}")
    print()

    print("3. Replaying it offline (frozen: no request, no tool runs)")
    fake_openai.REQUESTS.clear()
    support_agent.TOOL_RUNS.clear()
    result = sftrace.replay_run(BUNDLE, "support_agent:run_agent")
    for matched in result.matched:
        print(f"   #{matched.recorded.seq} {matched.recorded.label:<28} {matched.action}")
    print(f"   answer: {result.return_value}")
    print(
        f"   requests sent: {len(fake_openai.REQUESTS)}; tools run: {len(support_agent.TOOL_RUNS)}"
    )
    ok = (
        result.status == "completed"
        and result.return_value == answer
        and result.reproduced
        and not fake_openai.REQUESTS
        and not support_agent.TOOL_RUNS
        and not result.unused
    )
    print("\nThe run replays deterministically, offline." if ok else "\nUNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
