"""What the OTLP test modules share: a clean OTLP environment, a tracer provider, a local
OTLP/HTTP sink and its URL, a free loopback port.

The fixtures are loaded for every test module by ``pytest_plugins`` in conftest.py (a
module's own fixture of the same name wins); a module that wants no OTLP variable from
the environment says ``pytestmark = pytest.mark.usefixtures("clean_otlp_env")``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from opentelemetry.sdk.trace import TracerProvider

if TYPE_CHECKING:
    from otlp_sink import OtlpSink

# Every variable that changes how sftrace or the OpenTelemetry SDK exports over OTLP.
OTLP_ENV_NAMES = (
    "SFTRACE_OTLP_ENDPOINT",
    "SFTRACE_CAPTURE_CONTENT",
    "SFTRACE_MAX_PAYLOAD_BYTES",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "SFTRACE_OTLP_ENCODER",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
)


@pytest.fixture
def clean_otlp_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTLP_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    made = TracerProvider()
    yield made
    made.shutdown()


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    from otlp_sink import OtlpSink  # grpc and protobuf: only for the tests that use a sink

    receiver = OtlpSink()
    receiver.start_http()
    yield receiver
    receiver.stop()


def sink_url(sink: OtlpSink, path: str = "") -> str:
    """The base URL of ``sink``'s HTTP receiver, with ``path`` (``"/v1/traces"``) after it."""
    assert sink._http is not None
    return f"http://127.0.0.1:{sink._http.server_address[1]}{path}"


def free_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
