"""Regression suites: TOML files of recorded runs to replay and judge, run by
``sftrace test`` and collected by pytest.

A suite file is named ``*.sftrace-suite.toml`` (the pytest plugin collects only those)
and lives next to the agent::

    name = "refund agent"                 # default: the file name
    entrypoint = "refund_agent:handle"    # module:function, importable from pythonpath
    pythonpath = ["."]                    # default: the suite's directory
    match = "strict"                      # or "unordered"
    tiers = ["exact", "normalized"]       # match tiers (default; add "relaxed" with:)
    on_miss = "live"                      # a new call runs for real (default "error")
    allow_live_tools = ["check_policy"]   # also mode and live_llms, as in replay()

    [match_ignore]                        # input paths the relaxed tier ignores
    llm = ["$.messages[0].content"]       # per tool name, "llm", "provider/model" or "*"

    [policy]                              # the suite's ComparisonPolicy
    ignore_paths = ["ticket_id"]
    severity_overrides = { OUTPUT_TEXT_CHANGED = "error" }

    [[cases]]
    name = "refund outside the window"
    bundle = "bundles/outside_window.sftrace"        # relative to this file
    expected_output = "expected/outside_window.json" # optional: a JSON file
    expected_trajectory = "expected/outside_window.toml"  # optional: an expectations doc

    [cases.expect]                        # optional inline expectations (same keys)
    not_called = ["issue_refund"]

    [cases.policy]                        # extends the suite's policy
    ignore_paths = ["reply"]

A case may set any of the replay options (``match``, ``tiers``, ``match_ignore``,
``on_miss``, ``mode``, ``live_llms``, ``allow_live_tools``); its value replaces the
suite's. A case without expectations passes when the replay behaves as recorded
(``sftrace.compare``); with expectations it passes when the replay meets them. Loading
validates everything (keys, bundles, files, policies) before any case runs; a problem
raises one :class:`SuiteError` naming the file and the case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import re
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError, SftraceError, SuiteError
from sftrace._model.policy import MatchMode
from sftrace._regress.compare import compare
from sftrace._regress.expectations import Expectations, load_expectations, load_json_value
from sftrace._regress.findings import ComparisonPolicy, Report

if TYPE_CHECKING:
    from sftrace._replay.options import ReplayOptions
    from sftrace._replay.run import ReplayResult

SUITE_SUFFIX: Final = ".sftrace-suite.toml"
# Replay options a suite sets for its cases and a case may set for itself (a case's
# value replaces the suite's); checked by ReplayOptions.build.
_REPLAY_KEYS: Final[tuple[str, ...]] = (
    "match",
    "tiers",
    "match_ignore",
    "on_miss",
    "mode",
    "live_llms",
    "allow_live_tools",
)
_SUITE_KEYS: Final = ("name", "entrypoint", "pythonpath", *_REPLAY_KEYS, "policy", "cases")
_CASE_KEYS: Final = (
    "name",
    "bundle",
    "entrypoint",
    *_REPLAY_KEYS,
    "expected_output",
    "expected_trajectory",
    "expect",
    "policy",
)
_POLICY_KEYS: Final = ("severity_overrides", "ignore_paths")
_ENTRYPOINT: Final = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# Directories never searched for suites.
_SKIPPED_DIRS: Final = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})

Outcome = Literal["passed", "failed", "error"]


def is_suite_file(path: Path) -> bool:
    """Whether ``path`` is named like a suite file (``*.sftrace-suite.toml``)."""
    return path.name.endswith(SUITE_SUFFIX) and len(path.name) > len(SUITE_SUFFIX)


@dataclass(frozen=True)
class SuiteCase:
    """One validated case of a suite: a bundle to replay and how to judge the replay."""

    suite_name: str
    suite_path: Path
    name: str
    bundle_path: Path
    bundle: Bundle
    entrypoint: str
    options: ReplayOptions
    expectations: Expectations | None
    policy: ComparisonPolicy
    pythonpath: tuple[Path, ...]

    @property
    def id(self) -> str:
        return f"{self.suite_name}::{self.name}"

    @property
    def match(self) -> MatchMode:
        return self.options.match

    def run(self, *, entrypoint: str | None = None, agent_version: str | None = None) -> CaseResult:
        """Replay the bundle against the entrypoint (``entrypoint`` overrides the suite's)
        and judge it; ``agent_version``: the version of the agent under test, carried by
        the replayed run. Never raises: a case that cannot run is an ``error`` outcome."""
        return _run_case(self, entrypoint, agent_version)


@dataclass(frozen=True)
class Suite:
    """A validated suite file."""

    path: Path
    name: str
    cases: tuple[SuiteCase, ...]

    def run(
        self,
        *,
        entrypoint: str | None = None,
        on_result: Callable[[CaseResult], None] | None = None,
        agent_version: str | None = None,
    ) -> list[CaseResult]:
        """Run every case in order; ``on_result`` is called after each."""
        results = []
        for case in self.cases:
            result = case.run(entrypoint=entrypoint, agent_version=agent_version)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case: ``passed``, ``failed`` (a regression: ``report`` holds
    the error findings) or ``error`` (the case could not run: ``error`` says why).
    ``replay`` is the replay the report judged (None when the case could not run)."""

    case: SuiteCase
    outcome: Outcome
    report: Report | None
    error: str | None
    duration_s: float
    replay: ReplayResult | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.case.id

    def failure_text(self) -> str:
        """What a reader needs when the case did not pass."""
        if self.outcome == "error":
            return f"could not run: {self.error}"
        assert self.report is not None
        return self.report.format(include_info=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.case.suite_name,
            "suite_path": str(self.case.suite_path),
            "case": self.case.name,
            "outcome": self.outcome,
            "bundle": str(self.case.bundle_path),
            "entrypoint": self.case.entrypoint,
            "duration_s": round(self.duration_s, 6),
            "error": self.error,
            "report": self.report.to_dict() if self.report is not None else None,
        }


# --- loading and validation -----------------------------------------------------------


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Load and validate the suite file at ``path`` (bundles and expectation files
    included); raise :class:`SuiteError` naming the file and case on the first problem."""
    suite_path = Path(path)
    display = str(suite_path)
    try:
        text = suite_path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{display}: suite file not found", path=display) from None
    except IsADirectoryError:
        raise SuiteError(f"{display}: is a directory, not a suite file", path=display) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{display}: not UTF-8 text ({exc})", path=display) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{display}: invalid TOML: {exc}", path=display) from None
    return _Loader(suite_path).suite(data)


class _Loader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.base = path.resolve().parent
        self.display = str(path)

    def fail(self, message: str, case: str | None = None) -> SuiteError:
        where = f"{self.display}: case {case!r}" if case is not None else self.display
        return SuiteError(f"{where}: {message}", path=self.display, case=case)

    def suite(self, data: dict[str, Any]) -> Suite:
        self.keys(data, _SUITE_KEYS, "suite key", None)
        name = data.get("name", self.path.name.removesuffix(SUITE_SUFFIX) or self.path.stem)
        if not isinstance(name, str) or not name.strip():
            raise self.fail(f"'name' must be a non-empty string, got {name!r}")
        entrypoint = data.get("entrypoint")
        if entrypoint is not None:
            self.entrypoint(entrypoint, None)
        pythonpath = self.pythonpath(data.get("pythonpath", ["."]))
        replay: dict[str, Any] = {key: data[key] for key in _REPLAY_KEYS if key in data}
        self.replay_options(replay, None)
        policy = self.policy(data.get("policy"), None)
        cases_data = data.get("cases")
        if not isinstance(cases_data, list) or not cases_data:
            raise self.fail("no cases: add at least one [[cases]] table with a name and a bundle")
        cases: list[SuiteCase] = []
        seen: set[str] = set()
        for index, raw in enumerate(cases_data, start=1):
            case = self.case(raw, index, name, entrypoint, replay, policy, pythonpath)
            if case.name in seen:
                raise self.fail("duplicate case name; give each case its own name", case.name)
            seen.add(case.name)
            cases.append(case)
        return Suite(self.path, name, tuple(cases))

    def keys(
        self, data: Mapping[str, Any], known: tuple[str, ...], what: str, case: str | None
    ) -> None:
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.fail(
                    f"unknown {what} {key!r}{hint}; expected one of {', '.join(known)}", case
                )

    def entrypoint(self, value: Any, case: str | None) -> str:
        if not isinstance(value, str) or not _ENTRYPOINT.match(value):
            raise self.fail(
                f"entrypoint must be 'module:function' (e.g. 'my_agent:run'), got {value!r}",
                case,
            )
        return value

    def replay_options(self, values: Mapping[str, Any], case: str | None) -> ReplayOptions:
        from sftrace._replay.options import ReplayOptions

        for key in ("tiers", "live_llms", "allow_live_tools"):
            if key in values and not isinstance(values[key], list):
                raise self.fail(f"{key} must be a list of names, got {values[key]!r}", case)
        try:
            return ReplayOptions.build(**values)
        except ConfigError as exc:
            raise self.fail(str(exc), case) from None

    def pythonpath(self, value: Any) -> tuple[Path, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(f"pythonpath must be a list of directories, got {value!r}")
        paths = []
        for item in value:
            directory = (self.base / item).resolve()
            if not directory.is_dir():
                raise self.fail(f"pythonpath entry {item!r} is not a directory ({directory})")
            paths.append(directory)
        return tuple(paths)

    def policy(self, value: Any, case: str | None) -> ComparisonPolicy | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(f"policy must be a table, got {value!r}", case)
        self.keys(value, _POLICY_KEYS, "policy key", case)
        try:
            return ComparisonPolicy(
                severity_overrides=value.get("severity_overrides", {}),
                ignore_paths=value.get("ignore_paths", ()),
            )
        except ConfigError as exc:
            raise self.fail(f"policy: {exc}", case) from None

    def file(self, value: Any, key: str, case: str) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{key} must be a path relative to the suite file, got {value!r}", case)
        return self.path.parent / value

    def case(
        self,
        raw: Any,
        index: int,
        suite_name: str,
        suite_entrypoint: str | None,
        suite_replay: Mapping[str, Any],
        suite_policy: ComparisonPolicy | None,
        pythonpath: tuple[Path, ...],
    ) -> SuiteCase:
        if not isinstance(raw, dict):
            raise self.fail(f"cases[{index}] must be a table, got {raw!r}")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            if name is None:  # a misspelt key says so first ("did you mean 'name'")
                self.keys(raw, _CASE_KEYS, "case key", f"cases[{index}]")
            raise self.fail(f"cases[{index}] needs a non-empty 'name', got {name!r}")
        if "::" in name or not name.isprintable():
            raise self.fail(
                f"cases[{index}]: the case name {name!r} holds '::' or a control character; "
                f"pytest names a case <suite file>::<case name>, and could not select it "
                f"(-k, --lf): use other separators"
            )
        self.keys(raw, _CASE_KEYS, "case key", name)
        entrypoint = raw.get("entrypoint", suite_entrypoint)
        if entrypoint is None:
            raise self.fail(
                "no entrypoint: set 'entrypoint' at the top of the suite or in the case", name
            )
        entrypoint = self.entrypoint(entrypoint, name)
        replay = {**suite_replay, **{key: raw[key] for key in _REPLAY_KEYS if key in raw}}
        options = self.replay_options(replay, name)
        if "bundle" not in raw:
            raise self.fail("missing 'bundle' (the path of a .sftrace bundle)", name)
        bundle_path = self.file(raw["bundle"], "bundle", name)
        try:
            bundle = load_bundle(bundle_path)
        except SftraceError as exc:
            raise self.fail(f"bundle {raw['bundle']!r}: {exc}", name) from None
        policy = (suite_policy or ComparisonPolicy()).extend(self.policy(raw.get("policy"), name))
        expectations = self.expectations(raw, name)
        return SuiteCase(
            suite_name=suite_name,
            suite_path=self.path,
            name=name,
            bundle_path=bundle_path,
            bundle=bundle,
            entrypoint=entrypoint,
            options=options,
            expectations=expectations,
            policy=policy,
            pythonpath=pythonpath,
        )

    def expectations(self, raw: Mapping[str, Any], name: str) -> Expectations | None:
        document: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if "expected_trajectory" in raw:
            target = self.file(raw["expected_trajectory"], "expected_trajectory", name)
            try:
                loaded = load_expectations(target).to_dict()
            except ConfigError as exc:
                raise self.fail(f"expected_trajectory: {exc}", name) from None
            document.update(loaded)
            sources.update(dict.fromkeys(loaded, "expected_trajectory"))
        if "expect" in raw:
            inline = raw["expect"]
            if not isinstance(inline, dict):
                raise self.fail(f"expect must be a table of expectations, got {inline!r}", name)
            for key in inline:
                if key in document:
                    raise self.fail(
                        f"expect.{key} is also set by {sources[key]}; set it in one place",
                        name,
                    )
            document.update(inline)
            sources.update(dict.fromkeys(inline, "expect"))
        if "expected_output" in raw:
            if "output" in document:
                raise self.fail(
                    f"expected_output is given, and {sources['output']} also sets 'output'; "
                    f"set it in one place",
                    name,
                )
            target = self.file(raw["expected_output"], "expected_output", name)
            try:
                document["output"] = load_json_value(target)
            except ConfigError as exc:
                raise self.fail(f"expected_output: {exc}", name) from None
        if not document:
            return None
        try:
            return Expectations.from_mapping(document, source="expectations")
        except ConfigError as exc:
            raise self.fail(str(exc), name) from None


def discover_suites(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Suite files named by ``paths``: a file as given, a directory searched for
    ``*.sftrace-suite.toml`` (skipping hidden and virtual-environment directories)."""
    found: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            found.extend(_walk(path))
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def _walk(root: Path) -> Iterator[Path]:
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in _SKIPPED_DIRS
            and not (Path(directory) / name / "pyvenv.cfg").exists()
        )
        for name in sorted(files):
            candidate = Path(directory) / name
            if is_suite_file(candidate):
                yield candidate


