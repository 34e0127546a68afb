"""``configure()``'s OTLP settings: arguments, the standard OTEL_* variables, idempotence."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sample_agents as agents
import sftrace
from otlp_fixtures import OTLP_ENV_NAMES, sink_url
from otlp_sink import OtlpSink
from sftrace import ConfigError, load_bundle, record
from sftrace._export.otlp_settings import DEFAULT_MAX_PAYLOAD_BYTES, OtlpSettings, resolve_settings
from sftrace._record.config import get_state

pytestmark = pytest.mark.usefixtures("clean_otlp_env")

HERE = Path(__file__).resolve().parent


def test_configure_is_keyword_only_with_the_documented_parameters() -> None:
    """Every parameter of configure() is keyword-only and documented; the OTLP ones are
    there, in the documented order."""
    signature = inspect.signature(sftrace.configure)
    names = list(signature.parameters)
    otlp_parameters = [
        "tracer_provider",
        "bundle_dir",
        "otlp_endpoint",
        "otlp_protocol",
        "otlp_headers",
        "otlp_encoder",
        "service_name",
        "capture_content",
        "max_payload_bytes",
    ]
    assert [name for name in names if name in otlp_parameters] == otlp_parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in signature.parameters.values())
    doc = sftrace.configure.__doc__ or ""
    assert all(f"{name}:" in doc for name in names)


def test_without_an_endpoint_nothing_touches_the_network(
    monkeypatch: pytest.MonkeyPatch, provider: TracerProvider
) -> None:
    """No endpoint configured: no OTLP processor, and recording opens no connection."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network used")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    sftrace.configure(tracer_provider=provider)
    assert get_state().otlp is None
    with record("quiet") as session:
        agents.booking_agent()
    provider.force_flush()
    assert attempts == []
    assert load_bundle(session.path or "", verify_integrity=True).calls


def test_configuring_twice_never_duplicates_exporters(
    provider: TracerProvider, sink: OtlpSink
) -> None:
    """Calling configure() again with the same settings keeps one exporter: no span twice."""
    sftrace.configure(tracer_provider=provider, otlp_endpoint=sink_url(sink))
    first = get_state().otlp
    sftrace.configure(tracer_provider=provider, otlp_endpoint=sink_url(sink))
    assert get_state().otlp is first
    with record("once") as session:
        agents.booking_agent()
    provider.force_flush()
    received = sink.wait_for_trace(session.trace_id or "", 4)
    ids = [span.span_id for span in sink.spans()]
    assert len(received) == 4
    assert len(ids) == len(set(ids)) == 4
    assert len(load_bundle(session.path or "").spans) == 4


def test_new_settings_replace_the_old_exporter(provider: TracerProvider) -> None:
    """configure() with another endpoint switches export over; the old one gets nothing new."""
    old, new = OtlpSink(), OtlpSink()
    old.start_http()
    new.start_http()
    try:
        sftrace.configure(tracer_provider=provider, otlp_endpoint=sink_url(old))
        sftrace.configure(tracer_provider=provider, otlp_endpoint=sink_url(new))
        with record("moved") as session:
            agents.booking_agent()
        provider.force_flush()
        new.wait_for_trace(session.trace_id or "", 4)
        assert old.spans() == []
        sftrace.configure(tracer_provider=provider)
        assert get_state().otlp is None
    finally:
        old.stop()
        new.stop()


def test_user_provider_and_sftrace_both_receive_every_span(
    provider: TracerProvider, sink: OtlpSink
) -> None:
    """Attached to the application's provider, its own exporter, the bundle and OTLP all
    get every span."""
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    sftrace.configure(tracer_provider=provider, otlp_endpoint=sink_url(sink))
    app = provider.get_tracer("app")
    with record("shared") as session, app.start_as_current_span("app work"):
        agents.booking_agent()
    provider.force_flush()
    mine = {f"{s.context.span_id:016x}" for s in memory.get_finished_spans() if s.context}
    received = {s.span_id for s in sink.wait_for_trace(session.trace_id or "", 5)}
    bundled = {s["spanId"] for s in load_bundle(session.path or "").spans}
    assert len(mine) == 5
    assert mine == received == bundled


# --- settings ---------------------------------------------------------------------------


