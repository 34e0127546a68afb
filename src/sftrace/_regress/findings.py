"""What a comparison finds: codes, severities, the policy that judges them, and the report.

A :class:`Finding` has a stable :class:`FindingCode` and a :class:`Severity`; a
:class:`ComparisonPolicy` changes severities and names JSON paths to ignore (reported as
``info``); a :class:`Report` holds the findings, the call alignment and the verdict (it
fails when any finding is an error); a :class:`FindingBuilder` collects the findings of
one comparison. What is compared is in ``compare`` and ``call_findings``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Literal

import orjson

from sftrace._errors import ConfigError
from sftrace._model.calls import CallRef
from sftrace._model.display import repr_html
from sftrace._model.jsonpath import JsonPath, parse_paths
from sftrace._model.text import pluralize, show_pair
from sftrace._regress.diff import Difference

__all__ = [
    "DEFAULT_POLICY",
    "AlignedCall",
    "AlignmentStatus",
    "ComparisonPolicy",
    "Finding",
    "FindingBuilder",
    "FindingCode",
    "Report",
    "RunSummary",
    "Severity",
    "Verdict",
    "parse_code",
    "parse_severity",
]


class FindingCode(StrEnum):
    """What kind of behaviour changed. The values are stable: use them in policies."""

    MISSING_CALL = "MISSING_CALL"
    UNEXPECTED_CALL = "UNEXPECTED_CALL"
    CALL_INPUT_CHANGED = "CALL_INPUT_CHANGED"
    CALL_INPUT_NORMALIZED = "CALL_INPUT_NORMALIZED"
    CALL_INPUT_RELAXED = "CALL_INPUT_RELAXED"
    CALL_ADDED_LIVE = "CALL_ADDED_LIVE"
    CALL_OUTPUT_CHANGED = "CALL_OUTPUT_CHANGED"
    CALL_ORDER_CHANGED = "CALL_ORDER_CHANGED"
    CALL_ERROR_CHANGED = "CALL_ERROR_CHANGED"
    STATUS_CHANGED = "STATUS_CHANGED"
    OUTPUT_STRUCTURE_CHANGED = "OUTPUT_STRUCTURE_CHANGED"
    OUTPUT_VALUE_CHANGED = "OUTPUT_VALUE_CHANGED"
    OUTPUT_TEXT_CHANGED = "OUTPUT_TEXT_CHANGED"
    OUTPUT_MISSING = "OUTPUT_MISSING"
    REPLAY_DIVERGED = "REPLAY_DIVERGED"
    EXPECTATION_FAILED = "EXPECTATION_FAILED"
    EXPECTATION_UNKNOWN_NAME = "EXPECTATION_UNKNOWN_NAME"


class Severity(StrEnum):
    """How much a finding matters: any ``error`` fails the verdict."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"


DEFAULT_SEVERITIES: Final[Mapping[FindingCode, Severity]] = MappingProxyType(
    {
        **{code: Severity.ERROR for code in FindingCode},
        # The wording of natural-language answers varies from run to run.
        FindingCode.OUTPUT_TEXT_CHANGED: Severity.WARNING,
        # A replay matched a call only after normalising its input, or ignoring the
        # match_ignore paths: said, not failed (a policy can make them errors).
        FindingCode.CALL_INPUT_NORMALIZED: Severity.INFO,
        FindingCode.CALL_INPUT_RELAXED: Severity.WARNING,
        # A replay with on_miss="live" ran a call the recording has no counterpart for.
        FindingCode.CALL_ADDED_LIVE: Severity.INFO,
        # An expectation names a call neither run made: a typo, or a tool renamed since
        # (a never-called tool named on purpose is fine: said, not failed).
        FindingCode.EXPECTATION_UNKNOWN_NAME: Severity.WARNING,
    }
)

_SEVERITY_ORDER: Final = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
# Findings listed in full by ``Report.format``; the rest are counted.
_FORMAT_LIMIT: Final = 50


