"""Starting real OTLP components for the tests: Rotel and Arize Phoenix on 127.0.0.1."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from otlp_sink import OtlpSink

START_TIMEOUT_S = 240.0  # Phoenix starts in ~8 s alone; far slower on a busy machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rotel_binary() -> Path:
    spec = importlib.util.find_spec("rotel")
    binary = Path(spec.origin).parent / "rotel-agent" if spec and spec.origin else None
    if binary is None or not binary.exists():
        pytest.fail("the rotel collector is not installed: pip install -e '.[test]'")
    return binary


def wait_until(ready: Any, process: subprocess.Popen[Any], what: str, log: Path) -> None:
    """Poll ``ready()`` until it holds; fail if the process exits or time runs out.

    A server in another process offers no event to wait on, so this polls briefly.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited with status {process.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.05)
    pytest.fail(f"{what} did not start within {START_TIMEOUT_S}s:\n{log.read_text()}")


def port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Rotel:
    http_port: int
    grpc_port: int
    sink: OtlpSink

    def endpoint(self, protocol: str) -> str:
        port = self.grpc_port if protocol == "grpc" else self.http_port
        return f"http://127.0.0.1:{port}"


@dataclass
class Phoenix:
    url: str

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as reply:
            return orjson.loads(reply.read())
