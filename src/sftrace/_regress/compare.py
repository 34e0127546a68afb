"""Behavioural comparison of two runs: ``diff``, ``compare``, findings, policies, reports.

A run is a recorded bundle or a :class:`ReplayResult`. Calls are aligned by content (see
``_diff``); span ids, timestamps, durations, tokens and cost are never compared, nor the
per-run metadata of LLM responses (response and tool-call ids, timestamps, usage). Every
difference becomes a :class:`Finding` with a stable code and a severity; a
:class:`ComparisonPolicy` changes severities and names JSON paths to ignore (reported as
``info``). The verdict fails when any finding is an error.
"""

from __future__ import annotations

import difflib
import os
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError, TraceSerializationError
from sftrace._model.calls import Call, CallRef
from sftrace._model.display import repr_html
from sftrace._model.jsonpath import JsonPath, parse_paths, strip
from sftrace._model.serialize import to_json
from sftrace._model.text import first_line, pluralize, preview, shorten, show_pair, were
from sftrace._regress.diff import (
    Difference,
    align,
    content_key,
    value_differences,
)

if TYPE_CHECKING:
    from sftrace._regress.expectations import Expectations
    from sftrace._replay.run import ReplayResult

__all__ = [
    "AlignedCall",
    "CallRef",
    "ComparisonPolicy",
    "Finding",
    "FindingCode",
    "Report",
    "RunSummary",
    "Severity",
    "Verdict",
    "compare",
    "diff",
]


class FindingCode(StrEnum):
    """What kind of behaviour changed. The values are stable: use them in policies."""

    MISSING_CALL = "MISSING_CALL"
    UNEXPECTED_CALL = "UNEXPECTED_CALL"
    CALL_INPUT_CHANGED = "CALL_INPUT_CHANGED"
    CALL_INPUT_NORMALIZED = "CALL_INPUT_NORMALIZED"
    CALL_INPUT_RELAXED = "CALL_INPUT_RELAXED"
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "severity": self.severity.value,
            "message": self.message,
            "baseline_call": self.baseline_call.to_dict() if self.baseline_call else None,
            "candidate_call": self.candidate_call.to_dict() if self.candidate_call else None,
            "differences": [difference.to_dict() for difference in self.differences],
            "truncated": self.truncated,
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


# --- the runs compared -----------------------------------------------------------------


@dataclass
class _Run:
    label: str
    source: str
    calls: list[Call]
    status: str
    failure_type: str | None
    failure: str | None
    has_output: bool
    output: Any
    divergence: str | None = None
    # The index in ``calls`` of the call at which the replay diverged, and whether the
    # run ended there (the divergence is the run's error): what follows is its cascade.
    diverged_call: int | None = None
    ended_by_divergence: bool = False
    agent_version: str | None = None
    # For a replay: the seq of each replayed call matched at a non-exact tier -> the tier,
    # the seq of the recorded call it matched, and the input paths the tier ignored.
    tiers: dict[int, tuple[str, int, tuple[JsonPath, ...]]] = field(default_factory=dict)

    def summary(self) -> RunSummary:
        return RunSummary(
            self.label,
            self.source,
            self.status,
            len(self.calls),
            self.failure,
            self.has_output,
            self.agent_version,
        )


def replayed_output(result: ReplayResult) -> tuple[bool, Any]:
    """The output of a replayed run: what it passed to ``set_output``, else the
    entrypoint's return value (as JSON) when it returned one without raising."""
    if result.has_output:
        return True, result.output
    if result.error is None and result.return_value is not None:
        try:
            return True, to_json(result.return_value)
        except TraceSerializationError:
            return False, None
    return False, None