def settings(**kwargs: Any) -> OtlpSettings | None:
    arguments: dict[str, Any] = {
        "endpoint": None,
        "protocol": None,
        "headers": None,
        "capture_content": None,
        "max_payload_bytes": None,
        "standard_endpoint_variables": True,
    }
    arguments.update(kwargs)
    return resolve_settings(**arguments)


@pytest.mark.parametrize(
    ("env", "kwargs", "endpoint", "protocol"),
    [
        ({}, {}, None, None),
        ({}, {"endpoint": "http://c:4318"}, "http://c:4318/v1/traces", "http/protobuf"),
        ({}, {"endpoint": "http://c:4318/custom"}, "http://c:4318/custom", "http/protobuf"),
        ({}, {"endpoint": "https://c:4317", "protocol": "grpc"}, "https://c:4317", "grpc"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"},
            {},
            "http://c:4318/v1/traces",
            "http/protobuf",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            {},
            "http://c:4317",
            "grpc",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x",
            },
            {},
            "http://t:1/x",
            "http/protobuf",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
            },
            {},
            "http://c:4317",
            "grpc",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
            {},
            None,
            None,
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            {"standard_endpoint_variables": False},
            None,
            None,
        ),
        (
            {
                "SFTRACE_OTLP_ENDPOINT": "http://mine:4318",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1",
            },
            {"standard_endpoint_variables": False},
            "http://mine:4318/v1/traces",
            "http/protobuf",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            {"endpoint": "http://arg:9"},
            "http://arg:9/v1/traces",
            "http/protobuf",
        ),
    ],
)
def test_endpoint_and_protocol_resolution(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    kwargs: dict[str, Any],
    endpoint: str | None,
    protocol: str | None,
) -> None:
    """Arguments win over SFTRACE_OTLP_ENDPOINT, which wins over the standard variables;
    those apply only to a provider sftrace creates, and HTTP base URLs get /v1/traces."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resolved = settings(**kwargs)
    if endpoint is None:
        assert resolved is None
    else:
        assert resolved is not None
        assert (resolved.endpoint, resolved.protocol) == (endpoint, protocol)


def test_headers_timeout_content_and_cap_defaults_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OTEL_EXPORTER_OTLP_HEADERS/TIMEOUT, SFTRACE_CAPTURE_CONTENT and _MAX_PAYLOAD_BYTES
    are the defaults; arguments override them."""
    defaults = settings(endpoint="http://c:4318")
    assert defaults is not None
    assert (defaults.headers, defaults.timeout_s) == ((), 10.0)
    assert (defaults.capture_content, defaults.max_payload_bytes) == (
        True,
        DEFAULT_MAX_PAYLOAD_BYTES,
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%20ecret,X-Team=core")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2.5")
    monkeypatch.setenv("SFTRACE_CAPTURE_CONTENT", "false")
    monkeypatch.setenv("SFTRACE_MAX_PAYLOAD_BYTES", "0")
    from_env = settings(endpoint="http://c:4318")
    assert from_env is not None
    assert from_env.headers == (("api-key", "s ecret"), ("x-team", "core"))
    assert (from_env.timeout_s, from_env.capture_content, from_env.max_payload_bytes) == (
        2.5,
        False,
        None,
    )
    explicit = settings(
        endpoint="http://c:4318",
        headers={"Authorization": "Bearer t"},
        capture_content=True,
        max_payload_bytes=10,
    )
    assert explicit is not None
    assert explicit.headers == (("authorization", "Bearer t"),)
    assert (explicit.capture_content, explicit.max_payload_bytes) == (True, 10)


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"endpoint": "127.0.0.1:4317"}, {}, "is not an http:// or https:// URL"),
        (
            {"endpoint": "http://c:4318", "protocol": "http/json", "encoder": "official"},
            {},
            "do not send OTLP/JSON",
        ),
        ({"endpoint": "http://c:4317", "protocol": "grpc", "encoder": "sftrace"}, {}, "not gRPC"),
        ({"endpoint": "http://c:4318", "encoder": "protobuf"}, {}, "unknown OTLP encoder"),
        ({"endpoint": "http://c:4318"}, {"SFTRACE_OTLP_ENCODER": "fast"}, "'fast'"),
        ({"endpoint": "http://c:4318"}, {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "'zstd'"),
        ({"endpoint": "http://c:4318", "protocol": "thrift"}, {}, "unsupported OTLP protocol"),
        (
            {},
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "udp", "SFTRACE_OTLP_ENDPOINT": "http://c:1"},
            "'udp'",
        ),
        ({"endpoint": "http://c:4318", "max_payload_bytes": -1}, {}, "non-negative"),
        ({"endpoint": "http://c:4318"}, {"SFTRACE_MAX_PAYLOAD_BYTES": "lots"}, "'lots'"),
        ({"endpoint": "http://c:4318"}, {"SFTRACE_CAPTURE_CONTENT": "maybe"}, "'maybe'"),
        ({"endpoint": "http://c:4318"}, {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "'soon'"),
        ({"endpoint": "http://c:4318", "headers": {"k": 1}}, {}, "str: str"),
        ({"endpoint": "http://c:4318", "headers": "novalue"}, {}, "'novalue' is not a header"),
        ({"endpoint": "http://c:4318", "service_name": 5}, {}, "service_name"),
        # checked without an endpoint too: a bad value fails where it is written
        ({"max_payload_bytes": -1}, {}, "non-negative"),
        ({"capture_content": "false"}, {}, "True or False"),
        ({"headers": {"a": 1}}, {}, "str: str"),
        ({"headers": "k=v,novalue"}, {}, "'novalue' is not a header"),
        ({"service_name": ""}, {}, "service_name must be a non-empty string"),
        ({}, {"SFTRACE_MAX_PAYLOAD_BYTES": "lots"}, "'lots'"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_value(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], message: str
) -> None:
    """A bad endpoint, protocol, encoder, compression, cap, flag or timeout raises
    ConfigError saying what to do."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        settings(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "env", "encoder", "sftrace_encoder"),
    [
        ({}, {}, "auto", True),
        ({"protocol": "grpc"}, {}, "auto", False),
        ({"protocol": "http/json"}, {}, "auto", True),
        ({"encoder": "official"}, {}, "official", False),
        ({}, {"SFTRACE_OTLP_ENCODER": "Official"}, "official", False),
        ({"encoder": "sftrace"}, {"SFTRACE_OTLP_ENCODER": "official"}, "sftrace", True),
    ],
)
def test_encoder_resolution(
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, Any],
    env: dict[str, str],
    encoder: str,
    sftrace_encoder: bool,
) -> None:
    """otlp_encoder, else SFTRACE_OTLP_ENCODER, else auto: sftrace's encoder for HTTP,
    the official one for gRPC."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resolved = settings(endpoint="http://c:4318", **kwargs)
    assert resolved is not None
    assert (resolved.encoder, resolved.sftrace_encoder) == (encoder, sftrace_encoder)


def test_compression_comes_from_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_COMPRESSION wins over OTEL_EXPORTER_OTLP_COMPRESSION."""
    assert (resolved := settings(endpoint="http://c:4318")) is not None
    assert resolved.compression is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    assert (resolved := settings(endpoint="http://c:4318")) is not None
    assert resolved.compression == "gzip"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none")
    assert (resolved := settings(endpoint="http://c:4318")) is not None
    assert resolved.compression is None


@pytest.mark.parametrize(
    ("bundle_dir", "message"),
    [(123, "bundle_dir must be a directory path, got 123"), ("", "a directory path")],
)
def test_configure_checks_the_bundle_dir(bundle_dir: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        sftrace.configure(bundle_dir=bundle_dir)


def test_a_bundle_dir_that_is_a_file_is_refused_at_configure(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        sftrace.configure(bundle_dir=afile)


def test_configure_rejects_bad_settings_before_changing_anything(provider: TracerProvider) -> None:
    """An invalid OTLP argument raises and leaves the previous configuration in place."""
    sftrace.configure(tracer_provider=provider)
    state = get_state()
    with pytest.raises(ConfigError, match="otlp_protocol"):
        sftrace.configure(tracer_provider=provider, otlp_endpoint="http://c:1", otlp_protocol="x")
    assert get_state() is state
    assert state.otlp is None


def test_a_rejected_configure_keeps_the_previous_redaction(provider: TracerProvider) -> None:
    """configure() checks every argument before it changes anything: a ConfigError leaves
    the redaction rules of the previous configuration in place."""
    from sftrace._record.redaction import current_redactor

    sftrace.configure(tracer_provider=provider)
    before = current_redactor()
    with pytest.raises(ConfigError, match="otlp_protocol"):
        sftrace.configure(
            tracer_provider=provider,
            redaction=sftrace.Redactor(keys=["pin_code"]),
            otlp_endpoint="http://c:1",
            otlp_protocol="x",
        )
    assert current_redactor() is before


def test_sdk_disabled_records_without_changing_the_sdks_provider(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """OTEL_SDK_DISABLED=true: record() works on sftrace's own provider, which stays as
    the SDK made it (disabled: its own tracers are no-ops) and is not made global."""
    from opentelemetry import trace

    from sftrace._record import config

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setattr(config, "_own_provider", None)
    monkeypatch.setattr(config, "_own_processors", None)
    proxy = trace.ProxyTracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: proxy)
    sftrace.configure()
    state = get_state()
    assert state.provider is not proxy
    assert isinstance(state.provider.get_tracer("someone-else"), trace.NoOpTracer)
    with record("disabled", output=tmp_path / "run.sftrace") as session:
        session.set_output({"ok": True})
    assert load_bundle(tmp_path / "run.sftrace").output == {"ok": True}


# --- a fresh interpreter: the global provider and the environment, as in production -------


def run_child(scenario: str, tmp_path: Path, env: dict[str, str], *, stderr: bool = False) -> Any:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in OTLP_ENV_NAMES and k != "PYTEST_CURRENT_TEST"
    }
    clean.update(env)
    clean["PYTHONPATH"] = os.pathsep.join([str(HERE), clean.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(HERE / "dropin_child.py"), scenario, str(tmp_path)],
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return (result, done.stderr) if stderr else result


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_standard_variables_configure_export_of_a_provider_sftrace_creates(
    tmp_path: Path, protocol: str
) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT/_PROTOCOL/_HEADERS and OTEL_SERVICE_NAME alone ship a
    run; the spans still queued are sent when the process exits."""
    receiver = OtlpSink()
    port = receiver.start_grpc() if protocol == "grpc" else receiver.start_http()
    try:
        result = run_child(
            "env",
            tmp_path,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                "OTEL_EXPORTER_OTLP_HEADERS": "x-team=agents",
                "OTEL_SERVICE_NAME": "booking-service",
            },
        )
        spans = receiver.wait_for_trace(result["trace_id"], 4)
    finally:
        receiver.stop()
    assert result["global_is_sftrace"] is True
    assert {span.resource["service.name"] for span in spans} == {"booking-service"}
    assert {span.resource["sftrace.version"] for span in spans} == {sftrace.__version__}
    assert all(headers.get("x-team") == "agents" for headers in receiver.headers)


