"""The quickstart booking agent as it runs in production: configured by environment only.

``OTEL_EXPORTER_OTLP_ENDPOINT`` (and ``OTEL_SERVICE_NAME``...) make sftrace export every
recorded run to the collector; no code change is needed. The spans still queued when
the process exits are sent by the tracer provider's shutdown. Prints the run's trace id.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "quickstart"))

import quickstart

import sftrace

TASK = "Book the cheapest flight to Lisbon"


def main() -> None:
    try:
        with sftrace.record("booking-agent", run_input=TASK) as session:
            session.set_output(quickstart.run_agent(TASK))
    except ValueError as exc:
        print(f"agent failed, as in production: ValueError: {exc}", file=sys.stderr)
    print(session.trace_id)


if __name__ == "__main__":
    main()
