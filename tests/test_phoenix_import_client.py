"""``sftrace import --from phoenix`` without a Phoenix server: a reply captured from a
real Phoenix (tests/data/phoenix) served on loopback, page by page, and bad input.

The round trip through a real Phoenix server is tests/otlp/test_phoenix_import.py.
"""

from __future__ import annotations

import datetime as dt
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

import sample_agents as agents
from interchange_helpers import failing_agent, lines
from sftrace import BackendError, ConfigError, import_from_phoenix, load_bundle, replay_run
from sftrace._cli import otlp as otlp_commands
from sftrace._cli.main import cli
from sftrace._export.phoenix_import import parse_since
from sftrace._model.stored import restored_attributes, stored_attributes

DATA = Path(__file__).parent / "data" / "phoenix"
# A failed run recorded by tests/interchange_helpers.failing_agent, exported to Phoenix
# 20.26 over OTLP/HTTP, and its spans as GET /v1/projects/default/spans returned them.
RECORDED = DATA / "failed-run.sftrace"
REPLY = orjson.loads((DATA / "failed-run-spans.json").read_bytes())
TRACE_ID = REPLY["data"][0]["context"]["trace_id"]


class FakePhoenix:
    """Serves the captured spans two per page, the way Phoenix pages (``next_cursor``),
    filtered by trace id and by the run-span filters an import sends; records requests."""

    def __init__(self, spans: list[dict[str, Any]], *, status: int = 200) -> None:
        self.spans, self.status = spans, status
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                address = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(address.query)
                fake.requests.append((address.path, query))
                body = orjson.dumps(fake.page(address.path, query))
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, query: dict[str, list[str]]) -> dict[str, Any]:
        if self.status != 200:
            return {"detail": "Project not found"}
        found = [
            span
            for span in self.spans
            if span["context"]["trace_id"] in query.get("trace_id", [span["context"]["trace_id"]])
            and all(
                str(span["attributes"].get(key)) == value
                for key, _, value in (item.partition(":") for item in query.get("attribute", []))
            )
            and span["status_code"] in query.get("status_code", [span["status_code"]])
        ]
        start = int(query.get("cursor", ["0"])[0])
        return {
            "data": found[start : start + 2],
            "next_cursor": str(start + 2) if start + 2 < len(found) else None,
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def phoenix() -> Iterator[FakePhoenix]:
    server = FakePhoenix(REPLY["data"])
    yield server
    server.stop()


def recorded_calls(bundle: Path) -> list[tuple[Any, ...]]:
    """Each call as replay and diff see it (times aside: Phoenix keeps microseconds)."""
    return [
        (
            call.seq,
            call.kind,
            call.name,
            call.provider,
            call.input_json,
            call.output_json,
            call.error,
            call.policy,
            call.span_id,
            call.parent_span_id,
            # RECORDED is a format version 1 bundle: compare what a version 2 line stores.
            stored_attributes(restored_attributes(call.attributes)),
        )
        for call in load_bundle(bundle).calls
    ]


def run_import(*args: str) -> Result:
    otlp_commands.register(cli)
    return CliRunner().invoke(cli, ["import", *args])


def test_the_failed_run_is_found_paged_and_written_as_the_recorded_bundle(
    phoenix: FakePhoenix, tmp_path: Path
) -> None:
    result = run_import("--from", "phoenix", "--url", phoenix.url, "-o", str(tmp_path))

    assert result.exit_code == 0, result.output
    [imported] = tmp_path.iterdir()
    # What Phoenix keeps of each span comes back; microseconds are all its times keep.
    assert len(lines(imported)) == len(lines(RECORDED))
    assert recorded_calls(imported) == recorded_calls(RECORDED)
    manifest = load_bundle(imported).manifest
    assert manifest.status == "failed"
    assert manifest.environment["source"] == "phoenix"
    # The run span was looked for by kind and status, newest first; then its trace read.
    path, first = phoenix.requests[0]
    assert path == "/v1/projects/default/spans"
    assert first["attribute"] == ["sftrace.kind:run"]
    assert first["status_code"] == ["ERROR"]
    assert first["order"] == ["desc"]
    assert [query.get("cursor") for _, query in phoenix.requests[1:]] == [None, ["2"]]
    agents.EXECUTED.clear()
    replayed = replay_run(imported, failing_agent)
    assert (replayed.status, replayed.reproduced_failure) == ("failed", True)
    assert agents.EXECUTED == []


def test_attributes_phoenix_derives_are_left_out_of_sftrace_spans(
    phoenix: FakePhoenix, tmp_path: Path
) -> None:
    import_from_phoenix(url=phoenix.url, project="default", output=tmp_path)
    [imported] = tmp_path.iterdir()
    keys = {
        attribute["key"]
        for line in lines(imported)
        for attribute in orjson.loads(line)["attributes"]
    }
    assert not {key for key in keys if key.startswith(("tool.parameters", "llm.", "input."))}
    assert "sftrace.input" in keys


def test_an_asked_trace_phoenix_does_not_hold_is_reported(
    phoenix: FakePhoenix, tmp_path: Path
) -> None:
    result = run_import(
        "--from", "phoenix", "--url", phoenix.url, "--trace-id", "ab" * 16, "-o", str(tmp_path)
    )
    assert result.exit_code == 2
    assert f"skipped trace {'ab' * 16}: Phoenix holds no span of it" in result.output
    assert "no sftrace run found in Phoenix project 'default' (1 trace)" in result.output


def test_a_refused_query_is_one_line_and_exit_2(tmp_path: Path) -> None:
    server = FakePhoenix([], status=404)
    try:
        result = run_import(
            "--from", "phoenix", "--url", server.url, "--project", "nope", "-o", str(tmp_path)
        )
    finally:
        server.stop()
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "has no project 'nope' (HTTP 404" in result.output


def test_an_unreachable_phoenix_is_a_backend_error(tmp_path: Path) -> None:
    server = FakePhoenix([])
    url = server.url
    server.stop()  # nothing listens on the port now
    with pytest.raises(BackendError, match=f"could not reach Phoenix at {url}"):
        import_from_phoenix(url=url, project="default", output=tmp_path, timeout=5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "phoenix", "spans.jsonl", "--url", "http://127.0.0.1:1"], "reads no FILES"),
        (["--from", "phoenix"], "needs --url"),
        (["--from", "phoenix", "--url", "127.0.0.1:6006"], "is not an http(s) URL"),
        (["--from", "phoenix", "--url", "http://127.0.0.1:1", "--since", "soon"], "--since"),
        (["--from", "phoenix", "--url", "http://127.0.0.1:1", "--limit", "0"], "--limit"),
        (["spans.jsonl", "--project", "x"], "--project only applies to --from phoenix"),
        ([], "needs FILES"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = run_import(*args, "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_since_takes_durations_and_iso_times() -> None:
    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    assert parse_since("24h", now=now) == dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC)
    assert parse_since("1d12h", now=now) == dt.datetime(2026, 11, 29, 0, tzinfo=dt.UTC)
    assert parse_since("30m", now=now) == dt.datetime(2026, 11, 30, 11, 30, tzinfo=dt.UTC)
    assert parse_since("2026-11-01T00:00:00") == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with pytest.raises(ConfigError, match="'yesterday' is neither a duration"):
        parse_since("yesterday")