def _parse_choice(value: Any, kind: type[FindingCode] | type[Severity], what: str) -> Any:
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        choices = [member.value for member in kind]
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = ", ".join(repr(choice) for choice in choices)
        raise ConfigError(f"unknown {what} {value!r}{hint}; expected one of {listed}") from None


def parse_code(value: Any) -> FindingCode:
    """The finding code named by ``value``; ``ConfigError`` (a ``ValueError``) if unknown."""
    code: FindingCode = _parse_choice(value, FindingCode, "finding code")
    return code


def parse_severity(value: Any) -> Severity:
    """The severity named by ``value``; ``ConfigError`` (a ``ValueError``) if unknown."""
    severity: Severity = _parse_choice(value, Severity, "severity")
    return severity


# --- policy ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ComparisonPolicy:
    """How findings are judged.

    ``severity_overrides`` maps finding codes to ``"error"``, ``"warning"`` or ``"info"``;
    ``ignore_paths`` names JSON paths (``"reply.generated_at"``, ``"items.*.id"``) whose
    differences are reported as ``info`` instead of their code's severity. Ignore paths
    apply to every compared JSON value: the run's output and each call's input and
    output. ``ignore_paths`` holds them in canonical form (``"$.reply.generated_at"``).
    Unknown codes, severities or malformed paths raise ``ConfigError`` (a ``ValueError``)
    here, when the policy is built.
    """

    severity_overrides: Mapping[FindingCode | str, Severity | str] = field(default_factory=dict)
    ignore_paths: Sequence[str] = ()
    patterns: tuple[JsonPath, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw = self.severity_overrides
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"severity_overrides must be a mapping of finding code to severity, got {raw!r}"
            )
        overrides = {parse_code(code): parse_severity(level) for code, level in raw.items()}
        paths = self.ignore_paths
        if isinstance(paths, str) or not isinstance(paths, Iterable):
            raise ConfigError(
                f"ignore_paths must be a list of path strings, got {paths!r}; write "
                f"ignore_paths=[{paths!r}] for one path"
            )
        patterns = tuple(
            {str(p): p for p in parse_paths(tuple(paths), what="ignore path")}.values()
        )
        object.__setattr__(
            self, "severity_overrides", MappingProxyType(dict(sorted(overrides.items())))
        )
        object.__setattr__(self, "ignore_paths", tuple(str(pattern) for pattern in patterns))
        object.__setattr__(self, "patterns", patterns)

    def severity(self, code: FindingCode) -> Severity:
        """The severity of ``code`` under this policy."""
        level = self.severity_overrides.get(code)
        return DEFAULT_SEVERITIES[code] if level is None else parse_severity(level)

    def extend(self, other: ComparisonPolicy | None) -> ComparisonPolicy:
        """This policy with ``other`` on top: its overrides win, its ignore paths add."""
        if other is None:
            return self
        return ComparisonPolicy(
            severity_overrides={**self.severity_overrides, **other.severity_overrides},
            ignore_paths=(*self.ignore_paths, *other.ignore_paths),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity_overrides": {
                str(code): str(level) for code, level in self.severity_overrides.items()
            },
            "ignore_paths": list(self.ignore_paths),
        }


DEFAULT_POLICY: Final = ComparisonPolicy()


# --- findings ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One behavioural difference: a stable ``code``, a ``severity``, a readable
    ``message``, the call(s) concerned and the JSON paths that differ, with both values."""

    code: FindingCode
    severity: Severity
    message: str
    baseline_call: CallRef | None = None
    candidate_call: CallRef | None = None
    differences: tuple[Difference, ...] = ()
    truncated: bool = False
    # The whole input of the call a MISSING_CALL or UNEXPECTED_CALL finding names (JSON
    # text): the message shows a preview of it.
    input_json: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "severity": self.severity.value,
            "message": self.message,
            "baseline_call": self.baseline_call.to_dict() if self.baseline_call else None,
            "candidate_call": self.candidate_call.to_dict() if self.candidate_call else None,
            "differences": [difference.to_dict() for difference in self.differences],
            "truncated": self.truncated,
            "input": None if self.input_json is None else orjson.loads(self.input_json),
        }


AlignmentStatus = Literal["same", "changed", "missing", "unexpected", "moved"]


@dataclass(frozen=True, slots=True)
class AlignedCall:
    """One row of the alignment: a baseline call, a candidate call, or a pair."""

    status: AlignmentStatus
    baseline: CallRef | None
    candidate: CallRef | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "baseline": self.baseline.number if self.baseline else None,
            "candidate": self.candidate.number if self.candidate else None,
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a report says about each run."""

    label: str
    source: str
    status: str
    calls: int
    failure: str | None
    has_output: bool
    agent_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "source": self.source,
            "status": self.status,
            "calls": self.calls,
            "failure": self.failure,
            "has_output": self.has_output,
            "agent_version": self.agent_version,
        }


