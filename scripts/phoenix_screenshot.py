"""Screenshot a recorded run in Arize Phoenix's UI (a dev tool for the docs, not CI).

Starts Phoenix on free 127.0.0.1 ports in a temporary directory (telemetry off), records
the quickstart agent's failing run with OTLP export to it, waits until Phoenix stored
every span, and takes a screenshot of the trace with headless Chromium::

    .venv/bin/python scripts/phoenix_screenshot.py [--output docs/img/phoenix-run.png]

Needs ``pip install -e '.[test]'`` (Phoenix) and Chromium (Debian: ``apt-get install
chromium``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))

import quickstart  # noqa: E402

import sftrace  # noqa: E402

PROJECT = "sftrace-quickstart"
TASK = "Book the cheapest flight to Lisbon"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return orjson.loads(reply.read())


def wait(what: str, ready: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, urllib.error.URLError, KeyError, StopIteration):
            result = ready()
            if result:
                return result
        time.sleep(0.25)
    raise SystemExit(f"{what}: not ready after {timeout:.0f}s")


@contextlib.contextmanager
def phoenix_server(workdir: Path) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(free_port()),
        PHOENIX_WORKING_DIR=str(workdir),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
    )
    log = open(workdir / "phoenix.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "phoenix.server.main", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait("phoenix", lambda: urllib.request.urlopen(f"{url}/healthz", timeout=2).status == 200)
        yield url
    finally:
        process.terminate()
        process.wait(15)
        log.close()


def record_run(url: str, workdir: Path) -> str:
    """Record the quickstart's failing run, exported to Phoenix; return its trace id."""
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "booking-agent", "openinference.project.name": PROJECT}
        )
    )
    sftrace.configure(tracer_provider=provider, bundle_dir=workdir, otlp_endpoint=url)
    try:
        with sftrace.record("booking-agent", run_input=TASK) as session:
            session.set_output(quickstart.run_agent(TASK))
    except ValueError as exc:
        print(f"recorded the failing run: ValueError: {exc}")
    provider.force_flush()
    return session.trace_id or ""


def screenshot(page: str, output: Path, size: str) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium not found (Debian: apt-get install chromium)")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sftrace-chromium-") as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={size}",
                "--virtual-time-budget=20000",  # let the single-page app load and render
                f"--screenshot={output}",
                page,
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "img" / "phoenix-run.png")
    parser.add_argument("--size", default="1600,1000", help="window size, WIDTH,HEIGHT")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="sftrace-phoenix-") as tmp,
        phoenix_server(Path(tmp)) as url,
    ):
        trace_id = record_run(url, Path(tmp) / "traces")
        spans = wait(
            "spans in Phoenix",
            lambda: [
                s
                for s in get(f"{url}/v1/projects/{PROJECT}/spans?limit=100")["data"]
                if s["context"]["trace_id"] == trace_id
            ][3:],  # all four spans stored
        )
        assert spans
        project = next(p for p in get(f"{url}/v1/projects")["data"] if p["name"] == PROJECT)
        page = f"{url}/projects/{project['id']}/traces/{trace_id}"
        screenshot(page, args.output, args.size)
        print(f"screenshot of {page} written to {args.output}")


if __name__ == "__main__":
    main()
