"""Record the MCP trip agent's run, then replay it offline with no MCP server started.

Run from anywhere: ``python examples/mcp_agent/main.py`` (needs ``sftrace[mcp]``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trip_agent  # noqa: E402

import sftrace  # noqa: E402

REQUEST = "Trip: Lisbon, Atlantis, Oslo"
BUNDLE = Path(".sftrace") / "mcp_agent" / "trip.sftrace"
STARTS = Path(".sftrace") / "mcp_agent" / "server-starts.txt"


def server_starts() -> int:
    return STARTS.read_text().count("started") if STARTS.exists() else 0


def main() -> int:
    STARTS.parent.mkdir(parents=True, exist_ok=True)
    STARTS.unlink(missing_ok=True)
    os.environ["WEATHER_SERVER_STARTS"] = str(STARTS.resolve())

    print(f"1. Recording the trip agent: {REQUEST!r}")
    with sftrace.record("trip-agent", output=BUNDLE, overwrite=True, run_input=REQUEST) as session:
        plan = asyncio.run(trip_agent.run_agent(REQUEST))
        session.set_output(plan)
    print("   " + plan.replace("\n", "\n   "))
    print(f"   MCP server processes started: {server_starts()}")
    print(f"   bundle written: {session.path}\n")

    print("2. What was recorded:")
    for call in sftrace.load_bundle(BUNDLE).calls:
        flag = " (isError)" if isinstance(call.output, dict) and call.output.get("isError") else ""
        print(f"   #{call.seq} {call.label:<32} {call.input}{flag}")
    print()

    print("3. Replaying it offline (frozen: no server, no request)")
    before = server_starts()
    result = sftrace.replay_run(BUNDLE, "trip_agent:run_agent")
    for matched in result.matched:
        print(f"   #{matched.recorded.seq} {matched.recorded.label:<32} {matched.action}")
    started = server_starts() - before
    print(f"   MCP server processes started: {started}")
    ok = (
        result.status == "completed"
        and result.return_value == plan
        and started == 0
        and not result.unused
    )
    print("\nThe run replays deterministically, offline." if ok else "\nUNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
