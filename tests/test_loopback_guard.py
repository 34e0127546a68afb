"""The suite's network guard (tests/loopback_site/loopback_guard.py) blocks and reports
every connection or name lookup outside loopback, here and in Python subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import loopback_guard
import pytest


@pytest.fixture
def take_blocked() -> list[str]:
    """Collects what the guard blocked in the test, so the suite's own check stays quiet."""
    taken: list[str] = []
    yield taken
    taken += loopback_guard.take_attempts()


@pytest.mark.parametrize(
    ("family", "address"),
    [
        (socket.AF_INET, ("192.0.2.1", 443)),  # TEST-NET-1: never routed
        (socket.AF_INET6, ("2001:db8::1", 443, 0, 0)),  # documentation prefix
    ],
)
def test_connect_outside_loopback_is_refused_and_reported(family, address, take_blocked):
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        with pytest.raises(loopback_guard.NetworkBlockedError, match="leaves the machine"):
            sock.connect(address)
        with pytest.raises(loopback_guard.NetworkBlockedError):
            sock.connect_ex(address)
    assert loopback_guard.take_attempts() == [
        f"socket.connect to {address!r}",
        f"socket.connect_ex to {address!r}",
    ]


def test_lookups_of_outside_names_are_refused(take_blocked):
    with pytest.raises(loopback_guard.NetworkBlockedError):
        socket.getaddrinfo("api.openai.com", 443)
    with pytest.raises(loopback_guard.NetworkBlockedError):
        socket.create_connection(("example.com", 80), timeout=1)
    with pytest.raises(loopback_guard.NetworkBlockedError):
        socket.gethostbyname("example.com")
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        pytest.raises(loopback_guard.NetworkBlockedError),
    ):
        udp.sendto(b"x", ("8.8.8.8", 53))
    assert len(loopback_guard.take_attempts()) == 4


def test_loopback_traffic_passes():
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        for host in ("127.0.0.1", "localhost"):
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
                assert conn.recv(64).startswith(b"HTTP/1.0 204")
    finally:
        server.shutdown()
        server.server_close()
    assert socket.getaddrinfo("::1", 80)
    assert loopback_guard.take_attempts() == []


def test_a_python_subprocess_is_guarded_and_reports_to_the_log(tmp_path: Path, take_blocked):
    log = Path(os.environ[loopback_guard.LOG_VARIABLE])
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('example.org', 443), timeout=1)\n"
        "except ConnectionRefusedError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "NetworkBlockedError"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert any("socket.getaddrinfo('example.org')" in line for line in lines), lines
    log.write_text("", encoding="utf-8")  # handled: the suite's check must not fail this test
