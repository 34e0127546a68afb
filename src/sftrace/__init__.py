"""sftrace: record AI agent runs as OpenTelemetry spans, replay them as offline tests.

::

    from sftrace import record, replay_run, trace_tool

    @trace_tool
    def search_flights(destination: str) -> dict: ...

    with record("booking-agent", output="failure.sftrace") as session:
        session.set_output(agent.run("Book the cheapest flight to Lisbon"))

    result = replay_run("failure.sftrace", "my_agent:run")
"""

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
    TraceSerializationError,
)
from ._expectations import ArgumentsExpectation, Expectations, load_expectations
from ._exporter import BundleSpanExporter
from ._llm import LLMCallHandle, allm_request, llm_request
from ._policy import MatchMode, ReplayMode, ReplayPolicy
from ._record import RecordingSession, record
from ._redaction import Redaction, Redactor
from ._replay import ReplaySession, replay
from ._replay_controller import MatchedCall
from ._replay_processor import ReplaySpanProcessor
from ._replay_run import ReplayResult, areplay_run, replay_run
from ._tool import trace_tool
from ._version import __version__

__all__ = [
    "ArgumentsExpectation",
    "Bundle",
    "BundleError",
    "BundleSpanExporter",
    "Call",
    "CallFailure",
    "ComparisonPolicy",
    "ConfigError",
    "Expectations",
    "Finding",
    "FindingCode",
    "IncompleteReplayError",
    "LLMCallHandle",
    "Manifest",
    "MatchMode",
    "MatchedCall",
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
    "TraceSerializationError",
    "Verdict",
    "__version__",
    "allm_request",
    "areplay_run",
    "compare",
    "configure",
    "diff",
    "llm_request",
    "load_bundle",
    "load_expectations",
    "record",
    "replay",
    "replay_run",
    "trace_tool",
    "validate_bundle",
]