def as_run(value: Any, label: str) -> _Run:
    """Adapt a bundle, a bundle path or a ``ReplayResult`` to what comparison reads."""
    from sftrace._record.run import exception_type_name
    from sftrace._replay.run import ReplayResult

    if isinstance(value, str | os.PathLike):
        value = load_bundle(value)
    if isinstance(value, Bundle):
        failure = value.failure
        failure_type = failure.type if failure is not None and value.status == "failed" else None
        return _Run(
            label=label,
            source=str(value.path) if value.path is not None else value.agent_name,
            calls=list(value.calls),
            status=value.status,
            failure_type=failure_type,
            failure=f"{failure_type}: {first_line(failure.message or '', 160)}"
            if failure_type and failure
            else None,
            has_output=value.has_output,
            output=value.output,
            agent_version=value.manifest.agent_version,
        )
    if isinstance(value, ReplayResult):
        has_output, output = replayed_output(value)
        error = value.error
        failure_type = exception_type_name(error)[0] if error is not None else None
        source = value.bundle.path
        calls = list(value.calls)
        diverged_call = None
        if value.divergence is not None:
            diverged_type = exception_type_name(value.divergence)[0]
            diverged_call = next(
                (i for i, c in enumerate(calls) if c.error and c.error.type == diverged_type),
                None,
            )
        return _Run(
            label=label,
            source=f"replay of {source}" if source is not None else "replay",
            calls=calls,
            status="failed" if error is not None else "completed",
            failure_type=failure_type,
            failure=f"{failure_type}: {first_line(str(error))}" if error is not None else None,
            has_output=has_output,
            output=output,
            divergence=str(value.divergence) if value.divergence is not None else None,
            diverged_call=diverged_call,
            ended_by_divergence=error is not None and error is value.divergence,
            agent_version=value.agent_version,
            tiers=_tiers(value),
        )
    raise ConfigError(
        f"cannot compare {type(value).__qualname__} {value!r}: expected a Bundle, the path of "
        f"a .sftrace bundle, or a ReplayResult"
    )


def _tiers(result: ReplayResult) -> dict[int, tuple[str, int, tuple[JsonPath, ...]]]:
    tiers: dict[int, tuple[str, int, tuple[JsonPath, ...]]] = {}
    for matched in result.matched:
        if matched.tier in ("normalized", "relaxed"):
            recorded = matched.recorded
            ignored: tuple[JsonPath, ...] = ()
            if matched.tier == "relaxed":
                ignored = result.options.ignored_paths(
                    recorded.kind, recorded.name, recorded.provider
                )
            tiers[matched.number] = (matched.tier, recorded.seq, ignored)
    return tiers


# --- what is compared of a call ------------------------------------------------------

# Provider metadata that differs on every run of the same behaviour: response and
# tool-call ids, timestamps, usage (the cost). Never compared for LLM calls. The paths
# follow the request and response JSON of the OpenAI (chat and responses), Anthropic and
# LangChain integrations; streamed responses keep their events under "chunks".
_LLM_VOLATILE_OUTPUT: Final = tuple(
    JsonPath.parse(path)
    for path in (
        "id",
        "created",
        "created_at",
        "_request_id",
        "system_fingerprint",
        "service_tier",
        "usage",
        "usage_metadata",
        "response_metadata",
        "choices.*.message.tool_calls.*.id",
        "output.*.id",
        "output.*.call_id",
        "content.*.id",
        "tool_calls.*.id",
        "chunks.*.id",
        "chunks.*.created",
        "chunks.*.system_fingerprint",
        "chunks.*.service_tier",
        "chunks.*.usage",
        "chunks.*.usage_metadata",
        "chunks.*.response_metadata",
        "chunks.*.choices.*.delta.tool_calls.*.id",
        "chunks.*.message.id",
        "chunks.*.message.usage",
        "chunks.*.content_block.id",
        "chunks.*.response",
        "chunks.*.item.id",
        "chunks.*.item.call_id",
        "chunks.*.item_id",
        "chunks.*.tool_call_chunks.*.id",
        "chunks.*.tool_calls.*.id",
    )
)
_LLM_VOLATILE_INPUT: Final = tuple(
    JsonPath.parse(path)
    for path in (
        "messages.*.id",
        "messages.*.tool_calls.*.id",
        "messages.*.tool_call_id",
        "messages.*.content.*.id",
        "messages.*.content.*.tool_use_id",
        "input.*.id",
        "input.*.call_id",
    )
)


def compared_input(call: Call) -> Any:
    """The input as compared: for LLM calls, without per-run provider ids."""
    if call.kind == "llm":
        return strip(call.input, _LLM_VOLATILE_INPUT)
    return call.input


def compared_output(call: Call) -> Any:
    """The output as compared: for LLM calls, without ids, timestamps and usage."""
    if call.kind == "llm":
        return strip(call.output, _LLM_VOLATILE_OUTPUT)
    return call.output


