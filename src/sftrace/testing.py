"""Helpers for testing agents (and sftrace itself) with sftrace.

Assertions on a replayed run (a ``ReplayResult``; a recorded ``Bundle`` works too), each
raising ``AssertionError`` with a readable message::

    result = sftrace.replay_run("failure.sftrace", "my_agent:run")
    assert_not_called(result, "issue_refund")
    assert_called_with(result, "lookup_order", order_id="A-1001")
    assert_output(result, {"decision": "denied"}, ignore_paths=["ticket_id"])
    assert_expectations(result, output={...}, not_called=["issue_refund"])  # all at once

Names match a tool by its name and an LLM call by its model, ``provider/model`` or
``"llm"`` (any LLM call). Output comparisons normalise values (``2 == 2.0``, surrounding
whitespace, a ``None``-valued key equals a missing one) and, as in suites, a change in
free text is a warning that does not fail (pass a ``policy`` to make it an error).

Tracing helpers:

- :class:`SequentialIdGenerator`: deterministic trace and span ids.
- :func:`isolated_tracing`: a fresh ``TracerProvider`` with deterministic ids and an
  in-memory exporter, configured for sftrace for the duration of a ``with`` block.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from sftrace._bundle.reader import Bundle
from sftrace._model.calls import Call
from sftrace._record import config as _config
from sftrace._regress import expectations as _expect
from sftrace._regress.compare import ComparisonPolicy, Report, compare, expected_output_report
from sftrace._regress.expectations import Expectations

if TYPE_CHECKING:
    from sftrace._replay.run import ReplayResult

__all__ = [
    "SequentialIdGenerator",
    "assert_arguments",
    "assert_call_count",
    "assert_called",
    "assert_called_with",
    "assert_expectations",
    "assert_max_calls",
    "assert_no_divergence",
    "assert_not_called",
    "assert_order",
    "assert_output",
    "assert_same_as_recorded",
    "assert_sequence",
    "assert_status",
    "isolated_tracing",
]


class SequentialIdGenerator(IdGenerator):
    """Trace ids 1, 2, 3... and span ids 1, 2, 3...: assertable span output."""

    def __init__(self) -> None:
        self._trace_ids = itertools.count(1)
        self._span_ids = itertools.count(1)
        self._lock = threading.Lock()

    def generate_trace_id(self) -> int:
        with self._lock:
            return next(self._trace_ids)

    def generate_span_id(self) -> int:
        with self._lock:
            return next(self._span_ids)


@contextmanager
def isolated_tracing(
    *, bundle_dir: str | os.PathLike[str] | None = None, deterministic_ids: bool = True
) -> Iterator[InMemorySpanExporter]:
    """Configure sftrace on a fresh provider; yield an exporter holding every finished span.

    The global OpenTelemetry provider is left alone, so tests stay independent.
    """
    provider = TracerProvider(id_generator=SequentialIdGenerator() if deterministic_ids else None)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _config.configure(tracer_provider=provider, bundle_dir=bundle_dir)
    try:
        yield memory
    finally:
        _config.reset()
        provider.shutdown()


# --- assertions on runs --------------------------------------------------------------


def _calls(result: ReplayResult | Bundle) -> list[Call]:
    """The calls the run made (a replay's with those answered inside covered calls).

    A replay that diverged stopped the agent where it left the recording: the calls it
    would have made after that are unknown, so no check of them can pass (a
    ``not_called`` would hold only because the agent was stopped before the call).
    """
    __tracebackhide__ = True
    calls = getattr(result, "made_calls", None) or getattr(result, "calls", None)
    if not isinstance(calls, list):
        raise TypeError(
            f"expected a ReplayResult (from sftrace.replay_run) or a Bundle, got "
            f"{type(result).__qualname__}"
        )
    divergence = getattr(result, "divergence", None)
    if divergence is not None:
        first = str(divergence).strip().splitlines()[0]
        raise AssertionError(
            f"the replay diverged, so the calls the agent makes after that point are "
            f"unknown and no check of its calls can pass: {first}"
        )
    return calls


def _fail(result: ReplayResult | Bundle, message: str) -> AssertionError:
    __tracebackhide__ = True
    divergence = getattr(result, "divergence", None)
    if divergence is not None:
        first = str(divergence).strip().splitlines()[0]
        message = f"{message}\n(the replay diverged: {first})"
    return AssertionError(message)


def assert_called(result: ReplayResult | Bundle, name: str) -> None:
    """``name`` was called at least once."""
    __tracebackhide__ = True
    message = _expect.check_called(_calls(result), name)
    if message:
        raise _fail(result, message)


def assert_not_called(result: ReplayResult | Bundle, name: str) -> None:
    """``name`` was never called."""
    __tracebackhide__ = True
    found = _expect.check_not_called(_calls(result), name)
    if found:
        raise _fail(result, found[0])


def assert_call_count(result: ReplayResult | Bundle, name: str, count: int) -> None:
    """``name`` was called exactly ``count`` times."""
    __tracebackhide__ = True
    message = _expect.check_count(_calls(result), name, count)
    if message:
        raise _fail(result, message)


def assert_arguments(
    result: ReplayResult | Bundle, name: str, arguments: Mapping[str, Any], *, call: int = 1
) -> None:
    """The ``call``-th (1-based) call of ``name`` had these arguments (others unchecked)."""
    __tracebackhide__ = True
    found = _expect.check_arguments(_calls(result), name, arguments, call)
    if found:
        raise _fail(result, found[0])


def assert_called_with(
    result: ReplayResult | Bundle, name: str, /, *, call: int = 1, **arguments: Any
) -> None:
    """Keyword form of :func:`assert_arguments`: ``assert_called_with(r, "refund", amount=10)``
    checks the first call of ``refund``; ``call=2`` the second."""
    __tracebackhide__ = True
    assert_arguments(result, name, arguments, call=call)


def assert_order(result: ReplayResult | Bundle, *names: str) -> None:
    """Each name was called, and their first calls happened in this order."""
    __tracebackhide__ = True
    message = _expect.check_order(_calls(result), names)
    if message:
        raise _fail(result, message)


def assert_sequence(
    result: ReplayResult | Bundle, names: Sequence[str], *, strict: bool = True
) -> None:
    """The calls made were exactly ``names`` (``strict``), or included them in this
    order with other calls allowed between (``strict=False``)."""
    __tracebackhide__ = True
    if isinstance(names, str):
        raise TypeError(f"names must be a list of call names, got the string {names!r}")
    message = _expect.check_sequence(
        _calls(result), list(names), "strict" if strict else "subsequence"
    )
    if message:
        raise _fail(result, message)


def assert_max_calls(
    result: ReplayResult | Bundle, maximum: int, *, name: str | None = None
) -> None:
    """At most ``maximum`` calls were made (of ``name``, when given)."""
    __tracebackhide__ = True
    message = _expect.check_max_calls(_calls(result), maximum, name)
    if message:
        raise _fail(result, message)


def assert_status(result: ReplayResult | Bundle, status: str) -> None:
    """The run ended ``"completed"`` or ``"failed"``."""
    __tracebackhide__ = True
    from sftrace._regress.runs import as_run

    run = as_run(result, "replayed")
    if run.status != status:
        ended = f"{run.status} ({run.failure})" if run.failure else run.status
        raise _fail(result, f"expected the run to end {status}, but it ended {ended}")


def assert_no_divergence(result: ReplayResult) -> None:
    """The replay answered every call from the recording (it never diverged)."""
    __tracebackhide__ = True
    divergence = getattr(result, "divergence", None)
    if divergence is not None:
        raise AssertionError(f"the replay diverged from the recording:\n{divergence}")


def _raise_unless_passed(report: Report, result: ReplayResult | Bundle) -> None:
    __tracebackhide__ = True
    if not report.passed:
        raise AssertionError(report.format(include_info=False))


def assert_output(
    result: ReplayResult | Bundle,
    expected: Any,
    *,
    ignore_paths: Sequence[str] = (),
    policy: ComparisonPolicy | None = None,
) -> None:
    """The run's output equals ``expected`` after normalisation, except under
    ``ignore_paths``; changed free text is a warning unless ``policy`` says otherwise."""
    __tracebackhide__ = True
    policy = (policy or ComparisonPolicy()).extend(
        ComparisonPolicy(ignore_paths=tuple(ignore_paths))
    )
    _raise_unless_passed(expected_output_report(result, expected, policy), result)


def assert_expectations(
    result: ReplayResult,
    expectations: Expectations | None = None,
    /,
    *,
    policy: ComparisonPolicy | None = None,
    **fields: Any,
) -> Report:
    """Check every expectation at once and return the report; raise ``AssertionError``
    listing the error findings (then the first divergence) if any.

    Pass an :class:`~sftrace.Expectations` or its fields as keywords (``output=...``,
    ``not_called=[...]``...). The run must end ``"completed"`` unless ``status`` says
    otherwise; how it differs from the recording is in the report as ``info``.
    """
    __tracebackhide__ = True
    if not hasattr(result, "bundle"):
        raise TypeError(
            f"assert_expectations needs a ReplayResult (from sftrace.replay_run or the "
            f"sftrace_replay fixture), got {type(result).__qualname__}"
        )
    if expectations is None:
        expectations = Expectations.from_mapping(fields, source="assert_expectations")
    elif fields:
        raise TypeError("pass either an Expectations object or keyword fields, not both")
    report = compare(result.bundle, result, policy, expect=expectations)
    _raise_unless_passed(report, result)
    return report


def assert_same_as_recorded(
    result: ReplayResult, *, policy: ComparisonPolicy | None = None
) -> Report:
    """The replay behaved as the recorded run did (``sftrace.compare``); return the
    report, or raise ``AssertionError`` listing the error findings."""
    __tracebackhide__ = True
    report = compare(result.bundle, result, policy)
    _raise_unless_passed(report, result)
    return report
