"""Real OTLP components, started by the tests on 127.0.0.1 and stopped afterwards.

- ``rotel``: the Rotel collector (``rotel-agent`` from the ``rotel`` wheel) receiving
  OTLP over HTTP and gRPC and forwarding everything to an in-process ``OtlpSink``.
- ``phoenix``: an Arize Phoenix server (``phoenix serve``) with its telemetry off and a
  temporary working directory.

Both are session-scoped: started once, on free ports, for every test that asks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest
from otlp_components import Phoenix, Rotel, free_port, port_open, rotel_binary, stop, wait_until

from otlp_sink import OtlpSink


@pytest.fixture
def rotel(rotel_session: Rotel) -> Rotel:
    """The session's Rotel collector, its sink emptied for this test.

    Tests use deterministic ids (the same in every test), so each test must see only
    its own spans; every test waits for all of its spans, so none arrive later.
    """
    rotel_session.sink.clear()
    return rotel_session


@pytest.fixture(scope="session")
def rotel_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotel]:
    """A Rotel collector forwarding (OTLP/HTTP, 50 ms batches) to an in-process sink."""
    binary = rotel_binary()
    workdir = tmp_path_factory.mktemp("rotel")
    sink = OtlpSink()
    sink_port = sink.start_http()
    http_port, grpc_port = free_port(), free_port()
    log = workdir / "rotel.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [
                str(binary),
                "start",
                "--otlp-http-endpoint",
                f"127.0.0.1:{http_port}",
                "--otlp-grpc-endpoint",
                f"127.0.0.1:{grpc_port}",
                "--exporter",
                "otlp",
                "--otlp-exporter-protocol",
                "http",
                "--otlp-exporter-endpoint",
                f"http://127.0.0.1:{sink_port}",
                "--batch-timeout",
                "50ms",
                "--pid-file",
                str(workdir / "rotel.pid"),
                "--log-file",
                str(workdir / "rotel-agent.log"),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    try:
        wait_until(lambda: port_open(http_port) and port_open(grpc_port), process, "rotel", log)
        yield Rotel(http_port, grpc_port, sink)
    finally:
        stop(process)
        sink.stop()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """An Arize Phoenix server on 127.0.0.1 (HTTP; its gRPC port is a free one too)."""
    workdir = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    for name in list(env):
        if name.startswith("OTEL_"):
            del env[name]  # Phoenix must not trace itself to wherever the tests point
        if name.startswith("COVERAGE_"):
            del env[name]  # measuring sftrace's coverage inside Phoenix only slows its start
    log = workdir / "phoenix.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as reply:
            return bool(reply.status == 200)

    try:
        wait_until(healthy, process, "phoenix", log)
        yield Phoenix(url)
    finally:
        stop(process)