@pytest.mark.slow
def test_configure_attaches_to_the_application_global_provider(tmp_path: Path) -> None:
    """Drop-in: the application's global provider keeps its own exporter and gets sftrace's."""
    receiver = OtlpSink()
    port = receiver.start_http()
    try:
        result = run_child(
            "dropin", tmp_path, {"SFTRACE_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
        )
        received = {span.span_id for span in receiver.wait_for_trace(result["trace_id"], 5)}
    finally:
        receiver.stop()
    assert result["same_provider"] is True
    assert len(result["memory"]) == 5
    assert set(result["memory"]) == set(result["bundle"]) == received


@pytest.mark.slow
def test_sdk_disabled_still_records_bundles_but_exports_nothing(tmp_path: Path) -> None:
    """OTEL_SDK_DISABLED=true: no span leaves the process and no global provider is set,
    but record() writes a complete bundle that replays."""
    receiver = OtlpSink()
    port = receiver.start_http()
    try:
        result = run_child(
            "disabled",
            tmp_path,
            {
                "OTEL_SDK_DISABLED": "true",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            },
        )
    finally:
        receiver.stop()
    assert result["global_is_proxy"] is True
    assert result["calls"] == ["flight_search", "fake-1", "book"]
    assert result["replayed"] == "completed"
    assert receiver.spans() == []


@pytest.mark.slow
def test_a_bad_otel_variable_does_not_break_a_run_that_configures_itself(tmp_path: Path) -> None:
    """record() without configure(): an invalid OTEL_EXPORTER_OTLP_ENDPOINT is logged once
    and the run is recorded without export (an explicit configure() raises instead)."""
    result, stderr = run_child(
        "implicit", tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, stderr=True
    )
    assert result["calls"] == ["flight_search", "fake-1", "book"]
    assert "reading the OTLP settings from the environment failed" in stderr
    assert "'collector:4317' is not an http:// or https:// URL" in stderr
    assert stderr.count("reading the OTLP settings") == 1