# --- building findings -------------------------------------------------------------


class _Builder:
    def __init__(self, policy: ComparisonPolicy, labels: tuple[str, str]) -> None:
        self.policy = policy
        self.labels = labels
        self.findings: list[Finding] = []
        # Set by _calls when the candidate diverged: the calls at the divergence and how
        # their inputs differ, and how many recorded calls the stopped replay never reached.
        self.diverged: tuple[CallRef | None, CallRef | None, list[Difference], bool] | None = None
        self.not_reached = 0

    def add(
        self,
        code: FindingCode,
        message: str,
        *,
        baseline: CallRef | None = None,
        candidate: CallRef | None = None,
        severity: Severity | None = None,
    ) -> None:
        self.findings.append(
            Finding(code, severity or self.policy.severity(code), message, baseline, candidate)
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


def _name(ref: CallRef, other: CallRef | None, other_label: str) -> str:
    if other is None or other.number == ref.number:
        return str(ref)
    return f"{ref} ({other_label} call {other.number})"


def _calls(builder: _Builder, base: _Run, cand: _Run) -> tuple[list[AlignedCall], bool]:
    """Align the calls and add the call findings; return the alignment rows."""
    left_label, right_label = builder.labels
    patterns = builder.policy.patterns

    # A call a replay matched in the relaxed tier is aligned without the ignored paths.
    relaxed_left = {seq: ignored for _, seq, ignored in cand.tiers.values() if ignored}
    relaxed_right = {seq: tier[2] for seq, tier in cand.tiers.items() if tier[2]}

    def key(
        call: Call, relaxed: dict[int, tuple[JsonPath, ...]]
    ) -> tuple[str, str, str | None, str]:
        compared = strip(compared_input(call), (*patterns, *relaxed.get(call.seq, ())))
        return (call.kind, call.name, call.provider, content_key(compared))

    def identity(call: Call) -> tuple[str, str, str | None]:
        return (call.kind, call.name, call.provider)

    left, right = base.calls, cand.calls
    left_keys = [key(call, relaxed_left) for call in left]
    right_keys = [key(call, relaxed_right) for call in right]
    alignment = align(left_keys, right_keys)
    approximate = alignment.approximate
    # rows: (status, i, j) with i/j indexes or None, in display order
    rows: list[tuple[AlignmentStatus, int | None, int | None]] = []
    previous_i = previous_j = -1
    for i, j in [*alignment.pairs, (len(left), len(right))]:
        gap_left = list(range(previous_i + 1, i))
        gap_right = list(range(previous_j + 1, j))
        if gap_left and gap_right:
            inner = align(
                [identity(left[k]) for k in gap_left], [identity(right[k]) for k in gap_right]
            )
            approximate = approximate or inner.approximate
            pi = pj = 0
            for gi, gj in [*inner.pairs, (len(gap_left), len(gap_right))]:
                rows.extend(("missing", gap_left[k], None) for k in range(pi, gi))
                rows.extend(("unexpected", None, gap_right[k]) for k in range(pj, gj))
                if gi < len(gap_left):
                    rows.append(("changed", gap_left[gi], gap_right[gj]))
                pi, pj = gi + 1, gj + 1
        else:
            rows.extend(("missing", k, None) for k in gap_left)
            rows.extend(("unexpected", None, k) for k in gap_right)
        if i < len(left):
            rows.append(("same", i, j))
        previous_i, previous_j = i, j

    # A call missing at one place and unexpected at another, with the same content, moved.
    unexpected_by_key: dict[Any, deque[int]] = defaultdict(deque)
    for row_index, (status, _, right_index) in enumerate(rows):
        if status == "unexpected" and right_index is not None:
            unexpected_by_key[right_keys[right_index]].append(row_index)
    moved_rows: dict[int, int] = {}  # row of the missing call -> row of the unexpected one
    for row_index, (status, left_index, _) in enumerate(rows):
        if status == "missing" and left_index is not None:
            queue = unexpected_by_key.get(left_keys[left_index])
            if queue:
                moved_rows[row_index] = queue.popleft()
    dropped = set(moved_rows.values())
    # After a divergence that ended the run, the recorded calls not reached before it are
    # its consequence, not findings of their own.
    diverged = cand.diverged_call
    reached_upto = max(
        (i for _, i, j in rows if i is not None and j is not None and j < (diverged or 0)),
        default=-1,
    )

    aligned: list[AlignedCall] = []
    for row_index, (row_status, li, ri) in enumerate(rows):
        if row_index in dropped:
            continue
        status = row_status
        if row_index in moved_rows:
            ri = rows[moved_rows[row_index]][2]
            status = "moved"
        lref = CallRef.of(left[li], li + 1) if li is not None else None
        rref = CallRef.of(right[ri], ri + 1) if ri is not None else None
        before = len(builder.findings)
        if diverged is not None and _at_divergence(builder, cand, ri, li, reached_upto):
            if ri == diverged:
                builder.diverged = (lref, rref, *_input_differences(builder, left, right, li, ri))
            aligned.append(AlignedCall(status, lref, rref))
            continue
        if status == "missing" and lref is not None and li is not None:
            builder.add(
                FindingCode.MISSING_CALL,
                f"{lref} of the {left_label} run is not in the {right_label} run; "
                f"input {preview(left[li].input)}",
                baseline=lref,
            )
        elif status == "unexpected" and rref is not None and ri is not None:
            builder.add(
                FindingCode.UNEXPECTED_CALL,
                f"{rref} of the {right_label} run is not in the {left_label} run; "
                f"input {preview(right[ri].input)}",
                candidate=rref,
            )
        elif status == "moved" and lref is not None and rref is not None:
            builder.add(
                FindingCode.CALL_ORDER_CHANGED,
                f"{lref} moved: position {lref.position} in the {left_label} run, "
                f"{rref.position} in the {right_label} run",
                baseline=lref,
                candidate=rref,
            )
        if lref is not None and rref is not None and li is not None and ri is not None:
            _compare_pair(builder, left[li], right[ri], lref, rref, cand.tiers.get(right[ri].seq))
            if status == "same" and len(builder.findings) > before:
                status = "changed"
        aligned.append(AlignedCall(status, lref, rref))
    return aligned, approximate


def _at_divergence(
    builder: _Builder, cand: _Run, ri: int | None, li: int | None, reached_upto: int
) -> bool:
    """Whether an alignment row is the diverged call itself (its findings become the one
    REPLAY_DIVERGED finding) or a recorded call the stopped replay never reached."""
    if ri is not None:
        return ri == cand.diverged_call
    if cand.ended_by_divergence and li is not None and li > reached_upto:
        builder.not_reached += 1
        return True
    return False


def _input_differences(
    builder: _Builder, left: list[Call], right: list[Call], li: int | None, ri: int | None
) -> tuple[list[Difference], bool]:
    if li is None or ri is None:
        return [], False
    return value_differences(
        compared_input(left[li]), compared_input(right[ri]), ignore=builder.policy.patterns
    )


def _compare_pair(
    builder: _Builder,
    left: Call,
    right: Call,
    lref: CallRef,
    rref: CallRef,
    tier: tuple[str, int, tuple[JsonPath, ...]] | None = None,
) -> None:
    left_label, right_label = builder.labels
    named = _name(lref, rref, right_label)
    patterns = builder.policy.patterns
    if left.input_json != right.input_json:
        _compare_inputs(builder, left, right, lref, rref, tier)
    left_error, right_error = left.error, right.error
    if (left_error is None) != (right_error is None) or (
        left_error is not None
        and right_error is not None
        and (left_error.type, left_error.message.strip())
        != (right_error.type, right_error.message.strip())
    ):
        builder.add(
            FindingCode.CALL_ERROR_CHANGED,
            f"{named}: {_outcome(left)} in the {left_label} run, {_outcome(right)} in the "
            f"{right_label} run",
            baseline=lref,
            candidate=rref,
        )
        return
    if left.output_json != right.output_json:
        differences, truncated = value_differences(
            compared_output(left), compared_output(right), ignore=patterns
        )
        builder.add_paths(
            FindingCode.CALL_OUTPUT_CHANGED,
            f"{named}: output changed",
            differences,
            truncated,
            baseline=lref,
            candidate=rref,
        )


def _compare_inputs(
    builder: _Builder,
    left: Call,
    right: Call,
    lref: CallRef,
    rref: CallRef,
    tier: tuple[str, int, tuple[JsonPath, ...]] | None,
) -> None:
    """Input findings of a pair of calls; a replay's non-exact match tier is said as such."""
    named = _name(lref, rref, builder.labels[1])
    relaxed = tier[2] if tier is not None else ()
    differences, truncated = value_differences(
        compared_input(left), compared_input(right), ignore=(*builder.policy.patterns, *relaxed)
    )
    relaxed_names = {str(path) for path in relaxed}
    builder.add_paths(
        FindingCode.CALL_INPUT_CHANGED,
        f"{named}: input changed",
        [d for d in differences if d.ignored_by not in relaxed_names],
        truncated,
        baseline=lref,
        candidate=rref,
    )
    ignored = tuple(d for d in differences if d.ignored_by in relaxed_names)
    if ignored:
        builder.findings.append(
            Finding(
                FindingCode.CALL_INPUT_RELAXED,
                builder.policy.severity(FindingCode.CALL_INPUT_RELAXED),
                f"{named}: input matched the recording only with match_ignore paths ignored, "
                f"at {pluralize(len(ignored), 'path')}",
                lref,
                rref,
                ignored,
                truncated,
            )
        )
    if tier is not None and tier[0] == "normalized":
        builder.add(
            FindingCode.CALL_INPUT_NORMALIZED,
            f"{named}: input matched the recording after normalisation (surrounding "
            f"whitespace, 2.0 == 2, a None-valued key == a missing key)",
            baseline=lref,
            candidate=rref,
        )


def _outcome(call: Call) -> str:
    if call.error is None:
        return "returned normally"
    return f"raised {call.error.type}: {first_line(call.error.message, 160)}"


def _status(
    builder: _Builder,
    base_status: str,
    base_failure_type: str | None,
    base_failure: str | None,
    cand: _Run,
    base_label: str,
) -> None:
    _, right_label = builder.labels
    if cand.ended_by_divergence:
        return  # the run failed because the replay diverged: REPLAY_DIVERGED says so
    if base_status != cand.status:
        base_text = f"{base_status} ({base_failure})" if base_failure else base_status
        cand_text = f"{cand.status} ({cand.failure})" if cand.failure else cand.status
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run status changed: {base_label} {base_text}, {right_label} {cand_text}",
        )
    elif base_failure_type is not None and base_failure_type != cand.failure_type:
        builder.add(
            FindingCode.STATUS_CHANGED,
            f"run failure changed: {base_label} {base_failure}, {right_label} {cand.failure}",
        )


