"""Regenerate the peer fixtures: recordings made by the real stepfork and agenttrace-vcr.

The tests of ``sftrace import --from stepfork|agenttrace`` and ``sftrace migrate-suite``
read recordings made by the peers themselves, committed under ``tests/fixtures/``, so
the tests never install the peers. This script records a few small agent runs with
each peer, in a throwaway virtual environment of its own (the peers are not
dependencies of sftrace, and agenttrace-vcr needs Python 3.12):

    python3 -m venv /tmp/peer-stepfork
    /tmp/peer-stepfork/bin/pip install stepfork==0.2.1
    python3.12 -m venv /tmp/peer-agenttrace
    /tmp/peer-agenttrace/bin/pip install agenttrace-vcr==0.1.0
    python scripts/make_peer_fixtures.py \\
        --stepfork-python /tmp/peer-stepfork/bin/python \\
        --agenttrace-python /tmp/peer-agenttrace/bin/python

It replaces ``tests/fixtures/stepfork/`` and ``tests/fixtures/agenttrace/``. Run ids and
timestamps differ on every run; the tests only rely on what the agents below do. The
sftrace agents the tests replay the converted runs with (``tests/peer_agents.py``)
make the same calls with the same inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

# A credential-shaped value each peer's run meets in a tool result: the stepfork
# recording redacts it; agenttrace-vcr keeps recordings verbatim.
FAKE_KEY = "sk-proj-" + "Zt7Qm2Lx9Vb4Nc8Rk1Wp5Hs3Jd6Fg0Ya"


def record_stepfork(out: Path) -> None:
    """Three runs of a trip-planning agent with stepfork 0.2.1."""
    import stepfork

    @stepfork.trace_tool(name="convert_currency")
    def convert_currency(amount: float, currency: str = "EUR") -> dict:
        return {"amount": round(amount * 0.92, 2), "currency": currency}

    @stepfork.trace_tool(name="search_flights")
    def search_flights(destination: str, max_price: int = 500) -> dict:
        # A nested tool call: recorded as a child of this one.
        price = convert_currency(420.0)
        return {
            "flights": [{"id": "TP-101", "to": destination, "price": price}],
            "api_key": FAKE_KEY,
        }

    @stepfork.trace_tool(name="book_flight")
    def book_flight(flight_id: str) -> dict:
        raise TimeoutError(f"booking service timed out for {flight_id}")

    def overloaded() -> dict:
        raise ConnectionError("model overloaded")

    def plan(request: dict, session: stepfork.RecordingSession) -> dict:
        found = search_flights(request["destination"])
        ids = ", ".join(flight["id"] for flight in found["flights"])
        with session.llm_call(
            provider="openai",
            model="gpt-4o-mini",
            input={"messages": [{"role": "user", "content": f"Pick one of {ids}"}]},
        ) as call:
            call.set_output(
                {"choice": "TP-101", "reason": "cheapest"},
                prompt_tokens=42,
                completion_tokens=7,
                total_tokens=49,
                cost_usd=0.00021,
            )
        session.record_state_change(key="stage", before="searching", after="booking")
        try:
            book_flight("TP-101")
        except TimeoutError:
            session.record_state_change(key="stage", before="booking", after="retry-later")
        summary = stepfork.llm_request(
            provider="openai",
            model="gpt-4o-mini",
            input={"messages": [{"role": "user", "content": "Summarise the plan"}]},
            call=lambda: {"text": "Flight TP-101 held; booking to retry."},
        )
        # An LLM call that fails, handled by the agent; an error the agent reports itself.
        try:
            stepfork.llm_request(
                provider="anthropic",
                model="claude-3-5-haiku",
                input={"messages": [{"role": "user", "content": "Translate the summary"}]},
                call=overloaded,
            )
        except ConnectionError:
            session.record_error("FareRulesMissing", "fare rules unavailable for TP-101")
        return {"flight": "TP-101", "booked": False, "summary": summary["text"]}

    request = {"destination": "Lisbon"}
    with stepfork.record("trip-planner", output=out / "trip.sftrace", run_input=request) as s:
        s.set_output(plan(request, s))

    # A run that fails: the agent raises after its first tool call.
    failing = {"destination": "Atlantis"}
    try:
        with stepfork.record("trip-planner", output=out / "failed.sftrace", run_input=failing):
            found = search_flights(failing["destination"], max_price=100)
            raise ValueError(f"no flight under 100 among {len(found['flights'])}")
    except ValueError:
        pass

    # The offline trace API: a hand-built trace of one tool call (partial, no run_start).
    trace = stepfork.Trace(agent_name="hand-built")
    trace.add(stepfork.ToolCall(name="search_flights", input={"destination": "Oslo"}))
    trace.save(out / "partial.sftrace")


def record_agenttrace(out: Path) -> None:
    """Two runs of a support agent with agenttrace-vcr 0.1.0, and a suite naming them."""
    import asyncio
    import json

    from agenttrace import AgentTracer
    from agenttrace.suite import format_recording
    from agenttrace.transport import build_payload

    tracer = AgentTracer()

    @tracer.tool
    async def get_order(order_id: str, include_items: bool = False) -> dict:
        return {"id": order_id, "status": "shipped", "token": FAKE_KEY}

    @tracer.tool(name="refund_policy")
    def refund_policy(days_since_delivery: int) -> dict:
        return {"eligible": days_since_delivery <= 30}

    @tracer.tool
    def notify(channel: str, text: str) -> None:
        raise ConnectionError(f"{channel} is down")

    async def support(request: dict) -> dict:
        async with tracer.trace(
            "support-agent", input=request, agent_version="v1.2.0", user_id="u-7"
        ) as trace:
            orders = await asyncio.gather(get_order("A-1"), get_order("A-2", include_items=True))
            policy = refund_policy(45)
            with contextlib.suppress(ConnectionError):
                notify("sms", "Your refund was reviewed")
            tracer.record_tool_call("lookup_faq", {"topic": "refunds"}, {"answer": "30 days"})
            trace.set_output({"orders": [o["status"] for o in orders], "refund": policy})
        return trace.output or {}

    async def crashing(request: dict) -> None:
        async with tracer.trace("support-agent", input=request):
            await get_order(request["order_id"])
            raise RuntimeError("lost the conversation state")

    asyncio.run(support({"message": "Where are my orders?"}))
    with contextlib.suppress(RuntimeError):
        asyncio.run(crashing({"order_id": "B-9"}))
    recordings = out / "recordings"
    recordings.mkdir(parents=True)
    names = ("two-orders", "crash")
    for name, trace in zip(names, tracer.completed_traces, strict=True):
        (recordings / f"{name}.json").write_text(format_recording(build_payload(trace)))
    cases = "".join(
        f'\n[[cases]]\nname = "{name}"\nrecording = "recordings/{name}.json"\n' for name in names
    )
    (out / "suite.toml").write_text(
        'name = "support"\n'
        'agent = "support_agent:run_agent"\n\n'
        "[policy]\n"
        'severity_overrides = { TOOL_ORDER_CHANGED = "info", OUTPUT_TEXT_CHANGED = "error" }\n'
        'ignore_paths = ["generated_at"]\n' + cases + "\n[cases.policy]\n"
        'ignore_paths = ["orders.*.id"]\n'
        'severity_overrides = { AGENT_ERROR = "warning", MISSING_TOOL_CALL = "warning" }\n'
    )
    json.loads((recordings / "crash.json").read_text())  # written whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stepfork-python", type=Path)
    parser.add_argument("--agenttrace-python", type=Path)
    parser.add_argument("--record", choices=("stepfork", "agenttrace"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record:  # inside the peer's virtual environment
        args.out.mkdir(parents=True)
        (record_stepfork if args.record == "stepfork" else record_agenttrace)(args.out)
        return 0
    if not args.stepfork_python or not args.agenttrace_python:
        parser.error("give --stepfork-python and --agenttrace-python (see the docstring)")
    for peer, python in (
        ("stepfork", args.stepfork_python),
        ("agenttrace", args.agenttrace_python),
    ):
        target = FIXTURES / peer
        shutil.rmtree(target, ignore_errors=True)
        command = [str(python), __file__, "--record", peer, "--out", str(target)]
        subprocess.run(command, check=True, cwd=ROOT)
        print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
