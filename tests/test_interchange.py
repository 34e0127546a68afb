"""``sftrace push`` and ``sftrace import``: bundles to a collector and back, unchanged."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from opentelemetry.sdk.trace import TracerProvider

import sample_agents as agents
import sftrace
from interchange_helpers import (
    failing_agent,
    lines,
    record_completed,
    record_failing,
    replay_summary,
)
from otlp_fixtures import free_port
from otlp_sink import OtlpSink
from sftrace import load_bundle
from sftrace._cli.main import cli
from sftrace._cli.otlp import register

register(cli)


pytestmark = pytest.mark.usefixtures("clean_otlp_env")


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    """A sink not yet listening (each test starts it over HTTP or gRPC)."""
    receiver = OtlpSink()
    yield receiver
    receiver.stop()


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# --- push -----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_push_sends_original_ids_parents_timestamps_and_attributes(
    tmp_path: Path, sink: OtlpSink, protocol: str
) -> None:
    """Every span arrives with its bundle's trace id, span id, parent, times, attributes,
    resource and scope; the tool aliases and OpenInference attributes are added."""
    bundle_path = record_failing(tmp_path / "pushed.sftrace")
    port = sink.start_grpc() if protocol == "grpc" else sink.start_http()
    result = run_cli(
        "push",
        str(bundle_path),
        "--endpoint",
        f"http://127.0.0.1:{port}",
        "--protocol",
        protocol,
        "--header",
        "x-api-key=k=1",
    )
    assert result.exit_code == 0, result.output
    bundle = load_bundle(bundle_path)
    assert f"pushed {bundle_path} (run {bundle.run_id}, 4 spans)" in result.output
    received = {span.span_id: span for span in sink.spans()}
    assert len(received) == len(bundle.spans) == 4
    for line in bundle.spans:
        got = received[line["spanId"]]
        assert got.trace_id == line["traceId"] == bundle.manifest.trace_id
        assert got.parent_span_id == line.get("parentSpanId", "")
        assert got.span.name == line["name"]
        assert got.span.kind == line["kind"]
        assert got.span.start_time_unix_nano == int(line["startTimeUnixNano"])
        assert got.span.end_time_unix_nano == int(line["endTimeUnixNano"])
        assert got.span.status.code == line.get("status", {}).get("code", 0)
        recorded = {item["key"] for item in line["attributes"]}
        assert recorded <= got.attributes.keys()
        if "execute_tool" in line["name"]:  # what the line leaves out is sent
            assert got.attributes["gen_ai.operation.name"] == "execute_tool"
            assert got.attributes["gen_ai.tool.type"] == "function"
        assert len(got.span.events) == len(line.get("events", ()))
        assert (got.scope_name, got.scope_version) == ("sftrace", sftrace.__version__)
        assert got.resource == {
            item["key"]: next(iter(item["value"].values()))
            for item in bundle.manifest.resource["attributes"]
        }
    tool = received[bundle.calls[0].span_id].attributes
    assert tool["gen_ai.tool.call.arguments"] == bundle.calls[0].input_json
    assert tool["openinference.span.kind"] == "TOOL"
    assert all(headers.get("x-api-key") == "k=1" for headers in sink.headers)


def test_push_to_an_unreachable_collector_fails_with_one_line(tmp_path: Path) -> None:
    """Nothing listens: exit 1 and one line naming the bundle, the endpoint and the cause."""
    bundle_path = record_completed(tmp_path / "lonely.sftrace")
    port = free_port()
    result = run_cli(
        "push", str(bundle_path), "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "0.5"
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"sftrace: error: sending '{bundle_path}' to http://127.0.0.1:{port}")
    assert "Connection refused" in line or "timeout" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "127.0.0.1:4318"], "is not an http:// or https:// URL"),
        (["--header", "no-equals-sign"], "expected KEY=VALUE"),
    ],
)
def test_push_rejects_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    """A scheme-less endpoint or a malformed header: exit 2 with the fix, nothing sent."""
    bundle_path = record_completed(tmp_path / "b.sftrace")
    result = run_cli("push", str(bundle_path), *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_push_of_a_missing_bundle_fails_before_sending(tmp_path: Path) -> None:
    """An unreadable bundle: exit 2, one line, nothing sent."""
    result = run_cli("push", str(tmp_path / "nope.sftrace"), "--endpoint", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert "bundle not found" in result.stderr


# --- import -----------------------------------------------------------------------------


def collector_lines(bundles: list[Path], per_line: int, seed: int) -> list[bytes]:
    """Requests as a collector's file exporter writes them: spans of several runs shuffled
    and interleaved across lines, with the fields and attributes export adds."""
    items = []
    for bundle in bundles:
        manifest = orjson.loads((bundle / "manifest.json").read_bytes())
        for raw in lines(bundle):
            span = orjson.loads(raw)
            attributes = {item["key"]: item for item in span["attributes"]}
            kind = attributes.get("sftrace.kind", {}).get("value", {}).get("stringValue")
            if kind is not None:
                span["attributes"].append(
                    {"key": "openinference.span.kind", "value": {"stringValue": kind.upper()}}
                )
            if kind == "tool" and "sftrace.input" in attributes:
                value = attributes["sftrace.input"]["value"]
                span["attributes"].append({"key": "gen_ai.tool.call.arguments", "value": value})
                span["attributes"].append({"key": "input.value", "value": value})
            collector_span = {"flags": 257, "traceState": "", **dict(reversed(span.items()))}
            items.append((manifest, collector_span))
    random.Random(seed).shuffle(items)
    items.append(copy.deepcopy(items[0]))  # a span delivered twice
    output = []
    for start in range(0, len(items), per_line):
        chunk = items[start : start + per_line]
        resource_spans = []
        for manifest, span in chunk:
            resource_spans.append(
                {
                    "resource": manifest["resource"],
                    "scopeSpans": [{"scope": manifest["scope"], "spans": [span]}],
                }
            )
        output.append(orjson.dumps({"resourceSpans": resource_spans}))
    return output


def test_import_writes_one_identical_bundle_per_interleaved_run(tmp_path: Path) -> None:
    """Runs spread over lines and files, shuffled, with a duplicate, another signal and a
    trace of no run: one bundle per run, span lines byte-identical, replaying the same."""
    failed = record_failing(tmp_path / "orig" / "failed.sftrace")
    completed = record_completed(tmp_path / "orig" / "completed.sftrace")
    all_lines = collector_lines([failed, completed], per_line=3, seed=7)
    other = {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [
                    {"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "GET /health"}]}
                ],
            }
        ]
    }
    first = tmp_path / "collector" / "traces-1.jsonl"
    second = tmp_path / "collector" / "traces-2.jsonl"
    first.parent.mkdir()
    first.write_bytes(b"\n".join([*all_lines[:2], b'{"resourceLogs":[]}', b""]) + b"\n")
    second.write_bytes(b"\n".join([*all_lines[2:], orjson.dumps(other)]))  # no final newline
    result = run_cli("import", str(first), str(second), "--output", str(tmp_path / "imported"))
    assert result.exit_code == 0, result.output
    assert (
        "2 bundle(s) written, 0 run(s) skipped, 1 trace(s) without an sftrace run" in result.output
    )
    for original, entrypoint in ((failed, failing_agent), (completed, agents.booking_agent)):
        manifest = load_bundle(original).manifest
        imported = tmp_path / "imported" / f"{manifest.agent_name}-{manifest.run_id}.sftrace"
        copy_manifest = load_bundle(imported, verify_integrity=True).manifest
        assert lines(imported) == lines(original)
        for key in ("run_id", "trace_id", "root_span_id", "agent_name", "status", "failure"):
            assert getattr(copy_manifest, key) == getattr(manifest, key)
        assert copy_manifest.totals == manifest.totals
        assert copy_manifest.resource == manifest.resource
        assert replay_summary(imported, entrypoint) == replay_summary(original, entrypoint)


def test_live_export_then_import_gives_the_recorded_bundle(tmp_path: Path, sink: OtlpSink) -> None:
    """A run exported live over OTLP and imported from the file is the bundle recorded."""
    provider = TracerProvider()
    port = sink.start_http()
    sftrace.configure(
        tracer_provider=provider,
        bundle_dir=tmp_path / "traces",
        otlp_endpoint=f"http://127.0.0.1:{port}",
        max_payload_bytes=0,
    )
    try:
        recorded = record_failing(tmp_path / "live.sftrace")
        provider.force_flush()
        sink.wait_for_trace(load_bundle(recorded).manifest.trace_id, 4)
    finally:
        provider.shutdown()
    exported = tmp_path / "export.jsonl"
    exported.write_bytes(b"\n".join(sink.file_lines()) + b"\n")
    result = run_cli("import", str(exported), "-o", str(tmp_path / "back"))
    assert result.exit_code == 0, result.output
    [imported] = (tmp_path / "back").iterdir()
    assert lines(imported) == lines(recorded)
    assert replay_summary(imported, failing_agent) == replay_summary(recorded, failing_agent)


def _drop_span(spans: list[dict[str, Any]]) -> None:
    del spans[2]


def _mark(key: str, value: dict[str, Any]) -> Any:
    def change(spans: list[dict[str, Any]]) -> None:
        spans[1]["attributes"].append({"key": key, "value": value})

    return change


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (_drop_span, "incomplete: no span with sftrace.seq"),
        (
            _mark("sftrace.truncated", {"arrayValue": {"values": [{"stringValue": "x"}]}}),
            "was cut for OTLP by max_payload_bytes (x)",
        ),
        (_mark("sftrace.content_omitted", {"boolValue": True}), "capture_content=False"),
    ],
)
def test_import_skips_runs_that_cannot_replay_and_says_why(
    tmp_path: Path, change: Any, problem: str
) -> None:
    """A lost span, a cut or a stripped payload: the run is skipped with the reason, exit 1."""
    bundle = record_completed(tmp_path / "b.sftrace")
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    spans = [orjson.loads(line) for line in lines(bundle)]
    change(spans)
    request = {
        "resourceSpans": [
            {
                "resource": manifest["resource"],
                "scopeSpans": [{"scope": manifest["scope"], "spans": spans}],
            }
        ]
    }
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps(request) + b"\n")
    result = run_cli("import", str(source), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert problem in result.stderr
    assert "0 bundle(s) written, 1 run(s) skipped" in result.stdout
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_import_refuses_to_replace_a_bundle_unless_asked(tmp_path: Path) -> None:
    """An existing bundle is kept (exit 1) unless --overwrite is given."""
    bundle = record_completed(tmp_path / "b.sftrace")
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(collector_lines([bundle], per_line=10, seed=1)) + b"\n")
    out = str(tmp_path / "out")
    assert run_cli("import", str(source), "-o", out).exit_code == 0
    again = run_cli("import", str(source), "-o", out)
    assert again.exit_code == 1
    assert "already exists; pass --overwrite" in again.stderr
    assert run_cli("import", str(source), "-o", out, "--overwrite").exit_code == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"resourceSpans": [\n', "in.jsonl:1: not OTLP/JSON"),
        (b"[1, 2]\n", "in.jsonl:1: expected a JSON object"),
        (
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"q83vEjRWeJCrze8SNFZ4kA==",'
            b'"spanId":"ASNFZ4mrze8="}]}]}]}\n',
            "traceId must be 32 hex digits",
        ),
        (b'{"resourceSpans": []}\n', "no sftrace run found in 1 file(s)"),
    ],
)
def test_import_of_unreadable_input_exits_2_naming_file_and_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Invalid JSON, base64 ids, or no run at all: exit 2 and one line saying what is wrong."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(content)
    result = run_cli("import", str(source), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
