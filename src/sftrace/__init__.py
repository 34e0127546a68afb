"""sftrace: record AI agent runs as OpenTelemetry spans, replay them as offline tests.

::

    from sftrace import record, replay_run, trace_tool

    @trace_tool
    def search_flights(destination: str) -> dict: ...

    with record("booking-agent", output="failure.sftrace") as session:
        session.set_output(agent.run("Book the cheapest flight to Lisbon"))

    result = replay_run("failure.sftrace", "my_agent:run")
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__

if _typing.TYPE_CHECKING:
    from ._bundle import (
        Bundle,
        Call,
        CallFailure,
        Manifest,
        StateChange,
        load_bundle,
        validate_bundle,
    )
    from ._compare import (
        ComparisonPolicy,
        Finding,
        FindingCode,
        Report,
        Severity,
        Verdict,
        compare,
        diff,
    )
    from ._config import configure
    from ._errors import (
        BundleError,
        ConfigError,
        IncompleteReplayError,
        RecordedDependencyError,
        ReplayError,
        ReplayExhaustedError,
        ReplayMismatchError,
        ReplayPolicyError,
        SftraceError,
        SuiteError,
        TraceSerializationError,
    )
    from ._expectations import ArgumentsExpectation, Expectations, load_expectations
    from ._exporter import BundleSpanExporter
    from ._interchange import (
        ImportedRun,
        ImportResult,
        PushResult,
        import_otlp_files,
        push_bundles,
    )
    from ._llm import LLMCallHandle, allm_request, llm_request
    from ._policy import MatchMode, ReplayMode, ReplayPolicy
    from ._record import RecordingSession, record
    from ._recover import recover_bundle
    from ._redaction import Redaction, Redactor
    from ._replay import ReplaySession, replay
    from ._replay_controller import MatchedCall
    from ._replay_processor import ReplaySpanProcessor
    from ._replay_run import ReplayResult, areplay_run, replay_run
    from ._suite import CaseResult, Suite, SuiteCase, load_suite
    from ._tool import trace_tool

# Public name -> the private module defining it. Each module is imported on first use,
# so ``import sftrace`` stays cheap (pytest imports the sftrace plugin in every session).
# Add a public name here, in the TYPE_CHECKING imports above, and in __all__ below.
_LAZY: dict[str, str] = {
    "Bundle": "_bundle",
    "Call": "_bundle",
    "CallFailure": "_bundle",
    "Manifest": "_bundle",
    "StateChange": "_bundle",
    "load_bundle": "_bundle",
    "validate_bundle": "_bundle",
    "ComparisonPolicy": "_compare",
    "Finding": "_compare",
    "FindingCode": "_compare",
    "Report": "_compare",
    "Severity": "_compare",
    "Verdict": "_compare",
    "compare": "_compare",
    "diff": "_compare",
    "configure": "_config",
    "BundleError": "_errors",
    "ConfigError": "_errors",
    "IncompleteReplayError": "_errors",
    "RecordedDependencyError": "_errors",
    "ReplayError": "_errors",
    "ReplayExhaustedError": "_errors",
    "ReplayMismatchError": "_errors",
    "ReplayPolicyError": "_errors",
    "SftraceError": "_errors",
    "SuiteError": "_errors",
    "TraceSerializationError": "_errors",
    "ArgumentsExpectation": "_expectations",
    "Expectations": "_expectations",
    "load_expectations": "_expectations",
    "BundleSpanExporter": "_exporter",
    "ImportResult": "_interchange",
    "ImportedRun": "_interchange",
    "PushResult": "_interchange",
    "import_otlp_files": "_interchange",
    "push_bundles": "_interchange",
    "LLMCallHandle": "_llm",
    "allm_request": "_llm",
    "llm_request": "_llm",
    "MatchMode": "_policy",
    "ReplayMode": "_policy",
    "ReplayPolicy": "_policy",
    "RecordingSession": "_record",
    "record": "_record",
    "recover_bundle": "_recover",
    "Redaction": "_redaction",
    "Redactor": "_redaction",
    "ReplaySession": "_replay",
    "replay": "_replay",
    "MatchedCall": "_replay_controller",
    "ReplaySpanProcessor": "_replay_processor",
    "ReplayResult": "_replay_run",
    "areplay_run": "_replay_run",
    "replay_run": "_replay_run",
    "CaseResult": "_suite",
    "Suite": "_suite",
    "SuiteCase": "_suite",
    "load_suite": "_suite",
    "trace_tool": "_tool",
}

__all__ = [
    "ArgumentsExpectation",
    "Bundle",
    "BundleError",
    "BundleSpanExporter",
    "Call",
    "CallFailure",
    "CaseResult",
    "ComparisonPolicy",
    "ConfigError",
    "Expectations",
    "Finding",
    "FindingCode",
    "ImportResult",
    "ImportedRun",
    "IncompleteReplayError",
    "LLMCallHandle",
    "Manifest",
    "MatchMode",
    "MatchedCall",
    "PushResult",
    "RecordedDependencyError",
    "RecordingSession",
    "Redaction",
    "Redactor",
    "ReplayError",
    "ReplayExhaustedError",
    "ReplayMismatchError",
    "ReplayMode",
    "ReplayPolicy",
    "ReplayPolicyError",
    "ReplayResult",
    "ReplaySession",
    "ReplaySpanProcessor",
    "Report",
    "Severity",
    "SftraceError",
    "StateChange",
    "Suite",
    "SuiteCase",
    "SuiteError",
    "TraceSerializationError",
    "Verdict",
    "__version__",
    "allm_request",
    "areplay_run",
    "compare",
    "configure",
    "diff",
    "import_otlp_files",
    "llm_request",
    "load_bundle",
    "load_expectations",
    "load_suite",
    "push_bundles",
    "record",
    "recover_bundle",
    "replay",
    "replay_run",
    "trace_tool",
    "validate_bundle",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sftrace' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
