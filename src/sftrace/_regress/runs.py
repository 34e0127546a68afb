"""The two runs a comparison reads, and what is compared of each call.

A run is a recorded bundle (or its path) or a :class:`ReplayResult`; :func:`as_run`
adapts either to a :class:`ComparedRun`. Span ids, timestamps, durations, tokens and
cost are never compared, nor the per-run metadata of LLM responses (response and
tool-call ids, timestamps, usage): :func:`compared_input` and :func:`compared_output`
leave them out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._errors import (
    ConfigError,
    ReplayExhaustedError,
    ReplayMismatchError,
    ReplayPolicyError,
    TraceSerializationError,
    UnrecordedResultError,
)
from sftrace._model.calls import Call, inner_calls
from sftrace._model.jsonpath import JsonPath, strip
from sftrace._model.policy import MatchMode
from sftrace._model.serialize import to_json
from sftrace._model.text import first_line
from sftrace._regress.findings import RunSummary

if TYPE_CHECKING:
    from sftrace._replay.concurrency import Concurrency
    from sftrace._replay.run import ReplayResult

__all__ = [
    "ComparedRun",
    "as_run",
    "compared_input",
    "compared_output",
    "covered_by_saved_replay",
    "replayed_output",
]


@dataclass
class ComparedRun:
    """What comparison reads of a run: its calls, status, failure and output."""

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
    # The failure's whole message (redacted as recorded), which ``failure`` shortens.
    failure_message: str | None = None
    # For a replay: the indexes in ``calls`` of calls the replay refused after it had
    # diverged (a concurrent task reaching the stopped replay): the divergence's cascade.
    refused_after_divergence: frozenset[int] = frozenset()
    # For a replay: the seqs of recorded calls made inside a call the replay answered
    # without running its body. Not reached and not expected to be: never "missing".
    covered: frozenset[int] = frozenset()
    # For a replay: the seq of each replayed call matched at a non-exact tier -> the tier,
    # the seq of the recorded call it matched, and the input paths the tier ignored.
    tiers: dict[int, tuple[str, int, tuple[JsonPath, ...]]] = field(default_factory=dict)
    # For a replay with on_miss="live": the seqs of the calls that ran live.
    live: frozenset[int] = frozenset()
    # For a replay: the seq of each replayed call the replay paired with a recorded call
    # -> that recorded call's seq (calls are compared with the call they were answered
    # from, even where several have the same input).
    answered: dict[int, int] = field(default_factory=dict)
    # A replay that matched calls in any order (match="unordered"): where its calls sit
    # in the sequence is not a finding. A saved replay's manifest says so too.
    order_free: bool = False
    # For a bundle: its run id, the run it was derived from (a saved replay, fork...),
    # and for each call index the indexes of the calls directly inside it.
    run_id: str | None = None
    derived_from: str | None = None
    nesting: dict[int, list[int]] = field(default_factory=dict)
    # The calls expectations judge, where they are not ``calls``: a replay's with the
    # covered ones in place (``ReplayResult.made_calls``).
    made: list[Call] | None = None
    # For a bundle whose calls overlapped or were handed to threads: which of its calls
    # the recording shows made in an order of the agent's (see _replay/concurrency.py).
    concurrency: Concurrency | None = None

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


def as_run(value: Any, label: str) -> ComparedRun:
    """Adapt a bundle, a bundle path or a ``ReplayResult`` to what comparison reads."""
    from sftrace._record.run import exception_type_name, run_failure
    from sftrace._replay.concurrency import concurrency_of
    from sftrace._replay.run import ReplayResult, ended_by_divergence

    if isinstance(value, str | os.PathLike):
        value = load_bundle(value)
    if isinstance(value, Bundle):
        failure = value.failure
        nesting = inner_calls(value.calls, value.span_parents)
        derived = value.manifest.derived_from
        failure_type = failure.type if failure is not None and value.status == "failed" else None
        return ComparedRun(
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
            failure_message=(failure.message or "") if failure_type and failure else None,
            order_free=(derived or {}).get("match") == "unordered",
            run_id=value.manifest.run_id,
            derived_from=(derived or {}).get("run_id"),
            nesting=nesting,
            concurrency=concurrency_of(list(value.calls), value.span_parents, nesting),
        )
    if isinstance(value, ReplayResult):
        has_output, output = replayed_output(value)
        error = value.error
        calls, made = list(value.calls), list(value.made_calls)
        status = "failed" if error is not None else "completed"
        if value.status == "interrupted" and value.recording_end is not None:
            # The agent went past the end of an interrupted recording and was stopped
            # there: what it did from then on has nothing recorded to compare with.
            status, error = "interrupted", None
            ended = exception_type_name(value.recording_end)[0]
            calls = [call for call in calls if call.error is None or call.error.type != ended]
            made = [call for call in made if call.error is None or call.error.type != ended]
        if error is not None:
            error = run_failure(error)  # as a recording names the run's failure
        failure_type = exception_type_name(error)[0] if error is not None else None
        source = value.bundle.path
        diverged_call = None
        refused: frozenset[int] = frozenset()
        if value.divergence is not None:
            diverged_type = exception_type_name(value.divergence)[0]
            diverged_call = next(
                (i for i, c in enumerate(calls) if c.error and c.error.type == diverged_type),
                None,
            )
            refused = frozenset(
                i
                for i, call in enumerate(calls)
                if diverged_call is not None
                and i > diverged_call
                and call.error is not None
                and call.error.type in _REFUSALS
            )
        return ComparedRun(
            label=label,
            source=f"replay of {source}" if source is not None else "replay",
            calls=calls,
            status=status,
            failure_type=failure_type,
            failure=f"{failure_type}: {first_line(str(error))}" if error is not None else None,
            has_output=has_output,
            output=output,
            divergence=str(value.divergence) if value.divergence is not None else None,
            diverged_call=diverged_call,
            ended_by_divergence=ended_by_divergence(value.error, value.divergence),
            agent_version=value.agent_version,
            failure_message=value.failure_message if error is not None else None,
            tiers=_tiers(value),
            refused_after_divergence=refused,
            covered=frozenset(call.seq for call in value.covered),
            live=frozenset(
                value.replayed_seq(m.number) for m in value.matched if m.action == "live"
            ),
            answered={
                value.replayed_seq(m.number): m.recorded.seq
                for m in value.matched
                if m.action != "live"
            },
            # A strict replay takes calls out of order only where the recording shows
            # them concurrent (and diverges at any other order change).
            order_free=value.options.match is MatchMode.UNORDERED or value.reordered > 0,
            made=made,
        )
    raise ConfigError(
        f"cannot compare {type(value).__qualname__} {value!r}: expected a Bundle, the path of "
        f"a .sftrace bundle, or a ReplayResult"
    )


def covered_by_saved_replay(base: ComparedRun, cand: ComparedRun) -> frozenset[int]:
    """The seqs of ``base``'s calls that ``cand``, a saved replay of ``base``, did not
    reach because it answered the call they sit in from the recording (a tool calling a
    tool): what ``ReplayResult.covered`` said before the replay was saved.

    A saved bundle does not keep what the replay did with each call; a call answered from
    the recording is one of ``base``'s calls with inner calls whose counterpart (the same
    kind, name, provider and input) has none in ``cand``. Empty unless ``cand`` derives
    from ``base``.
    """
    if cand.covered or base.run_id is None or cand.derived_from != base.run_id:
        return cand.covered
    answered = {
        (call.kind, call.name, call.provider, call.input_json)
        for index, call in enumerate(cand.calls)
        if index not in cand.nesting
    }
    covered: set[int] = set()
    for index, inner in base.nesting.items():
        call = base.calls[index]
        if (call.kind, call.name, call.provider, call.input_json) not in answered:
            continue
        pending = list(inner)
        while pending:
            nested = pending.pop()
            covered.add(base.calls[nested].seq)
            pending.extend(base.nesting.get(nested, ()))
    return frozenset(covered)


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


# What a replay raises in place of a call it cannot answer (never a recorded failure).
_REFUSALS: Final = frozenset(
    f"sftrace.{cls.__name__}"
    for cls in (ReplayMismatchError, ReplayExhaustedError, ReplayPolicyError, UnrecordedResultError)
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
            tiers[result.replayed_seq(matched.number)] = (matched.tier, recorded.seq, ignored)
    return tiers


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
