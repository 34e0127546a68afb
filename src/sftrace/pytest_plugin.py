"""The sftrace pytest plugin, registered through the ``pytest11`` entry point.

It is inactive unless used: importing it loads nothing beyond pytest, it adds no option
and changes nothing in a session that neither requests its fixture nor has suite files.

- The ``sftrace_replay`` fixture replays a bundle against an entrypoint and returns the
  ``ReplayResult``; a relative bundle path is found next to the test file::

      from sftrace.testing import assert_expectations

      def test_refund_is_denied(sftrace_replay):
          result = sftrace_replay("bundles/refund.sftrace", "refund_agent:handle")
          assert_expectations(result, output={"decision": "denied"})

  Async entrypoints work in sync tests (the coroutine is run to completion); in an
  async test (pytest-asyncio, anyio) await ``sftrace_replay.arun(...)`` so the
  entrypoint runs in the test's own event loop.

- Files named ``*.sftrace-suite.toml`` are collected as regression suites: each case is
  a test item, whose failure report lists the findings, then the first divergence.
  Nothing else is collected, so unrelated TOML files are never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from sftrace._bundle.reader import Bundle
    from sftrace._regress.suite import CaseResult, SuiteCase
    from sftrace._replay.run import Entrypoint, ReplayResult

__all__ = ["Replayer", "sftrace_replay"]

# Kept equal to ``_suite.SUITE_SUFFIX`` (not imported: importing this plugin stays cheap).
_SUITE_SUFFIX = ".sftrace-suite.toml"


class Replayer:
    """What the ``sftrace_replay`` fixture gives: call it like ``sftrace.replay_run``."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def _bundle(self, bundle: Bundle | str | os.PathLike[str]) -> Bundle | str | os.PathLike[str]:
        """A relative path is the test file's first (the same bundle from any working
        directory), else the working directory's."""
        if isinstance(bundle, str | os.PathLike):
            path = Path(bundle)
            if not path.is_absolute() and (self.base / path).exists():
                path = self.base / path
            return path.resolve() if path.exists() else path
        return bundle

    def __call__(
        self,
        bundle: Bundle | str | os.PathLike[str],
        entrypoint: str | Entrypoint,
        *,
        agent_path: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> ReplayResult:
        """Replay ``bundle`` against ``entrypoint`` (options as ``sftrace.replay_run``).

        ``agent_path``: the directory the agent is imported from; a module of the
        entrypoint's name imported from elsewhere first (another test's agent of the same
        name) is refused instead of replayed.
        """
        from sftrace._replay.run import replay_run

        target = self._entrypoint(entrypoint, agent_path)
        return replay_run(self._bundle(bundle), target, **options)

    async def arun(
        self,
        bundle: Bundle | str | os.PathLike[str],
        entrypoint: str | Entrypoint,
        *,
        agent_path: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> ReplayResult:
        """The async form, for async tests: awaits the entrypoint in the running loop."""
        from sftrace._replay.run import areplay_run

        target = self._entrypoint(entrypoint, agent_path)
        return await areplay_run(self._bundle(bundle), target, **options)

    @staticmethod
    def _entrypoint(
        entrypoint: str | Entrypoint, agent_path: str | os.PathLike[str] | None
    ) -> str | Entrypoint:
        if agent_path is None or not isinstance(entrypoint, str):
            return entrypoint
        from sftrace._replay.run import resolve_entrypoint

        return resolve_entrypoint(entrypoint, search_path=[agent_path])


@pytest.fixture
def sftrace_replay(request: pytest.FixtureRequest) -> Replayer:
    """Replay a recorded bundle against an entrypoint: ``sftrace_replay(bundle, "mod:fn")``."""
    return Replayer(Path(request.path).parent)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect ``*.sftrace-suite.toml`` files as regression suites."""
    name = file_path.name
    if name.endswith(_SUITE_SUFFIX) and len(name) > len(_SUITE_SUFFIX):
        suite: SuiteFile = SuiteFile.from_parent(parent, path=file_path)
        return suite
    return None


class CaseFailed(Exception):
    """A suite case did not pass (a regression, or it could not run)."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.failure_text())
        self.result = result


class SuiteFile(pytest.File):
    """A suite file: validated as a whole, then one item per case."""

    def collect(self) -> Iterator[pytest.Item]:
        from sftrace._errors import SftraceError
        from sftrace._regress.suite import load_suite

        try:
            suite = load_suite(self.path)
        except SftraceError as exc:
            raise self.CollectError(str(exc)) from None
        for case in suite.cases:
            yield SuiteCaseItem.from_parent(self, name=case.name, case=case)


class SuiteCaseItem(pytest.Item):
    """One case of a suite: replay its bundle and judge the replay."""

    def __init__(self, *, case: SuiteCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        result = self.case.run()
        if result.outcome != "passed":
            raise CaseFailed(result)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"sftrace case {self.case.id}"