_OUTPUT_CODES: Final = {
    "structure": FindingCode.OUTPUT_STRUCTURE_CHANGED,
    "value": FindingCode.OUTPUT_VALUE_CHANGED,
    "text": FindingCode.OUTPUT_TEXT_CHANGED,
}
_OUTPUT_MESSAGES: Final = {
    "structure": "output structure changed",
    "value": "output value changed",
    "text": "output text changed",
}


def _output(builder: _Builder, baseline: Any, cand: _Run, base_label: str) -> None:
    _, right_label = builder.labels
    if not cand.has_output:
        if cand.ended_by_divergence:
            return  # no output because the replay diverged: REPLAY_DIVERGED says so
        ended = f"failed: {cand.failure}" if cand.failure else cand.status
        builder.add(
            FindingCode.OUTPUT_MISSING,
            f"the {right_label} run has no output ({ended}); {base_label} output "
            f"{preview(baseline)}",
        )
        return
    differences, truncated = value_differences(
        baseline, cand.output, ignore=builder.policy.patterns
    )
    for kind in ("structure", "value", "text"):
        group = [difference for difference in differences if difference.kind == kind]
        if group:
            builder.add_paths(_OUTPUT_CODES[kind], _OUTPUT_MESSAGES[kind], group, truncated)


def _divergence(builder: _Builder, cand: _Run, calls: _Builder) -> None:
    """One REPLAY_DIVERGED finding for the divergence and what it caused: the differing
    input paths of the diverged call, and the recorded calls never reached after it."""
    if not cand.divergence:
        return
    message = shorten(cand.divergence.strip().splitlines()[0], 400)
    if calls.not_reached:
        message += (
            f"; the replay stopped there, so {pluralize(calls.not_reached, 'later recorded call')}"
            f" {were(calls.not_reached)} not reached"
        )
    lref, rref, differences, truncated = calls.diverged or (None, None, [], False)
    code = FindingCode.REPLAY_DIVERGED
    builder.findings.append(
        Finding(
            code,
            builder.policy.severity(code),
            message,
            lref,
            rref,
            tuple(differences),
            truncated,
        )
    )


