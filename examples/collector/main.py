"""From production to a regression test through an OpenTelemetry collector.

1. Start a Rotel collector on free 127.0.0.1 ports, configured by
   ``collector-config/rotel.env``, forwarding to a stand-in for the OpenTelemetry
   Collector's ``file`` exporter (Rotel has none; ``collector-config/otelcol-contrib.yaml``
   is the real thing) that writes one OTLP/JSON request per line.
2. Run the agent (``agent.py``) with nothing but ``OTEL_EXPORTER_OTLP_ENDPOINT`` set:
   its failing run is exported to the collector.
3. ``sftrace import`` the collector's file into a bundle, and ``sftrace replay`` it
   offline: the production failure comes back without calling any tool or model.

Run from anywhere: ``python examples/collector/main.py`` (needs ``pip install rotel``).
Everything it writes goes to ``.sftrace/collector-example/`` under the working directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from file_exporter import FileExporterStandIn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ROTEL_ENV = REPO / "collector-config" / "rotel.env"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rotel_binary() -> Path:
    spec = importlib.util.find_spec("rotel")
    if spec is None or spec.origin is None:
        raise SystemExit("the Rotel collector is not installed: pip install rotel")
    return Path(spec.origin).parent / "rotel-agent"


def rotel_env(http_port: int, grpc_port: int, forward_to: str, workdir: Path) -> dict[str, str]:
    """``collector-config/rotel.env``, with this example's ports and paths."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTEL_", "OTEL_"))}
    for line in ROTEL_ENV.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    env.update(
        ROTEL_OTLP_HTTP_ENDPOINT=f"127.0.0.1:{http_port}",
        ROTEL_OTLP_GRPC_ENDPOINT=f"127.0.0.1:{grpc_port}",
        ROTEL_OTLP_EXPORTER_ENDPOINT=forward_to,
        ROTEL_BATCH_TIMEOUT="100ms",
        ROTEL_PID_FILE=str(workdir / "rotel-agent.pid"),
        ROTEL_LOG_FILE=str(workdir / "rotel-agent.log"),
    )
    return env


@contextmanager
def rotel(forward_to: str, workdir: Path) -> Iterator[int]:
    """Run Rotel until the block ends; yield its OTLP/HTTP port."""
    http_port, grpc_port = free_port(), free_port()
    log = open(workdir / "rotel.out", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [str(rotel_binary()), "start"],
        env=rotel_env(http_port, grpc_port, forward_to, workdir),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # Rotel starts in milliseconds; poll until it listens
            try:
                socket.create_connection(("127.0.0.1", http_port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"Rotel did not start: see {workdir / 'rotel.out'}") from None
                time.sleep(0.02)
        yield http_port
    finally:
        process.terminate()  # Rotel sends what it still holds, then exits
        process.wait(15)
        log.close()


def sftrace_cli(*args: str, cwd: Path | None = None) -> int:
    print(f"   $ sftrace {' '.join(args)}")
    done = subprocess.run([sys.executable, "-m", "sftrace._cli.main", *args], cwd=cwd, check=False)
    return done.returncode


def main() -> int:
    workdir = Path(".sftrace") / "collector-example"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    workdir = workdir.resolve()
    archive = workdir / "collector-output" / "traces.jsonl"
    stand_in = FileExporterStandIn(archive)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()

    print("1. Collector: Rotel on 127.0.0.1, forwarding to a file-exporter stand-in")
    with rotel(stand_in.url, workdir) as http_port:
        print(f"   OTLP/HTTP at http://127.0.0.1:{http_port}; file: {archive}\n")
        print("2. The agent runs with OTEL_EXPORTER_OTLP_ENDPOINT pointing at the collector")
        agent = subprocess.run(
            [sys.executable, str(HERE / "agent.py")],
            env={
                **os.environ,
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{http_port}",
                "OTEL_SERVICE_NAME": "booking-agent",
                "SFTRACE_MAX_PAYLOAD_BYTES": "0",  # ship payloads whole: import needs them
                "SFTRACE_DIR": str(workdir / "agent-local-bundles"),
            },
            capture_output=True,
            text=True,
            check=True,
        )
        trace_id = agent.stdout.strip().splitlines()[-1]
        print(f"   {agent.stderr.strip()}")
        print(f"   exported run: trace {trace_id}")
        if not stand_in.wait_for_run(trace_id, timeout=30):
            print("   the run did not reach the collector's file", file=sys.stderr)
            return 1
    print(f"   the collector wrote {len(archive.read_bytes().splitlines())} line(s)\n")

    print("3. Back to a bundle, then an offline replay")
    imported = workdir / "imported"
    if sftrace_cli("import", str(archive), "--output", str(imported)) != 0:
        return 1
    [bundle] = imported.iterdir()
    quickstart_dir = REPO / "examples" / "quickstart"  # the entrypoint is imported from here
    code = sftrace_cli(
        "replay", str(bundle), "--entrypoint", "quickstart:run_agent", cwd=quickstart_dir
    )
    print("\nThe production failure, collected by OpenTelemetry, is now an offline test case.")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
