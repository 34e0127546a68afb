"""Turning an agenttrace-vcr suite into an sftrace suite, recordings included.

An agenttrace-vcr suite is a TOML file with ``name``, ``agent`` (``module:function``),
an optional ``[policy]`` (``severity_overrides`` by finding code, ``ignore_paths``) and
``[[cases]]`` of ``name``, ``recording`` (a JSON file relative to the suite) and an
optional ``[cases.policy]``. :func:`migrate_suite` writes the sftrace suite (see
:mod:`sftrace._regress.suite`) with each recording converted into a bundle in a
``bundles/`` folder beside it. Everything is read and checked first: an unknown key or
finding code, or a recording that cannot be read, raises one ``SuiteError`` naming
them all, and nothing is written.

agenttrace-vcr matches calls regardless of order and reports a changed order as a
warning, and arguments matched only after normalizing them as a warning too; the
migrated suite keeps that (``match = "unordered"``, ``CALL_ORDER_CHANGED`` and
``CALL_INPUT_NORMALIZED`` warnings unless the suite says otherwise; sftrace's default
match tiers, exact then normalized, are agenttrace-vcr's).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sftrace._bundle.format import BUNDLE_SUFFIX
from sftrace._bundle.names import safe_file_stem
from sftrace._errors import BundleError, ConfigError, SuiteError
from sftrace._model.jsonpath import parse_paths
from sftrace._regress.findings import FindingCode, Severity
from sftrace._regress.peers import write_runs
from sftrace._regress.peers.agenttrace import read_agenttrace
from sftrace._regress.peers.model import PeerRun

# agenttrace-vcr finding code -> the sftrace codes that report the same change.
CODE_MAP: Final[Mapping[str, tuple[FindingCode, ...]]] = {
    "AGENT_ERROR": (FindingCode.STATUS_CHANGED,),
    "STATUS_CHANGED": (FindingCode.STATUS_CHANGED,),
    "MISSING_TOOL_CALL": (FindingCode.MISSING_CALL,),
    "UNEXPECTED_TOOL_CALL": (FindingCode.UNEXPECTED_CALL,),
    "ARGUMENTS_NORMALIZED": (FindingCode.CALL_INPUT_NORMALIZED,),
    "TOOL_ORDER_CHANGED": (FindingCode.CALL_ORDER_CHANGED,),
    "OUTPUT_MISSING": (FindingCode.OUTPUT_MISSING,),
    "OUTPUT_STRUCTURE_CHANGED": (
        FindingCode.OUTPUT_STRUCTURE_CHANGED,
        FindingCode.OUTPUT_VALUE_CHANGED,
    ),
    "OUTPUT_TEXT_CHANGED": (FindingCode.OUTPUT_TEXT_CHANGED,),
}
_SUITE_KEYS: Final = ("name", "agent", "policy", "cases")
_CASE_KEYS: Final = ("name", "recording", "policy")
_POLICY_KEYS: Final = ("severity_overrides", "ignore_paths")
_SEVERITIES: Final = tuple(severity.value for severity in Severity)
# What the migrated suite sets so it judges like agenttrace-vcr did by default.
_DEFAULT_OVERRIDES: Final = {
    FindingCode.CALL_ORDER_CHANGED.value: Severity.WARNING.value,
    FindingCode.CALL_INPUT_NORMALIZED.value: Severity.WARNING.value,
}
BUNDLES_DIR: Final = "bundles"


@dataclass
class MigratedSuite:
    """What :func:`migrate_suite` wrote: the suite file and one bundle per case."""

    path: Path
    bundles: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Plan:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: list[tuple[PeerRun, Path]] = field(default_factory=list)


def _unknown(raw: Mapping[str, Any], allowed: tuple[str, ...], where: str, plan: _Plan) -> None:
    for key in raw:
        if key not in allowed:
            plan.problems.append(
                f"{where}: unknown key {key!r} (agenttrace-vcr suites have {', '.join(allowed)})"
            )


def _policy(raw: Any, where: str, plan: _Plan) -> dict[str, Any]:
    """An agenttrace policy table as an sftrace ``[policy]`` table."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        plan.problems.append(f"{where}: policy must be a table, got {raw!r}")
        return {}
    _unknown(raw, _POLICY_KEYS, f"{where} policy", plan)
    policy: dict[str, Any] = {}
    paths = raw.get("ignore_paths", [])
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
        plan.problems.append(f"{where}: ignore_paths must be a list of strings, got {paths!r}")
    elif paths:
        try:
            parse_paths(paths, what=f"{where}: ignore_paths")
        except ConfigError as exc:
            plan.problems.append(str(exc))
        policy["ignore_paths"] = list(paths)
    overrides = raw.get("severity_overrides", {})
    if not isinstance(overrides, dict):
        plan.problems.append(f"{where}: severity_overrides must be a table, got {overrides!r}")
        return policy
    converted: dict[str, str] = {}
    for code, severity in overrides.items():
        if code not in CODE_MAP:
            plan.problems.append(
                f"{where}: unknown finding code {code!r} (agenttrace-vcr codes: "
                f"{', '.join(CODE_MAP)})"
            )
        elif severity not in _SEVERITIES:
            plan.problems.append(
                f"{where}: unknown severity {severity!r} for {code} (expected one of "
                f"{', '.join(_SEVERITIES)})"
            )
        else:
            for new in CODE_MAP[code]:
                _override(converted, new.value, severity, code, where, plan)
    if converted:
        policy["severity_overrides"] = converted
    return policy


