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

import sftrace._model.display as _display
from sftrace._version import __version__

if _typing.TYPE_CHECKING:
    from sftrace._bundle.load import load_bundle
    from sftrace._bundle.manifest import Manifest
    from sftrace._bundle.reader import Bundle, validate_bundle
    from sftrace._bundle.recover import recover_bundle
    from sftrace._errors import (
        BackendError,
        BundleError,
        ConfigError,
        ForkPointError,
        IncompleteReplayError,
        RecordedDependencyError,
        RecordedInterruption,
        RecordingEndedError,
        ReplayError,
        ReplayExhaustedError,
        ReplayMismatchError,
        ReplayPolicyError,
        SftraceError,
        SuiteError,
        TraceSerializationError,
        UnrecordedResultError,
    )
    from sftrace._export.bundle_exporter import BundleSpanExporter
    from sftrace._export.collector_import import ImportedRun, ImportResult, import_otlp_files
    from sftrace._export.phoenix_import import import_from_phoenix
    from sftrace._export.push import PushResult, push_bundles
    from sftrace._model.calls import Call, CallFailure, StateChange
    from sftrace._model.policy import MatchMode, ReplayMode, ReplayPolicy
    from sftrace._record.config import configure
    from sftrace._record.llm import LLMCallHandle, allm_request, llm_request
    from sftrace._record.redaction import Redaction, Redactor
    from sftrace._record.session import RecordingSession, record
    from sftrace._record.tool import trace_tool
    from sftrace._regress.compare import compare, diff
    from sftrace._regress.expectations import ArgumentsExpectation, Expectations, load_expectations
    from sftrace._regress.findings import (
        ComparisonPolicy,
        Finding,
        FindingCode,
        Report,
        Severity,
        Verdict,
    )
    from sftrace._regress.migrate_suite import MigratedSuite, migrate_suite
    from sftrace._regress.minimize import MinimizeProgress, MinimizeResult, aminimize, minimize
    from sftrace._regress.peers import import_peer_runs
    from sftrace._regress.replay_compare import replay_and_compare
    from sftrace._regress.suite import CaseResult, Suite, SuiteCase, load_suite
    from sftrace._replay.controller import MatchedCall
    from sftrace._replay.fork import afork, fork
    from sftrace._replay.processor import ReplaySpanProcessor
    from sftrace._replay.run import ReplayResult, areplay_run, replay_run
    from sftrace._replay.session import ReplaySession, replay
    from sftrace._view.render import render_html

# Public name -> the private module defining it. Each module is imported on first use,
# so ``import sftrace`` stays cheap (pytest imports the sftrace plugin in every session).
# Add a public name here, in the TYPE_CHECKING imports above, and in __all__ below.
_LAZY: dict[str, str] = {
    "Bundle": "_bundle.reader",
    "Call": "_model.calls",
    "CallFailure": "_model.calls",
    "Manifest": "_bundle.manifest",
    "StateChange": "_model.calls",
    "load_bundle": "_bundle.load",
    "validate_bundle": "_bundle.reader",
    "ComparisonPolicy": "_regress.findings",
    "Finding": "_regress.findings",
    "FindingCode": "_regress.findings",
    "Report": "_regress.findings",
    "Severity": "_regress.findings",
    "Verdict": "_regress.findings",
    "compare": "_regress.compare",
    "diff": "_regress.compare",
    "configure": "_record.config",
    "BackendError": "_errors",
    "BundleError": "_errors",
    "ConfigError": "_errors",
    "ForkPointError": "_errors",
    "IncompleteReplayError": "_errors",
    "RecordedDependencyError": "_errors",
    "RecordedInterruption": "_errors",
    "RecordingEndedError": "_errors",
    "ReplayError": "_errors",
    "ReplayExhaustedError": "_errors",
    "ReplayMismatchError": "_errors",
    "ReplayPolicyError": "_errors",
    "SftraceError": "_errors",
    "SuiteError": "_errors",
    "TraceSerializationError": "_errors",
    "UnrecordedResultError": "_errors",
    "ArgumentsExpectation": "_regress.expectations",
    "Expectations": "_regress.expectations",
    "load_expectations": "_regress.expectations",
    "MigratedSuite": "_regress.migrate_suite",
    "migrate_suite": "_regress.migrate_suite",
    "MinimizeProgress": "_regress.minimize",
    "MinimizeResult": "_regress.minimize",
    "aminimize": "_regress.minimize",
    "minimize": "_regress.minimize",
    "import_peer_runs": "_regress.peers",
    "replay_and_compare": "_regress.replay_compare",
    "BundleSpanExporter": "_export.bundle_exporter",
    "ImportResult": "_export.collector_import",
    "ImportedRun": "_export.collector_import",
    "PushResult": "_export.push",
    "import_from_phoenix": "_export.phoenix_import",
    "import_otlp_files": "_export.collector_import",
    "push_bundles": "_export.push",
    "LLMCallHandle": "_record.llm",
    "allm_request": "_record.llm",
    "llm_request": "_record.llm",
    "MatchMode": "_model.policy",
    "ReplayMode": "_model.policy",
    "ReplayPolicy": "_model.policy",
    "RecordingSession": "_record.session",
    "record": "_record.session",
    "recover_bundle": "_bundle.recover",
    "Redaction": "_record.redaction",
    "Redactor": "_record.redaction",
    "ReplaySession": "_replay.session",
    "replay": "_replay.session",
    "MatchedCall": "_replay.controller",
    "afork": "_replay.fork",
    "fork": "_replay.fork",
    "ReplaySpanProcessor": "_replay.processor",
    "ReplayResult": "_replay.run",
    "areplay_run": "_replay.run",
    "replay_run": "_replay.run",
    "CaseResult": "_regress.suite",
    "Suite": "_regress.suite",
    "SuiteCase": "_regress.suite",
    "load_suite": "_regress.suite",
    "trace_tool": "_record.tool",
    "render_html": "_view.render",
}

__all__ = [
    "ArgumentsExpectation",
    "BackendError",
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
    "ForkPointError",
    "ImportResult",
    "ImportedRun",
    "IncompleteReplayError",
    "LLMCallHandle",
    "Manifest",
    "MatchMode",
    "MatchedCall",
    "MigratedSuite",
    "MinimizeProgress",
    "MinimizeResult",
    "PushResult",
    "RecordedDependencyError",
    "RecordedInterruption",
    "RecordingEndedError",
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
    "UnrecordedResultError",
    "Verdict",
    "__version__",
    "afork",
    "allm_request",
    "aminimize",
    "areplay_run",
    "compare",
    "configure",
    "diff",
    "fork",
    "import_from_phoenix",
    "import_otlp_files",
    "import_peer_runs",
    "llm_request",
    "load_bundle",
    "load_expectations",
    "load_suite",
    "migrate_suite",
    "minimize",
    "push_bundles",
    "record",
    "recover_bundle",
    "render_html",
    "replay",
    "replay_and_compare",
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


def _notebook_html(value: _typing.Any) -> str:
    # Bundle, ReplayResult and Report display in notebooks through this hook; the view
    # layer is imported on first use only.
    html: str = _importlib.import_module(f"{__name__}._view.render").notebook_html(value)
    return html


_display.register_html_renderer(_notebook_html)


def __dir__() -> list[str]:
    # Exactly the public names (loaded or not) and the module's own dunders: no helper
    # (``_LAZY``, ``_importlib``) and no submodule that happens to be imported.
    dunders = {name for name in globals() if name.startswith("__") and name.endswith("__")}
    return sorted(dunders | set(__all__))
