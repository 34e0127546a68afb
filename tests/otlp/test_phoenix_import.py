"""Pulling a failed run out of a real Phoenix server: record → export to Phoenix →
``sftrace import --from phoenix`` → frozen replay with no tool body run."""

from __future__ import annotations

import time
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from otlp_components import Phoenix

import sample_agents as agents
import sftrace
from interchange_helpers import failing_agent, lines, record_completed, record_failing
from sftrace import load_bundle, replay_run
from sftrace._cli import bundle as bundle_commands
from sftrace._cli import otlp as otlp_commands
from sftrace._cli import regress as regress_commands
from sftrace._cli.main import cli

pytestmark = [pytest.mark.otlp, pytest.mark.slow]
INGEST_TIMEOUT_S = 60.0


class PhoenixProject:
    """A Phoenix project of one test's own, that sftrace exports to over OTLP/HTTP."""

    def __init__(self, phoenix: Phoenix, bundle_dir: Path) -> None:
        self.phoenix = phoenix
        self.name = f"sftrace-import-{uuid.uuid4().hex[:8]}"
        self.bundle_dir = bundle_dir
        self.providers: list[TracerProvider] = []
        self.export()

    def export(self, **options: Any) -> None:
        """(Re)configure sftrace to export to this project, with these OTLP options."""
        provider = TracerProvider(resource=Resource({"openinference.project.name": self.name}))
        self.providers.append(provider)
        sftrace.configure(
            tracer_provider=provider,
            bundle_dir=self.bundle_dir,
            otlp_endpoint=self.phoenix.url,
            **options,
        )

    def wait_for(self, trace_ids: list[str], spans: int) -> None:
        """Wait until Phoenix stores ``spans`` spans of these traces (ingestion is async)."""
        for provider in self.providers:
            assert provider.force_flush(10_000)
        query = "&".join(f"trace_id={trace_id}" for trace_id in trace_ids)
        deadline = time.monotonic() + INGEST_TIMEOUT_S
        stored = 0
        while time.monotonic() < deadline:
            try:
                reply = self.phoenix.get(f"/v1/projects/{self.name}/spans?limit=1000&{query}")
                stored = len(reply["data"])
            except urllib.error.HTTPError as exc:
                if exc.code != 404:  # 404 until the first span created the project
                    raise
            if stored >= spans:
                return
            time.sleep(0.2)
        pytest.fail(f"Phoenix stored {stored} of {spans} spans of {trace_ids}")


@pytest.fixture
def project(phoenix: Phoenix, tmp_path: Path) -> Iterator[PhoenixProject]:
    project = PhoenixProject(phoenix, tmp_path / "traces")
    try:
        yield project
    finally:
        for provider in project.providers:
            provider.shutdown()


def cli_with(*modules: Any) -> Any:
    for module in modules:
        module.register(cli)
    return cli


def run_import(*args: str) -> Result:
    commands = cli_with(otlp_commands)
    return CliRunner().invoke(commands, ["import", "--from", "phoenix", *args])


def test_a_failed_run_comes_back_from_phoenix_and_replays_with_no_body_run(
    phoenix: Phoenix, project: PhoenixProject, tmp_path: Path
) -> None:
    recorded = record_failing(tmp_path / "recorded.sftrace")
    completed = record_completed(tmp_path / "completed.sftrace")
    trace_ids = [load_bundle(path).manifest.trace_id for path in (recorded, completed)]
    project.wait_for(trace_ids, 4 + len(lines(completed)))

    result = run_import(
        "--url", phoenix.url, "--project", project.name, "-o", str(tmp_path / "back")
    )

    assert result.exit_code == 0, result.output
    assert "1 bundle(s) written, 0 run(s) skipped" in result.output
    [imported] = (tmp_path / "back").iterdir()  # only the failed run: --status error
    assert load_bundle(imported).manifest.trace_id == trace_ids[0]
    validated = CliRunner().invoke(cli_with(bundle_commands), ["validate", str(imported)])
    assert validated.exit_code == 0, validated.output
    same = CliRunner().invoke(cli_with(regress_commands), ["diff", str(recorded), str(imported)])
    assert same.exit_code == 0, same.output
    agents.EXECUTED.clear()
    replayed = replay_run(imported, failing_agent)
    assert (replayed.status, replayed.reproduced_failure) == ("failed", True)
    assert [m.action for m in replayed.matched] == ["substituted"] * 3
    assert agents.EXECUTED == []


def test_runs_picked_by_trace_id_status_and_limit(
    phoenix: Phoenix, project: PhoenixProject, tmp_path: Path
) -> None:
    failed = [record_failing(tmp_path / f"failed-{n}.sftrace") for n in range(3)]
    completed = record_completed(tmp_path / "completed.sftrace")
    ids = {path: load_bundle(path).manifest.trace_id for path in (*failed, completed)}
    project.wait_for(list(ids.values()), 3 * 4 + len(lines(completed)))
    base = ["--url", phoenix.url, "--project", project.name]

    latest = run_import(*base, "--limit", "2", "--since", "1h", "-o", str(tmp_path / "latest"))
    assert latest.exit_code == 0, latest.output
    picked = {load_bundle(path).manifest.trace_id for path in (tmp_path / "latest").iterdir()}
    assert picked == {ids[failed[2]], ids[failed[1]]}  # the two latest failed runs

    wanted = run_import(*base, "--trace-id", ids[completed], "-o", str(tmp_path / "by-id"))
    assert wanted.exit_code == 0, wanted.output
    [imported] = (tmp_path / "by-id").iterdir()
    assert load_bundle(imported).manifest.status == "completed"

    unknown = "0" * 31 + "1"
    missing = run_import(*base, "--trace-id", unknown, "-o", str(tmp_path / "none"))
    assert missing.exit_code == 2
    assert f"skipped trace {unknown}: Phoenix holds no span of it" in missing.output


def test_runs_exported_without_content_or_cut_are_skipped_with_the_reason(
    phoenix: Phoenix, project: PhoenixProject, tmp_path: Path
) -> None:
    project.export(capture_content=False)
    record_failing(tmp_path / "stripped.sftrace")
    project.export(max_payload_bytes=20)
    record_failing(tmp_path / "cut.sftrace")
    ids = [
        load_bundle(tmp_path / name).manifest.trace_id
        for name in ("stripped.sftrace", "cut.sftrace")
    ]
    project.wait_for(ids, 8)

    result = run_import(
        "--url", phoenix.url, "--project", project.name, "-o", str(tmp_path / "back")
    )

    assert result.exit_code == 1, result.output
    assert "exported without inputs and outputs (capture_content=False)" in result.output
    assert "was cut for OTLP by max_payload_bytes" in result.output
    assert "0 bundle(s) written, 2 run(s) skipped" in result.output


def test_an_unknown_project_is_one_line_and_exit_2(phoenix: Phoenix, tmp_path: Path) -> None:
    result = run_import("--url", phoenix.url, "--project", "no-such-project", "-o", str(tmp_path))
    assert result.exit_code == 2
    assert "has no project 'no-such-project' (HTTP 404" in result.output
    assert "Traceback" not in result.output