def _override(
    converted: dict[str, str], code: str, severity: str, source: str, where: str, plan: _Plan
) -> None:
    """Set ``code``'s severity; where two agenttrace codes meet, the stricter wins."""
    previous = converted.get(code)
    if previous is None or _SEVERITIES.index(severity) < _SEVERITIES.index(previous):
        if previous is not None:
            plan.notes.append(f"{where}: {code} is {severity} (the stricter, from {source})")
        converted[code] = severity


def _read_suite(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(
            f"{path}: cannot read the suite ({exc.strerror or exc})", path=str(path)
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: invalid TOML ({exc})", path=str(path)) from None


def _cases(raw: dict[str, Any], suite: Path, bundles: Path, plan: _Plan) -> list[dict[str, Any]]:
    cases = raw.get("cases")
    if not isinstance(cases, list) or not cases:
        plan.problems.append(f"{suite}: needs at least one [[cases]] entry")
        return []
    converted, stems = [], set()
    for index, case in enumerate(cases):
        where = f"{suite}: cases[{index}]"
        if not isinstance(case, dict):
            plan.problems.append(f"{where} must be a table")
            continue
        name, recording = case.get("name"), case.get("recording")
        where = f"{suite}: case {name!r}" if isinstance(name, str) else where
        _unknown(case, _CASE_KEYS, where, plan)
        if not isinstance(name, str) or not isinstance(recording, str):
            plan.problems.append(f"{where}: needs a 'name' and a 'recording' (strings)")
            continue
        stem = safe_file_stem(name)
        if stem in stems:
            plan.problems.append(f"{where}: a second case of this name")
            continue
        stems.add(stem)
        try:
            run = read_agenttrace(suite.parent / recording)
        except BundleError as exc:
            plan.problems.append(f"{where}: {exc}")
            continue
        if run.problem is not None:
            plan.problems.append(f"{where}: {run.path}: {run.problem}")
            continue
        bundle = bundles / f"{stem}{BUNDLE_SUFFIX}"
        plan.runs.append((run, bundle))
        entry: dict[str, Any] = {"name": name, "bundle": f"{BUNDLES_DIR}/{bundle.name}"}
        policy = _policy(case.get("policy"), where, plan)
        if policy:
            entry["policy"] = policy
        converted.append(entry)
    return converted


def plan_suite(source: Path, output: Path) -> tuple[dict[str, Any], _Plan]:
    """The sftrace suite for ``source`` and what to write; ``SuiteError`` naming every
    problem found."""
    raw = _read_suite(source)
    plan = _Plan()
    where = str(source)
    _unknown(raw, _SUITE_KEYS, where, plan)
    agent = raw.get("agent")
    if not isinstance(agent, str) or ":" not in agent:
        plan.problems.append(f"{where}: 'agent' must be a 'module:function' string, got {agent!r}")
    suite: dict[str, Any] = {"name": str(raw.get("name") or source.stem), "entrypoint": agent}
    # agenttrace-vcr imports the agent from the working directory.
    suite["pythonpath"] = [os.path.relpath(Path.cwd(), output.parent.resolve())]
    suite["match"] = "unordered"
    policy = _policy(raw.get("policy"), where, plan)
    overrides = policy.setdefault("severity_overrides", {})
    for code, severity in _DEFAULT_OVERRIDES.items():
        overrides.setdefault(code, severity)
    suite["policy"] = policy
    suite["cases"] = _cases(raw, source, output.parent / BUNDLES_DIR, plan)
    if plan.problems:
        count = len(plan.problems)
        raise SuiteError(
            f"cannot migrate {where} ({count} problem{'s' * (count > 1)}): "
            + "; ".join(plan.problems)
            + "; fix the suite (or its recordings) and run migrate-suite again",
            path=where,
        )
    return suite, plan


def migrate_suite(
    suite: str | os.PathLike[str], output: str | os.PathLike[str], *, overwrite: bool = False
) -> MigratedSuite:
    """Convert the agenttrace-vcr suite ``suite`` into the sftrace suite ``output``.

    Each case's recording becomes ``bundles/<case>.sftrace`` beside ``output``; the
    suite's ``agent`` becomes its ``entrypoint`` (the agent must now be instrumented
    with sftrace, under the same tool names), finding codes in policies become
    sftrace's (``CODE_MAP``). Raises ``SuiteError`` naming every unknown key or code
    and unreadable recording, and ``FileExistsError`` for an existing output without
    ``overwrite``; then nothing is written.
    """
    source, target = Path(suite), Path(output)
    table, plan = plan_suite(source, target)
    existing = [path for path in [target, *(path for _, path in plan.runs)] if path.exists()]
    if existing and not overwrite:
        raise SuiteError(
            f"{existing[0]} already exists; pass overwrite=True (--overwrite) to replace "
            f"the migrated suite and its bundles",
            path=str(existing[0]),
        )
    result = write_runs(plan.runs, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(suite_toml(table, source), encoding="utf-8")
    return MigratedSuite(
        path=target, bundles=[run.path for run in result.runs if run.path], notes=plan.notes
    )


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def suite_toml(suite: dict[str, Any], source: Path) -> str:
    """The suite as TOML text."""
    lines = [f"# Migrated from the agenttrace-vcr suite {source.name} by sftrace migrate-suite."]
    lines += [
        f"{key} = {_toml(suite[key])}" for key in ("name", "entrypoint", "pythonpath", "match")
    ]
    lines += ["", "[policy]"]
    lines += [f"{key} = {_toml(value)}" for key, value in suite["policy"].items()]
    for case in suite["cases"]:
        lines += [
            "",
            "[[cases]]",
            f"name = {_toml(case['name'])}",
            f"bundle = {_toml(case['bundle'])}",
        ]
        if case.get("policy"):
            lines += ["", "[cases.policy]"]
            lines += [f"{key} = {_toml(value)}" for key, value in case["policy"].items()]
    return "\n".join(lines) + "\n"