@dataclass(frozen=True)
class Report:
    """The judgement of a comparison: ``verdict``, ``findings``, ``counts``.

    ``format()`` gives the readable text (errors first, then the first divergence);
    ``to_dict()`` a JSON-ready dict with a stable key order.
    """

    findings: tuple[Finding, ...]
    baseline: RunSummary
    candidate: RunSummary
    alignment: tuple[AlignedCall, ...] = ()
    policy: ComparisonPolicy = DEFAULT_POLICY
    expected: bool = False
    divergence: str | None = None
    approximate: bool = False

    @property
    def verdict(self) -> Verdict:
        failed = any(finding.severity is Severity.ERROR for finding in self.findings)
        return Verdict.FAIL if failed else Verdict.PASS

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def counts(self) -> dict[str, int]:
        """Findings per severity: ``{"error": n, "warning": n, "info": n}``."""
        counts = {severity.value: 0 for severity in Severity}
        for finding in self.findings:
            counts[finding.severity.value] += 1
        return counts

    @property
    def counts_by_code(self) -> dict[str, int]:
        """Findings per code, for the codes found: ``{"MISSING_CALL": 1, ...}``
        (sorted by code)."""
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.code.value] = counts.get(finding.code.value, 0) + 1
        return dict(sorted(counts.items()))

    def counts_text(self) -> str:
        """The error and warning counts in words: ``1 error, 1 warning``."""
        counts = self.counts
        return f"{pluralize(counts['error'], 'error')}, {pluralize(counts['warning'], 'warning')}"

    def by_severity(self, severity: Severity | str) -> list[Finding]:
        wanted = parse_severity(severity)
        return [finding for finding in self.findings if finding.severity is wanted]

    def summary(self) -> str:
        counts = self.counts
        return f"{self.verdict.value.upper()}: {self.counts_text()}, {counts['info']} info"

    def format(self, *, include_info: bool = True) -> str:
        """The readable report: a summary line, the findings (errors first), then the
        first divergence of the replay, if any."""
        if self.expected:
            what = f"{self.candidate.source} vs expectations"
        else:
            what = (
                f"{self.baseline.label}: {self.baseline.source}; "
                f"{self.candidate.label}: {self.candidate.source}"
            )
        lines = [f"{self.summary()} ({what})"]
        versions = self.versions_line()
        if versions:
            lines.append(versions)
        shown = sorted(
            (f for f in self.findings if include_info or f.severity is not Severity.INFO),
            key=lambda finding: _SEVERITY_ORDER[finding.severity],
        )
        for finding in shown[:_FORMAT_LIMIT]:
            lines.append(f"  {finding.severity.value:<7} {finding.code.value}: {finding.message}")
            lines.extend(f"      {line}" for line in self.difference_lines(finding))
        if len(shown) > _FORMAT_LIMIT:
            lines.append(f"  ... and {pluralize(len(shown) - _FORMAT_LIMIT, 'more finding')}")
        if self.approximate:
            lines.append(
                "  note: the runs differ in too many calls for an exact alignment; calls "
                "were matched greedily"
            )
        if self.divergence:
            lines.append("first divergence:")
            lines.extend(f"  {line}" for line in self.divergence.splitlines())
        return "\n".join(lines)

    def versions_line(self) -> str | None:
        """``agent version: recorded 1.0, replayed 1.1`` when a run has a version."""
        baseline, candidate = self.baseline, self.candidate
        if baseline.agent_version is None and candidate.agent_version is None:
            return None
        return (
            f"  agent version: {baseline.label} {baseline.agent_version or '(none)'}, "
            f"{candidate.label} {candidate.agent_version or '(none)'}"
        )

    def difference_lines(self, finding: Finding) -> list[str]:
        """The finding's differing paths with both values, one line each
        (``$.a: recorded 1, replayed 2``); two long strings show where they differ and
        two multi-line texts a line diff, on indented lines below their path."""
        labels = _labels(self, finding)
        lines: list[str] = []
        for difference in finding.differences:
            ignored = f"  (ignored: {difference.ignored_by})" if difference.ignored_by else ""
            first, *more = show_pair(difference.baseline, difference.candidate, labels=labels)
            lines.append(f"{difference.path}: {first}{ignored}")
            lines.extend(f"    {line}" for line in more)
        if finding.truncated:
            lines.append("... more paths differ")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "counts": self.counts,
            "counts_by_code": self.counts_by_code,
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "expected": self.expected,
            "policy": self.policy.to_dict(),
            "findings": [finding.to_dict() for finding in self.findings],
            "alignment": [row.to_dict() for row in self.alignment],
            "approximate_alignment": self.approximate,
            "divergence": self.divergence,
        }

    def __str__(self) -> str:
        return self.format()

    def _repr_html_(self) -> str | None:
        """In a notebook, the report as HTML (see ``sftrace.render_html``)."""
        return repr_html(self)