# --- entry points ------------------------------------------------------------------


def _report(
    baseline: Any,
    candidate: Any,
    policy: ComparisonPolicy | None,
    labels: tuple[str, str],
    expect: Expectations | None = None,
) -> Report:
    if policy is not None and not isinstance(policy, ComparisonPolicy):
        raise ConfigError(f"policy must be a ComparisonPolicy or None, got {policy!r}")
    policy = policy or DEFAULT_POLICY
    base, cand = as_run(baseline, labels[0]), as_run(candidate, labels[1])
    builder = _Builder(policy, labels)
    if expect is None:
        _status(builder, base.status, base.failure_type, base.failure, cand, labels[0])
        if base.has_output:
            _output(builder, base.output, cand, labels[0])
        rows, approximate = _calls(builder, base, cand)
        _divergence(builder, cand, builder)
        return Report(
            tuple(builder.findings),
            base.summary(),
            cand.summary(),
            tuple(rows),
            policy,
            False,
            cand.divergence,
            approximate,
        )
    from sftrace._regress.expectations import unmet_expectations

    expected_status = expect.status or "completed"
    _status(builder, expected_status, None, None, cand, "expected")
    if expect.has_output:
        _output(builder, expect.output, cand, "expected")
    for message, ref in unmet_expectations(cand.calls, expect):
        builder.add(FindingCode.EXPECTATION_FAILED, message, candidate=ref)
    # The difference from the recorded run is context here, not a verdict.
    context = _Builder(policy, labels)
    rows, approximate = _calls(context, base, cand)
    builder.findings.extend(
        Finding(
            f.code,
            Severity.INFO,
            f.message,
            f.baseline_call,
            f.candidate_call,
            f.differences,
            f.truncated,
        )
        for f in context.findings
    )
    _divergence(builder, cand, context)
    return Report(
        tuple(builder.findings),
        base.summary(),
        cand.summary(),
        tuple(rows),
        policy,
        True,
        cand.divergence,
        approximate,
    )