# --- running ---------------------------------------------------------------------------


@contextlib.contextmanager
def python_path(directories: Iterable[Path]) -> Iterator[None]:
    """Put ``directories`` first on ``sys.path`` for the block (the agent's modules)."""
    added = [str(directory) for directory in directories if str(directory) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for entry in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def _run_case(case: SuiteCase, entrypoint: str | None, agent_version: str | None) -> CaseResult:
    from sftrace._record.manual import check_agent_version
    from sftrace._replay.run import resolve_entrypoint, run_replay

    started = time.perf_counter()
    target_name = entrypoint or case.entrypoint
    try:
        with python_path(case.pythonpath):
            target = resolve_entrypoint(
                target_name, search_path=case.pythonpath if entrypoint is None else None
            )
            options = dataclasses.replace(
                case.options, agent_version=check_agent_version(agent_version)
            )
            result = run_replay(case.bundle, target, options)
        report = compare(case.bundle, result, case.policy, expect=case.expectations)
    except Exception as exc:  # the case could not run; report it, keep running the rest
        message = str(exc).strip() or type(exc).__name__
        if not isinstance(exc, SftraceError):
            message = f"{type(exc).__name__}: {message}"
        return CaseResult(case, "error", None, message, time.perf_counter() - started)
    outcome: Outcome = "passed" if report.passed else "failed"
    return CaseResult(case, outcome, report, None, time.perf_counter() - started, result)
