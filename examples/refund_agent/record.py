"""Re-record the refund agent's bundles (the buggy agent, as in production).

Run from anywhere: ``python examples/refund_agent/record.py [--out DIRECTORY]``
(default: ``bundles/`` next to this script).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import refund_agent  # noqa: E402

import sftrace  # noqa: E402

REQUESTS = {
    # The production failure: a refund 45 days after delivery was granted.
    "refund_outside_window": {
        "order_id": "A-1001",
        "message": "My headphones stopped working. I want my money back.",
    },
    # A request the agent handles correctly; its bundle pins that behaviour.
    "refund_inside_window": {
        "order_id": "A-1002",
        "message": "The case does not fit my phone, please refund it.",
    },
}


def record_all(out: Path) -> list[Path]:
    """Record every request into ``out/<name>.sftrace``; return the bundle paths."""
    written = []
    for name, request in REQUESTS.items():
        path = out / f"{name}.sftrace"
        with sftrace.record(
            "refund-agent", output=path, overwrite=True, run_input=request
        ) as session:
            session.set_output(refund_agent.handle(request))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE / "bundles")
    args = parser.parse_args(argv)
    for path in record_all(args.out):
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