def expected_output_report(
    result: ReplayResult | Bundle, expected: Any, policy: ComparisonPolicy | None = None
) -> Report:
    """Only the output of ``result`` judged against ``expected`` (``assert_output``)."""
    policy = policy or DEFAULT_POLICY
    run = as_run(result, "replayed")
    builder = _Builder(policy, ("expected", run.label))
    _output(builder, expected, run, "expected")
    expected_run = _Run("expected", "output", [], "completed", None, None, True, expected)
    return Report(
        tuple(builder.findings),
        expected_run.summary(),
        run.summary(),
        policy=policy,
        expected=True,
    )


def diff(
    baseline: Bundle | ReplayResult | str | os.PathLike[str],
    candidate: Bundle | ReplayResult | str | os.PathLike[str],
    *,
    policy: ComparisonPolicy | None = None,
) -> Report:
    """Compare two runs (bundles, bundle paths, or a bundle and a ``ReplayResult``).

    Calls are aligned by content, so an inserted call shows as one ``UNEXPECTED_CALL``;
    findings name each call and the JSON paths that differ. ``report.verdict`` is
    ``"fail"`` when any finding is an error under ``policy``.
    """
    return _report(baseline, candidate, policy, ("baseline", "candidate"))


def compare(
    recorded: Bundle | str | os.PathLike[str],
    replayed: ReplayResult | Bundle | str | os.PathLike[str],
    policy: ComparisonPolicy | None = None,
    *,
    expect: Expectations | None = None,
) -> Report:
    """Judge a replay against the recorded run it replayed.

    Without ``expect`` the recorded run is the reference: any behaviour change is a
    finding. With ``expect`` (the corrected behaviour) the expectations are the
    reference: the replay must reach the expected status (``"completed"`` unless stated)
    and output and meet the trajectory expectations; how it differs from the recording
    is reported as ``info``. A replay that diverged (reached a call the recording cannot
    answer) is a ``REPLAY_DIVERGED`` error either way.
    """
    return _report(recorded, replayed, policy, ("recorded", "replayed"), expect)