class FindingBuilder:
    """Collects the findings of one comparison, each with the severity ``policy`` gives its
    code; ``labels`` name the two runs (``("recorded", "replayed")``)."""

    def __init__(self, policy: ComparisonPolicy, labels: tuple[str, str]) -> None:
        self.policy = policy
        self.labels = labels
        self.findings: list[Finding] = []
        # Set by _calls when the candidate diverged: the calls at the divergence and how
        # their inputs differ, and how many recorded calls the stopped replay never reached.
        self.diverged: tuple[CallRef | None, CallRef | None, list[Difference], bool] | None = None
        self.not_reached = 0
        # calls reached after a divergence that ended the run, differing as its consequence
        self.after_divergence = 0

    def add(
        self,
        code: FindingCode,
        message: str,
        *,
        baseline: CallRef | None = None,
        candidate: CallRef | None = None,
        severity: Severity | None = None,
        input_json: str | None = None,
    ) -> None:
        self.findings.append(
            Finding(
                code,
                severity or self.policy.severity(code),
                message,
                baseline,
                candidate,
                input_json=input_json,
            )
        )

    def add_paths(
        self,
        code: FindingCode,
        message: str,
        differences: Sequence[Difference],
        truncated: bool,
        *,
        baseline: CallRef | None = None,
        candidate: CallRef | None = None,
    ) -> None:
        """A finding for the differences not ignored, and an ``info`` one for the rest."""
        active = tuple(d for d in differences if d.ignored_by is None)
        ignored = tuple(d for d in differences if d.ignored_by is not None)
        if active:
            self.findings.append(
                Finding(
                    code,
                    self.policy.severity(code),
                    f"{message} at {pluralize(len(active), 'path')}",
                    baseline,
                    candidate,
                    active,
                    truncated,
                )
            )
        if ignored:
            self.findings.append(
                Finding(
                    code,
                    Severity.INFO,
                    f"{message} at {pluralize(len(ignored), 'ignored path')}",
                    baseline,
                    candidate,
                    ignored,
                    truncated and not active,
                )
            )


def _labels(report: Report, finding: Finding) -> tuple[str, str]:
    expected_codes = (
        FindingCode.STATUS_CHANGED,
        FindingCode.OUTPUT_MISSING,
        FindingCode.OUTPUT_STRUCTURE_CHANGED,
        FindingCode.OUTPUT_VALUE_CHANGED,
        FindingCode.OUTPUT_TEXT_CHANGED,
    )
    if report.expected and finding.code in expected_codes:
        return "expected", report.candidate.label
    return report.baseline.label, report.candidate.label
