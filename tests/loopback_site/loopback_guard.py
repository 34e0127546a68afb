"""The test suite's network guard: no connection and no name lookup outside loopback.

sftrace's tests, and the libraries they drive (Logfire, Phoenix, Traceloop, LiteLLM, the
OpenAI Agents SDK...), must run offline. ``install()`` patches the socket layer so that

- ``socket.socket.connect`` / ``connect_ex`` / ``sendto`` to an address that is not
  loopback (127.0.0.0/8, ::1) or a Unix socket, and
- ``socket.getaddrinfo`` / ``gethostbyname`` of a host name that is not ``localhost``, a loopback or
  unspecified address (a DNS query leaves the machine too)

fail with ``NetworkBlockedError`` (a ``ConnectionRefusedError``, as on a machine with no
network, so libraries degrade the way they would offline). Every attempt is also kept in
``attempts`` and, when ``$SFTRACE_TEST_NETWORK_LOG`` names a file, appended to it, so a
library that swallows the error still fails the test (tests/conftest.py checks both
after each test).

Subprocesses are covered when they inherit ``PYTHONPATH`` with this directory on it: its
``sitecustomize.py`` installs the guard at interpreter start. A subprocess started with
an environment that drops ``PYTHONPATH`` (or with ``python -S`` / ``-I``) is not covered.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from typing import Any

LOG_VARIABLE = "SFTRACE_TEST_NETWORK_LOG"

attempts: list[str] = []
_lock = threading.Lock()
_installed = False
_log_to_file = False  # subprocesses report to $SFTRACE_TEST_NETWORK_LOG (see sitecustomize)


class NetworkBlockedError(ConnectionRefusedError):
    """A test tried to reach a host outside loopback."""


def _is_local_host(host: object) -> bool:
    if host is None:
        return True  # getaddrinfo(None, port): the local/unspecified address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower()  # "[::1]", "fe80::1%eth0"
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _block(what: str) -> NetworkBlockedError:
    message = (
        f"sftrace test network guard: {what} leaves the machine; tests and examples must "
        f"run offline (loopback only; see tests/loopback_site/loopback_guard.py)"
    )
    with _lock:
        attempts.append(what)
    path = os.environ.get(LOG_VARIABLE) if _log_to_file else None
    if path:
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"pid {os.getpid()}: {what}\n")
        except OSError:
            pass
    return NetworkBlockedError(message)


def _check_address(sock: socket.socket, address: Any, operation: str) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix sockets, netlink... stay on the machine
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_local_host(host):
        raise _block(f"{operation} to {address!r}")


def install(*, log_to_file: bool = False) -> None:
    """Patch the socket layer (idempotent); ``log_to_file``: also append each attempt to
    the file ``$SFTRACE_TEST_NETWORK_LOG`` names (how a subprocess reports to the suite)."""
    global _installed, _log_to_file
    _log_to_file = log_to_file
    if _installed:
        return
    _installed = True
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_sendto = socket.socket.sendto
    original_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(self, address, "socket.connect")
        return original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(self, address, "socket.connect_ex")
        return original_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        _check_address(self, args[-1], "socket.sendto")
        return original_sendto(self, data, *args)  # type: ignore[arg-type]

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local_host(host):
            raise _block(f"socket.getaddrinfo({host!r})")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo
    for name in ("gethostbyname", "gethostbyname_ex"):
        setattr(socket, name, _guard_lookup(getattr(socket, name), name))


def _guard_lookup(original: Any, name: str) -> Any:
    def lookup(host: Any) -> Any:
        if not _is_local_host(host):
            raise _block(f"socket.{name}({host!r})")
        return original(host)

    return lookup


def take_attempts() -> list[str]:
    """The attempts blocked in this process since the last call (and forget them)."""
    with _lock:
        taken = list(attempts)
        attempts.clear()
    return taken
