"""Re-record the booking agent's bundles (the buggy agent, as in production).

Run from anywhere: ``python examples/booking_agent/record.py [--out DIRECTORY]``
(default: ``bundles/`` next to this script).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import booking_agent  # noqa: E402

import sftrace  # noqa: E402

REQUESTS = {
    # The production failure: the picked fare had sold out; three retries, then a crash.
    "sold_out_fare": {"destination": "Lisbon", "passenger": "Ada Lovelace"},
    # A booking that works; its bundle pins that behaviour.
    "booking_ok": {"destination": "Porto", "passenger": "Grace Hopper"},
}


async def record_all(out: Path) -> list[Path]:
    """Record every request into ``out/<name>.sftrace``; return the bundle paths."""
    written = []
    for name, request in REQUESTS.items():
        path = out / f"{name}.sftrace"
        try:
            async with sftrace.record(
                "booking-agent", output=path, overwrite=True, run_input=request
            ) as session:
                session.set_output(await booking_agent.handle(request))
        except RuntimeError as exc:
            print(f"{name}: the agent failed, as in production: {exc}")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE / "bundles")
    args = parser.parse_args(argv)
    for path in asyncio.run(record_all(args.out)):
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
