"""OTLP export settings: the arguments of ``configure`` and the standard variables.

One place resolves where and how spans are shipped: ``configure(otlp_*)`` arguments,
sftrace's ``SFTRACE_*`` variables and OpenTelemetry's ``OTEL_EXPORTER_OTLP_*`` ones, with
their defaults, into an :class:`OtlpSettings`; :func:`official_exporter` makes the
official OTLP exporter (HTTP/protobuf or gRPC) for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.trace.export import SpanExporter

from sftrace._errors import ConfigError
from sftrace._internal import flag_value

PROTOCOL_HTTP = "http/protobuf"
PROTOCOL_HTTP_JSON = "http/json"
PROTOCOL_GRPC = "grpc"
PROTOCOLS = (PROTOCOL_HTTP, PROTOCOL_HTTP_JSON, PROTOCOL_GRPC)
# Who encodes and sends the spans: sftrace's own HTTP exporter (OTLP/JSON, or its own
# OTLP/protobuf encoder when http/protobuf is asked for or the collector refuses JSON),
# or the official OpenTelemetry exporters (protobuf over HTTP or gRPC). "auto": sftrace's
# for HTTP, the official one for gRPC (sftrace has no gRPC exporter of its own).
ENCODER_AUTO = "auto"
ENCODER_SFTRACE = "sftrace"
ENCODER_OFFICIAL = "official"
ENCODERS = (ENCODER_AUTO, ENCODER_SFTRACE, ENCODER_OFFICIAL)
DEFAULT_TIMEOUT_S = 10.0
# Default cap of one payload attribute in the OTLP copy of a span. Large enough that
# production runs (long prompts, big tool results) reach the collector whole and can be
# imported back as replayable bundles; small enough that one pathological value cannot
# push a batch far past a collector's request limit (4 MiB for gRPC by default).
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class OtlpSettings:
    """Where and how spans are shipped; equal settings mean the same exporter."""

    endpoint: str
    protocol: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    capture_content: bool = True
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES
    service_name: str | None = None  # for spans whose provider has none of its own
    encoder: str = ENCODER_AUTO
    compression: str | None = None  # "gzip" or None
    protocol_asked: bool = False  # the protocol was asked for (argument or variable)

    @property
    def sftrace_encoder(self) -> bool:
        """True when sftrace's own HTTP exporter sends the spans."""
        if self.encoder == ENCODER_OFFICIAL:
            return False
        return self.protocol != PROTOCOL_GRPC

    @property
    def sftrace_protobuf(self) -> bool:
        """True when sftrace's exporter sends OTLP/protobuf from the start: http/protobuf
        was asked for. Unasked (the default protocol), it sends OTLP/JSON, cheaper for the
        agent (a bundle line is a span's OTLP/JSON), and protobuf after an HTTP 415."""
        return self.sftrace_encoder and self.protocol == PROTOCOL_HTTP and self.protocol_asked


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def resolve_protocol(protocol: str | None) -> str:
    """The OTLP protocol: the argument, else ``$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``,
    else ``$OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf``."""
    source = "otlp_protocol"
    if protocol is None:
        protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        source = "OTEL_EXPORTER_OTLP_PROTOCOL"
    if protocol is None:
        return PROTOCOL_HTTP
    value = protocol.strip().lower()
    if value in PROTOCOLS:
        return value
    raise ConfigError(
        f"{source}: unsupported OTLP protocol {protocol!r}: use one of {list(PROTOCOLS)}"
    )


def protocol_asked(protocol: str | None) -> bool:
    """Whether a protocol was asked for: the argument, or one of the variables
    ``resolve_protocol`` reads."""
    return protocol is not None or (
        _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") is not None
    )


def resolve_encoder(encoder: str | None, protocol: str) -> str:
    """The encoder: the argument, else ``$SFTRACE_OTLP_ENCODER``, else ``auto``.

    ``auto`` and ``sftrace`` send over HTTP with sftrace's own encoders: OTLP/JSON, or
    OTLP/protobuf when ``http/protobuf`` is asked for (``OtlpSettings.sftrace_protobuf``)
    or the collector refuses JSON with HTTP 415. gRPC always goes through the official
    exporter (``sftrace`` with gRPC is refused), and so does ``official``, which cannot
    send ``http/json``.
    """
    source = "otlp_encoder"
    if encoder is None:
        encoder = _env("SFTRACE_OTLP_ENCODER")
        source = "SFTRACE_OTLP_ENCODER"
    if encoder is None:
        return ENCODER_AUTO
    value = encoder.strip().lower() if isinstance(encoder, str) else encoder
    if value not in ENCODERS:
        raise ConfigError(
            f"{source}: unknown OTLP encoder {encoder!r}: use one of {list(ENCODERS)}"
        )
    if value == ENCODER_SFTRACE and protocol == PROTOCOL_GRPC:
        raise ConfigError(
            f"{source}: the sftrace encoder sends OTLP/JSON over HTTP, not gRPC; use "
            f"otlp_encoder='official' (or 'auto') for gRPC, or protocol 'http/protobuf'"
        )
    if value == ENCODER_OFFICIAL and protocol == PROTOCOL_HTTP_JSON:
        raise ConfigError(
            f"{source}: the official Python exporters do not send OTLP/JSON ('http/json'); "
            f"use otlp_encoder='sftrace' (or 'auto'), or protocol 'http/protobuf'"
        )
    return str(value)


