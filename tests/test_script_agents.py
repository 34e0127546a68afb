"""An agent recorded by running its own file (``python agent.py``): its exception classes
live in ``__main__`` then, and in ``agent`` when a replay imports ``agent:run``. Named by
the module a replay imports, they are found, and the failures compare, either way round."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sftrace import compare, load_bundle, replay_run

pytestmark = pytest.mark.slow  # runs a script in a subprocess

SCRIPT = textwrap.dedent(
    """
    import sys
    import sftrace
    from sftrace import trace_tool

    class QuotaExceeded(Exception):
        pass

    @trace_tool(name="check_quota")
    def check_quota(tenant: str) -> int:
        raise QuotaExceeded(f"quota exceeded for {tenant}")

    def run(tenant: str) -> str:
        try:
            return str(check_quota(tenant))
        except QuotaExceeded:
            if tenant == "crash":
                raise
            return "over quota"

    if __name__ == "__main__":
        tenant, bundle = sys.argv[1], sys.argv[2]
        try:
            with sftrace.record("q", output=bundle, run_input=tenant) as session:
                session.set_output(run(tenant))
        except QuotaExceeded:
            pass
        again = sftrace.replay_run(bundle, run)  # in the same script: __main__.run
        print(again.status, again.reproduced, type(again.error).__name__)
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "quota_script.py"
    path.write_text(SCRIPT)
    sys.path.insert(0, str(tmp_path))
    yield path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("quota_script", None)


def run_script(script: Path, tenant: str, bundle: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(script), tenant, str(bundle)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_caught_exception_of_a_script_agent_replays_into_its_handler(
    script: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "caught.sftrace"
    assert run_script(script, "acme", bundle) == "completed True NoneType"
    error = load_bundle(bundle).calls[0].error
    assert error is not None
    assert error.type == "quota_script.QuotaExceeded"
    result = replay_run(bundle, "quota_script:run")
    assert (result.status, result.output, result.reproduced) == ("completed", "over quota", True)


def test_a_script_agents_own_failure_compares_with_its_replay(script: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "crash.sftrace"
    assert run_script(script, "crash", bundle) == "failed True QuotaExceeded"
    failure = load_bundle(bundle).failure
    assert failure is not None
    assert failure.type == "quota_script.QuotaExceeded"
    result = replay_run(bundle, "quota_script:run")
    assert (result.status, result.reproduced) == ("failed", True)
    assert type(result.error).__module__ == "quota_script"
    assert compare(bundle, result).passed
