"""Fork the recorded refund at the model's decision: what if it had escalated instead?

Run from anywhere: ``python examples/refund_agent/fork_decision.py [--out PATH]``.

The recorded run (``bundles/refund_outside_window.sftrace``) looked the order up, asked
the model, and refunded. This forks it at the model's call (``support-1#1``, call 2):
the order lookup is answered from the recording, the model's answer is replaced by an
override that escalates, and from there the agent runs for real, so it takes the other
branch and opens a ticket with ``escalate_to_human`` (an in-memory stand-in). The forked
run is saved as a bundle, then replayed frozen: nothing runs, and it matches exactly.

The same fork from the command line, in this directory::

    sftrace fork bundles/refund_outside_window.sftrace -e refund_agent:handle \\
        --at 'support-1#1' --override @escalate.json -o forked.sftrace
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import refund_agent  # noqa: E402

import sftrace  # noqa: E402

BUNDLE = HERE / "bundles" / "refund_outside_window.sftrace"
# The model's answer at the fork point, in the shape the recording holds.
OVERRIDE = json.loads((HERE / "escalate.json").read_text(encoding="utf-8"))


def fork_and_check(out: Path) -> sftrace.ReplayResult:
    """Fork the recorded run at the model's decision into ``out``; replay it frozen."""
    refund_agent.ESCALATIONS.clear()
    refund_agent.REFUNDS_ISSUED.clear()
    forked = sftrace.fork(
        BUNDLE, refund_agent.handle, at="support-1#1", override=OVERRIDE, save=out, overwrite=True
    )
    for call in forked.matched:
        print(f"  {call.number}. {call.recorded.label:<24} {call.action}")
    print(f"forked run: {forked.status}, output {forked.output}")
    print(f"tickets opened for real: {refund_agent.ESCALATIONS}")
    print(f"refunds issued: {refund_agent.REFUNDS_ISSUED}")
    print(f"saved {out}: derived_from {sftrace.load_bundle(out).manifest.derived_from}")

    refund_agent.ESCALATIONS.clear()
    frozen = sftrace.replay_run(out, refund_agent.handle)
    verdict = sftrace.compare(out, frozen).verdict
    print(f"frozen replay of the fork: {frozen.status}, compare {verdict}")
    print(f"tickets opened by the frozen replay: {refund_agent.ESCALATIONS}")
    return forked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to save the forked run")
    args = parser.parse_args(argv)
    if args.out is not None:
        fork_and_check(args.out)
        return 0
    with tempfile.TemporaryDirectory() as directory:
        fork_and_check(Path(directory) / "forked.sftrace")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