def resolve_compression() -> str | None:
    """``$OTEL_EXPORTER_OTLP_TRACES_COMPRESSION``, else ``$OTEL_EXPORTER_OTLP_COMPRESSION``:
    ``gzip`` or ``none`` (the default)."""
    raw = _env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION")
    if raw is None or raw.lower() == "none":
        return None
    if raw.lower() == "gzip":
        return "gzip"
    raise ConfigError(
        f"OTEL_EXPORTER_OTLP_COMPRESSION: unsupported compression {raw!r}: use 'gzip' or 'none'"
    )


def normalize_endpoint(endpoint: str, protocol: str, *, source: str = "otlp_endpoint") -> str:
    """Check an endpoint URL; for HTTP, add ``/v1/traces`` when the URL has no path.

    ``http://collector:4318`` and ``http://collector:4318/v1/traces`` both work; gRPC
    endpoints are ``http://host:4317`` (plaintext) or ``https://host:4317`` (TLS).
    """
    text = endpoint.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{source}: {endpoint!r} is not an http:// or https:// URL; give the collector's "
            f"URL with its scheme, e.g. 'http://127.0.0.1:4318' (http/protobuf) or "
            f"'http://127.0.0.1:4317' (grpc); http:// means plaintext, https:// TLS"
        )
    if protocol != PROTOCOL_GRPC and parts.path in ("", "/"):
        return text.rstrip("/") + TRACES_PATH
    return text


def parse_headers(headers: Mapping[str, str] | str | None, *, source: str) -> dict[str, str]:
    """Headers from a mapping or an ``OTEL_EXPORTER_OTLP_HEADERS``-style ``k=v,k2=v2``."""
    if headers is None:
        return {}
    if isinstance(headers, str):
        from opentelemetry.util.re import parse_env_headers

        for part in headers.split(","):
            name, equals, _ = part.partition("=")
            if part.strip() and (not equals or not name.strip()):
                raise ConfigError(
                    f"{source}: {part.strip()!r} is not a header: write them as "
                    f"'key=value,key2=value2'"
                )
        return dict(parse_env_headers(headers, liberal=True))
    if not isinstance(headers, Mapping):
        raise ConfigError(
            f"{source}: headers must be a dict of str to str or a 'key=value,...' string, "
            f"got {type(headers).__qualname__}"
        )
    parsed: dict[str, str] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key.strip():
            raise ConfigError(f"{source}: header {key!r}: {value!r} must be a str: str pair")
        parsed[key.strip().lower()] = value
    return parsed


def resolve_timeout() -> float:
    """Seconds per export: ``$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else
    ``$OTEL_EXPORTER_OTLP_TIMEOUT``, else 10 (seconds, as the Python exporters read them)."""
    raw = _env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_TIMEOUT: {raw!r} is not a positive number of seconds"
        )
    return value


def resolve_capture_content(capture_content: bool | None) -> bool:
    """The argument, else ``$SFTRACE_CAPTURE_CONTENT`` (true/false), else True."""
    if capture_content is not None:
        if not isinstance(capture_content, bool):
            raise ConfigError(f"capture_content must be True or False, got {capture_content!r}")
        return capture_content
    raw = _env("SFTRACE_CAPTURE_CONTENT")
    if raw is None:
        return True
    flag = flag_value(raw)
    if flag is None:
        raise ConfigError(f"SFTRACE_CAPTURE_CONTENT: {raw!r} is not true or false")
    return flag


def resolve_max_payload_bytes(max_payload_bytes: int | None) -> int | None:
    """The argument, else ``$SFTRACE_MAX_PAYLOAD_BYTES``, else 1048576 (1 MiB); 0 means no cap."""
    source = "max_payload_bytes"
    value: Any = max_payload_bytes
    if value is None:
        raw = _env("SFTRACE_MAX_PAYLOAD_BYTES")
        if raw is None:
            return DEFAULT_MAX_PAYLOAD_BYTES
        source = "SFTRACE_MAX_PAYLOAD_BYTES"
        try:
            value = int(raw)
        except ValueError:
            value = raw
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(
            f"{source} must be a non-negative number of bytes (0: no cap), got {value!r}"
        )
    return value or None


def resolve_settings(
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Mapping[str, str] | str | None,
    capture_content: bool | None,
    max_payload_bytes: int | None,
    standard_endpoint_variables: bool,
    service_name: str | None = None,
    encoder: str | None = None,
) -> OtlpSettings | None:
    """The OTLP settings of ``configure()``; None when no endpoint is configured.

    The endpoint is the argument, else ``$SFTRACE_OTLP_ENDPOINT``, else (only when
    ``standard_endpoint_variables``) ``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is)
    or ``$OTEL_EXPORTER_OTLP_ENDPOINT`` (the base URL; HTTP adds ``/v1/traces``), unless
    ``$OTEL_TRACES_EXPORTER`` names exporters without ``otlp``.
    """
    resolved_protocol = resolve_protocol(protocol)
    resolved_encoder = resolve_encoder(encoder, resolved_protocol)
    # Checked whether or not an endpoint is configured: a bad value must fail where it is
    # written (in development and CI), not only where OTLP export is switched on.
    capture = resolve_capture_content(capture_content)
    cap = resolve_max_payload_bytes(max_payload_bytes)
    if headers is not None:
        parse_headers(headers, source="otlp_headers")
    if service_name is not None and (not isinstance(service_name, str) or not service_name):
        raise ConfigError(f"service_name must be a non-empty string, got {service_name!r}")
    url: str | None = None
    if endpoint is not None:
        if not isinstance(endpoint, str):
            raise ConfigError(f"otlp_endpoint must be a URL string, got {endpoint!r}")
        url = normalize_endpoint(endpoint, resolved_protocol)
    elif (sftrace_endpoint := _env("SFTRACE_OTLP_ENDPOINT")) is not None:
        url = normalize_endpoint(
            sftrace_endpoint, resolved_protocol, source="SFTRACE_OTLP_ENDPOINT"
        )
    elif standard_endpoint_variables and _otlp_exporter_wanted():
        url = standard_endpoint(resolved_protocol)
    if url is None:
        return None
    header_source = "otlp_headers"
    if headers is None:
        headers = _env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
        header_source = "OTEL_EXPORTER_OTLP_HEADERS"
    return OtlpSettings(
        endpoint=url,
        protocol=resolved_protocol,
        headers=tuple(sorted(parse_headers(headers, source=header_source).items())),
        timeout_s=resolve_timeout(),
        capture_content=capture,
        max_payload_bytes=cap,
        service_name=service_name,
        encoder=resolved_encoder,
        compression=resolve_compression(),
        protocol_asked=protocol_asked(protocol),
    )


def standard_endpoint(protocol: str) -> str | None:
    """The endpoint named by the standard OTEL_EXPORTER_OTLP_* variables, if any."""
    traces = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces is not None:
        normalize_endpoint(traces, PROTOCOL_GRPC, source="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return traces  # the signal-specific variable is used as is
    base = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if base is None:
        return None
    checked = normalize_endpoint(base, PROTOCOL_GRPC, source="OTEL_EXPORTER_OTLP_ENDPOINT")
    if protocol != PROTOCOL_GRPC:
        return checked.rstrip("/") + TRACES_PATH
    return checked


def _otlp_exporter_wanted() -> bool:
    names = _env("OTEL_TRACES_EXPORTER")
    if names is None:
        return True
    return "otlp" in {name.strip().lower() for name in names.split(",")}


def default_endpoint(protocol: str) -> str:
    """OpenTelemetry's default collector address for ``protocol``."""
    if protocol == PROTOCOL_GRPC:
        return DEFAULT_GRPC_ENDPOINT
    return DEFAULT_HTTP_ENDPOINT + TRACES_PATH


def official_exporter(settings: OtlpSettings) -> SpanExporter:
    """The official OTLP span exporter for ``settings`` (nothing is sent until export)."""
    headers = dict(settings.headers) or None
    if settings.protocol == PROTOCOL_GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(
            endpoint=settings.endpoint,
            insecure=urlsplit(settings.endpoint).scheme == "http",
            headers=headers,
            timeout=settings.timeout_s,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=settings.endpoint, headers=headers, timeout=settings.timeout_s)
