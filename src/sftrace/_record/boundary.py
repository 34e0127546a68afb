"""The interceptor shared by every instrumented boundary (tools and LLM calls).

A boundary call starts a span carrying its kind, name, sequence number and canonical
JSON input. During a replay the run's replay decides, before the span starts, what the
call does; this module acts on that decision. Results and exceptions of the wrapped body
pass through unchanged (same object, same traceback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from sftrace._errors import ReplayError, ReplayMismatchError, TraceSerializationError
from sftrace._model import attributes as A
from sftrace._model.calls import Call
from sftrace._model.fields_set import unset_again, unset_paths
from sftrace._model.jsondiff import differences, format_differences
from sftrace._model.policy import ReplayPolicy
from sftrace._model.serialize import Serializer, canonical, dumps, loads
from sftrace._model.stored import value_digest
from sftrace._record.cancellation import (
    await_cancellation,
    cancelled_within,
    waits_for_cancellation,
)
from sftrace._record.failure import failure_details
from sftrace._record.intercept import (
    HANDOFF,
    MANUAL,
    RAISE,
    RETURN,
    RUNS_BODY,
    Action,
    Decision,
    Reached,
)
from sftrace._record.run import ActiveRun, exception_type_name, own_span_context, record_failure
from sftrace._record.threads import handed_off
from sftrace._record.unrecorded import unrecorded_error, unrecorded_reason

T = TypeVar("T")
Restore = Callable[[Any], Any]


class ResultText(Protocol):
    """A text an integration makes of a call's result that the result's JSON does not give
    back (LangChain's ToolMessage content, ``str()`` of a value ``json.dumps`` refuses):
    recorded, redacted, as ``sftrace.output.text``; a replay answers with :meth:`restore`."""

    def text(self, value: Any) -> str | None:
        """The text made of ``value`` (a result the body returned), None when its JSON gives
        the same text back."""

    def restore(self, value: Any, text: str) -> Any:
        """What the call answers with, from the restored recorded value and its text."""


class ResultType(Protocol):
    """The class of a call's result, which its JSON does not give back (an
    ``llm_request``'s response: an SDK's pydantic model): recorded as
    ``sftrace.output.type``; a replay answers with :meth:`restore`."""

    def name(self, value: Any) -> str | None:
        """The name recorded of ``value``'s class (a result the body returned), None when
        there is none to record."""

    def restore(self, value: Any, name: str | None) -> Any:
        """What the call answers with, from the restored recorded value and the name
        recorded of its class (None: none was)."""


@dataclass(frozen=True, slots=True)
class BoundarySpec:
    """What is fixed about a boundary: its kind, name, span name and static attributes."""

    kind: str
    name: str
    provider: str | None
    span_name: str
    span_kind: SpanKind
    attributes: Mapping[str, Any]
    serializer: Serializer | None
    # What a call's result is called in serialization errors (made once, not per call).
    result_what: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "result_what", f"{self.kind} {self.name!r} result")

    @classmethod
    def tool(cls, name: str, policy: ReplayPolicy, serializer: Serializer | None) -> BoundarySpec:
        return cls(
            kind=A.KIND_TOOL,
            name=name,
            provider=None,
            span_name=f"{A.OPERATION_EXECUTE_TOOL} {name}",
            span_kind=SpanKind.INTERNAL,
            attributes={
                A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: name,
                A.GEN_AI_TOOL_TYPE: "function",
                A.KIND: A.KIND_TOOL,
                A.REPLAY_POLICY: policy.value,
            },
            serializer=serializer,
        )

    @classmethod
    def llm(
        cls,
        provider: str,
        model: str,
        policy: ReplayPolicy,
        serializer: Serializer | None,
        operation: str = A.OPERATION_CHAT,
    ) -> BoundarySpec:
        return cls(
            kind=A.KIND_LLM,
            name=model,
            provider=provider,
            span_name=f"{operation} {model}",
            span_kind=SpanKind.CLIENT,
            attributes={
                A.GEN_AI_OPERATION_NAME: operation,
                A.GEN_AI_PROVIDER_NAME: provider,
                A.GEN_AI_REQUEST_MODEL: model,
                A.KIND: A.KIND_LLM,
                A.REPLAY_POLICY: policy.value,
            },
            serializer=serializer,
        )


class BoundaryCall:
    """One call in progress: its span, sequence number and replay decision."""

    __slots__ = (
        "decision",
        "input_digest",
        "output_digest",
        "output_text",
        "reached",
        "redactions",
        "run",
        "seq",
        "span",
        "spec",
        "token",
    )

    def __init__(
        self,
        run: ActiveRun,
        spec: BoundarySpec,
        input_json: str,
        start_time: int | None = None,
    ) -> None:
        self.run = run
        self.spec = spec
        self.seq = seq = run.next_seq()
        run.open_calls[seq] = spec
        # Redacted before the span exists: no processor or exporter ever sees the secret,
        # and a replay matches the redacted input against the redacted recording.
        input_json, found = run.redactor.redact_json(input_json, known=run.known_secrets)
        self.redactions = [redaction.record("input") for redaction in found] if found else []
        self.span: Span
        self.decision: Decision | None = None
        replay = run.replay
        digest = None
        # The recorded output's digest, as its line stores it (for ``finish_recorded``).
        self.output_digest: str | None = None
        # The recorded output's sftrace.output.text (set by ``finish_recorded``).
        self.output_text: str | None = None
        self.reached: Reached | None = None
        if replay is not None:
            # Decided before the span starts: a recorded call with the same input text
            # lends the span the digest its line stores of that text.
            self.reached = reached = Reached(spec.kind, spec.name, spec.provider, input_json)
            self.decision = decision = replay.decide(reached, seq=seq)
            if decision.learned:
                input_json = self._learn(decision.learned, input_json)
            recorded = decision.recorded
            if recorded is not None:
                digest, self.output_digest = recorded.stored_digests()
                if recorded.input_json != input_json:
                    digest = None
        attributes = dict(spec.attributes)
        attributes[A.SEQ] = seq
        attributes[A.INPUT] = input_json
        # sftrace.digests: the input's now, the output's appended when the call ends.
        attributes[A.DIGESTS] = self.input_digest = digest or value_digest(input_json)
        if self.redactions:
            attributes[A.REDACTIONS] = canonical(self.redactions)
            run.note_redactions(seq, self.redactions)
        if spec.kind == A.KIND_TOOL:
            attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = input_json
        # The current context, read once for the span's parent and the call's own.
        context = otel_context.get_current()
        if handed_off(context):
            attributes[A.HANDED_OFF] = True
        if replay is None:
            self.span = self._start_span(attributes, context, start_time)
        else:
            HANDOFF.decided = True  # the replay processor does not decide it again
            try:
                self.span = self._start_span(attributes, context, start_time)
            finally:
                HANDOFF.decided = False
        self.token: Token[Context] | None = otel_context.attach(
            own_span_context(self.span, context)
        )

    def _learn(self, secrets: tuple[str, ...], input_json: str) -> str:
        """Remember ``secrets`` (the replay met them where the recording had learned them,
        see ``Decision.learned``) and redact them from this input, as the recording did."""
        for secret in secrets:
            self.run.known_secrets.add(secret)
        input_json, found = self.run.redactor.redact_json(input_json, known=self.run.known_secrets)
        self.redactions += [redaction.record("input") for redaction in found]
        return input_json

    def _start_span(
        self, attributes: dict[str, Any], context: Context, start_time: int | None
    ) -> Span:
        return self.run.tracer.start_span(
            self.spec.span_name,
            context=self.run.parent_context(context),
            kind=self.spec.span_kind,
            attributes=attributes,
            start_time=start_time,
            record_exception=False,
            set_status_on_exception=False,
        )

    # -- acting on the decision ------------------------------------------------------
    @property
    def runs_body(self) -> bool:
        decision = self.decision
        return decision is None or decision.action in RUNS_BODY

    def substitute(
        self,
        restore: Restore,
        result_text: ResultText | None = None,
        result_type: ResultType | None = None,
        *,
        held: bool = False,
    ) -> Any:
        """The value a replay answers with instead of running the body (or raises); an
        answer from the recording waits for the calls that finished before it there
        (``held``: the async twin did already)."""
        decision = self.decision
        assert decision is not None
        if not held and decision.recorded is not None and self._from_recording(decision):
            replay = self.run.replay
            if replay is not None:  # it never blocks a running event loop
                replay.hold_answer(decision.recorded)
        if decision.action is RAISE:
            assert decision.error is not None
            raise decision.error
        recorded = decision.recorded
        assert recorded is not None
        if decision.action is MANUAL:
            replay = self.run.replay
            assert replay is not None
            assert replay.manual is not None
            value = replay.manual(recorded)
            self.finish(value, result_type=result_type)
            return value
        value = restore(self.finish_recorded())
        if result_type is not None:
            value = self._restore_type(recorded, value, result_type)
        if recorded.may_have(A.OUTPUT_UNSET):
            self._unset_again(recorded, value)
        if result_text is not None and self.output_text is not None:
            return result_text.restore(value, self.output_text)
        return value

    async def asubstitute(
        self,
        restore: Restore,
        result_text: ResultText | None = None,
        result_type: ResultType | None = None,
    ) -> Any:
        """:meth:`substitute` for an async call (see :meth:`await_recorded_cancellation`)."""
        await self.await_recorded_cancellation()
        await self.ahold_answer()
        return self.substitute(restore, result_text, result_type, held=True)

    async def ahold_answer(self) -> None:
        """Before an async call answers from the recording: wait, without blocking the
        loop, for the calls that finished before it in the recording (the SDK
        integrations' async paths call it too, then answer through :meth:`substitute`)."""
        decision = self.decision
        replay = self.run.replay
        if (
            decision is not None
            and decision.recorded is not None
            and replay is not None
            and self._from_recording(decision)
        ):
            await replay.ahold_answer(decision.recorded)

    @staticmethod
    def _from_recording(decision: Decision) -> bool:
        """Whether the call is answered with the recorded result or recorded failure."""
        return decision.action is RETURN or decision.recorded_failure

    def _unset_again(self, recorded: Call, value: Any) -> None:
        """Unset the model fields the recorded result had not set (``sftrace.output.unset``),
        which the span records again (a saved replay keeps it)."""
        paths = recorded.attributes.get(A.OUTPUT_UNSET)
        if not isinstance(paths, str):
            return
        self.span.set_attribute(A.OUTPUT_UNSET, paths)
        try:
            unset_again(value, loads(paths))
        except Exception:  # a hand-edited bundle: the model keeps every field set
            return

    def _restore_type(self, recorded: Call, value: Any, result_type: ResultType) -> Any:
        """``value`` (the recorded result) rebuilt as the class recorded of it, which the
        span records again (a saved replay keeps it)."""
        name = recorded.attributes.get(A.OUTPUT_TYPE) if recorded.may_have(A.OUTPUT_TYPE) else None
        if not isinstance(name, str):
            return result_type.restore(value, None)
        self.span.set_attribute(A.OUTPUT_TYPE, name)
        return result_type.restore(value, name)

    async def await_recorded_cancellation(self) -> None:
        """Before an async call answers from the recording: when the recorded call was
        cancelled from outside (a timeout, ``task.cancel()``), wait until the replaying
        code cancels it too (see ``_record/cancellation.py``)."""
        decision = self.decision
        if (
            decision is not None
            and decision.action is Action.RAISE
            and waits_for_cancellation(decision)
        ):
            await await_cancellation(decision, self.run.replay)

    def finish(
        self,
        value: Any,
        extra: Mapping[str, Any] | None = None,
        result_text: ResultText | None = None,
        result_type: ResultType | None = None,
    ) -> None:
        """Record a result produced by the body (or the manual handler); ``extra``:
        attributes the caller knows of it (an LLM call's usage or cost); ``result_text``:
        the text the integration makes of it, when its JSON does not give that back;
        ``result_type``: names its class, which its JSON does not give back either."""
        if extra:  # what the caller says wins over what the response says
            self.span.set_attributes(extra)
        nonfinite: list[list[str | int]] = []
        try:
            output_json = dumps(
                value,
                serializer=self.spec.serializer or self.run.serializer,
                what=self.spec.result_what,
                sort_keys=False,
                nonfinite=nonfinite,
            )
        except TraceSerializationError as exc:  # never break the host: mark it, go on
            reason, records = unrecorded_reason(self.run, exc)
            self._note_redactions(records)
            self.span.set_attribute(A.OUTPUT_UNRECORDED, reason)
            return
        output_json = self._redacted_output(output_json)
        decision = self.decision
        if decision is not None and decision.action is Action.DERIVED:
            self._check_derived(decision, output_json)
        self._set_output(output_json)
        if nonfinite:  # where the strings stand for floats: a replay hands back floats
            self.span.set_attribute(A.OUTPUT_NONFINITE, canonical(nonfinite))
        unset = unset_paths(value)
        if unset:  # model fields left at their defaults: a replay leaves them unset too
            self.span.set_attribute(A.OUTPUT_UNSET, canonical(unset))
        if result_text is not None:
            self._set_output_text(value, result_text)
        if result_type is not None:
            self._set_output_type(value, result_type)
        if self.spec.kind == A.KIND_LLM:
            found = llm_response_attributes(value)
            self.span.set_attributes({k: v for k, v in found.items() if k not in (extra or ())})

    def _set_output_text(self, value: Any, result_text: ResultText) -> None:
        """Record the text ``result_text`` makes of ``value``, redacted after the output
        (so the secrets the output's sensitive keys held are known)."""
        try:
            text = result_text.text(value)
        except Exception:  # never break the host: the replay answers as without it
            return
        if text is None:
            return
        text, found = self.run.redactor.redact_text(text, known=self.run.known_secrets)
        self._note_redactions([redaction.record("output_text") for redaction in found])
        self.span.set_attribute(A.OUTPUT_TEXT, text)

    def _set_output_type(self, value: Any, result_type: ResultType) -> None:
        """Record the name ``result_type`` gives ``value``'s class."""
        try:
            name = result_type.name(value)
        except Exception:  # never break the host: the replay answers with the JSON
            return
        if name is not None:
            self.span.set_attribute(A.OUTPUT_TYPE, name)

    def finish_recorded(self) -> Any:
        """Record the recorded result a replay answers with (the decision's recorded
        call); return it, parsed anew (a malformed one raises ``BundleError`` before
        anything is recorded).

        It was redacted when it was recorded, so it is not scanned again: its redaction
        records, and an LLM call's usage and response model, come from the recording. An
        answer that was never recorded (``Decision.fresh``: a fork's override) is redacted
        now; the caller still gets it as given, as a recorded call's caller does.
        """
        decision = self.decision
        assert decision is not None
        recorded = decision.recorded
        assert recorded is not None
        self._refuse_unrecorded(recorded)
        value = recorded.fresh_output()
        output_json = recorded.output_json or "null"
        if decision.fresh:
            self._set_output(self._redacted_output(output_json))
        else:  # the recorded text: the recording's digest of it holds
            self._set_output(output_json, self.output_digest)
            if recorded.may_have(A.OUTPUT_NONFINITE):
                nonfinite = recorded.attributes.get(A.OUTPUT_NONFINITE)
                if isinstance(nonfinite, str):
                    self.span.set_attribute(A.OUTPUT_NONFINITE, nonfinite)
            if recorded.may_have(A.OUTPUT_TEXT):
                text = recorded.attributes.get(A.OUTPUT_TEXT)
                if isinstance(text, str):
                    self.output_text = text
                    self.span.set_attribute(A.OUTPUT_TEXT, text)
        if self.spec.kind == A.KIND_LLM:
            attributes = recorded.attributes
            self.span.set_attributes(
                {key: attributes[key] for key in _RESPONSE_ATTRIBUTES if key in attributes}
            )
        # A tool call's attributes are decoded only when the recording redacted it.
        recorded_redactions = (
            recorded.attributes.get(A.REDACTIONS) if recorded.may_have(A.REDACTIONS) else None
        )
        if recorded_redactions:
            self._note_redactions(
                [
                    r
                    for r in loads(recorded_redactions)
                    if r.get("field") in ("output", "output_text")
                ]
            )
        return value

    def _redacted_output(self, output_json: str) -> str:
        output_json, found = self.run.redactor.redact_json(
            output_json, known=self.run.known_secrets, sort_keys=False
        )
        if found:
            self._note_redactions([redaction.record("output") for redaction in found])
        return output_json

    def redact_stream(self, chunks: list[Any]) -> list[Any]:
        """A stream's chunks with the secrets that run across chunks redacted in each chunk
        (the output they go into is then redacted as usual)."""
        chunks, found = self.run.redactor.redact_stream(chunks, known=self.run.known_secrets)
        self._note_redactions([redaction.record("output") for redaction in found])
        return chunks

    def _note_redactions(self, records: list[dict[str, Any]]) -> None:
        if records:
            self.redactions.extend(records)
            self.span.set_attribute(A.REDACTIONS, canonical(self.redactions))
            self.run.note_redactions(self.seq, records)

    def _set_output(self, output_json: str, digest: str | None = None) -> None:
        """Set the output and the digests; ``digest``: the output's, when already known."""
        attributes = {
            A.OUTPUT: output_json,
            A.DIGESTS: self.input_digest + (digest or value_digest(output_json)),
        }
        if self.spec.kind == A.KIND_TOOL:
            attributes[A.GEN_AI_TOOL_CALL_RESULT] = output_json
        self.span.set_attributes(attributes)  # one call: the span's lock is taken once

    def _refuse_unrecorded(self, recorded: Call) -> None:
        """Raise when ``recorded``'s result could not be recorded: nothing to answer with."""
        error = unrecorded_error(recorded)
        if error is not None:
            self.diverge(error)

    def refuse_recorded(self, reason: str) -> NoReturn:
        """Diverge at this call, which matched a recorded call that cannot answer it:
        ``reason`` says why, following "call N (label) " (it was streamed, this call is
        not). Raises the divergence (``ReplayMismatchError``)."""
        decision, reached = self.decision, self.reached
        assert decision is not None
        assert reached is not None
        recorded = decision.recorded
        assert recorded is not None
        number = self.reached_number()
        self.diverge(
            ReplayMismatchError(
                f"replay diverged at call {number}: call {recorded.seq} ({recorded.label}) "
                f"{reason}",
                call_number=number,
                recorded=recorded.describe(),
                reached=reached.describe(),
                differences=[],
            )
        )

    def reached_number(self) -> int:
        """The number a divergence at this call names: the replay's count of reached calls."""
        replay = self.run.replay
        return replay.reached_count if replay is not None else self.seq

    def diverge(self, error: ReplayError) -> NoReturn:
        """Record ``error`` as the replay's divergence and raise it (also after the call
        ended: a replayed stream read further than recorded diverges there)."""
        if self.run.replay is not None:
            self.run.replay.diverge(error)
        raise error

    def _check_derived(self, decision: Decision, output_json: str) -> None:
        recorded = decision.recorded
        assert recorded is not None
        self._refuse_unrecorded(recorded)
        if output_json == (recorded.output_json or "null"):
            return
        replayed = loads(output_json)
        # Outputs keep their key order: compare them as values, not as text.
        if canonical(replayed) == canonical(recorded.output):
            return
        diffs = differences(recorded.output, replayed)
        error = ReplayMismatchError(
            f"call {recorded.seq} ({recorded.label}) has replay_policy='derived', but running it "
            f"again gave a different result than recorded:\n"
            + format_differences(diffs, left="recorded", right="replayed"),
            call_number=self.reached_number(),
            recorded=recorded.describe(),
            reached={"kind": recorded.kind, "name": recorded.name, "output": replayed},
            differences=diffs,
        )
        self.diverge(error)

    def fail(self, exc: BaseException) -> None:
        span = self.span
        error_type, builtin = exception_type_name(exc)
        message, records = record_failure(span, exc, self.run.redactor, self.run.known_secrets)
        details, found = failure_details(exc, self.run.redactor, self.run.known_secrets)
        self._note_redactions(records + found)
        span.set_attributes(
            {A.ERROR_TYPE: error_type, A.ERROR_MESSAGE: message, A.ERROR_BUILTIN: builtin}
        )
        span.set_attributes(details)
        if isinstance(exc, asyncio.CancelledError):
            span.set_attribute(A.CANCELLED, True)
            if cancelled_within():
                span.set_attribute(A.CANCELLED_WITHIN, True)
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"))
        self.run.note_failure(exc, self.seq)

    def detach(self) -> None:
        """Stop being the current span; the span stays open until :meth:`close`.

        For streamed responses, consumed after the call returned: what the caller does
        while iterating is not a child of the stream's span.
        """
        token, self.token = self.token, None
        if token is not None:
            otel_context.detach(token)

    def close(self, end_time: int | None = None) -> None:
        try:
            self.detach()
        finally:
            self.span.end(end_time=end_time)
            self.run.open_calls.pop(self.seq, None)
            decision = self.decision
            if decision is not None and decision.recorded is not None:
                replay = self.run.replay
                if replay is not None:
                    replay.answered(decision.recorded)


def call_sync(
    run: ActiveRun,
    spec: BoundarySpec,
    input_json: str,
    body: Callable[[], T],
    restore: Restore,
    extra: Mapping[str, Any] | None = None,
    result_text: ResultText | None = None,
    result_type: ResultType | None = None,
) -> T:
    """Run one call through its boundary; ``extra``: attributes the caller knows of the
    call's result (an LLM call's cost), set when the body ran; ``result_text``,
    ``result_type``: see :class:`ResultText`, :class:`ResultType`."""
    call = BoundaryCall(run, spec, input_json)
    try:
        if call.runs_body:
            value = body()
            call.finish(value, extra, result_text, result_type)
            return value
        result: T = call.substitute(restore, result_text, result_type)
        return result
    except BaseException as exc:
        call.fail(exc)
        raise
    finally:
        call.close()


async def call_async(
    run: ActiveRun,
    spec: BoundarySpec,
    input_json: str,
    body: Callable[[], Awaitable[T]],
    restore: Restore,
    extra: Mapping[str, Any] | None = None,
    result_text: ResultText | None = None,
    result_type: ResultType | None = None,
) -> T:
    call = BoundaryCall(run, spec, input_json)
    try:
        if call.runs_body:
            value = await body()
            call.finish(value, extra, result_text, result_type)
            return value
        result: T = await call.asubstitute(restore, result_text, result_type)
        return result
    except BaseException as exc:
        call.fail(exc)
        raise
    finally:
        call.close()


# What an LLM span learns from the response; a replay copies them from the recording.
_RESPONSE_ATTRIBUTES = (
    A.GEN_AI_RESPONSE_MODEL,
    A.GEN_AI_USAGE_INPUT_TOKENS,
    A.GEN_AI_USAGE_OUTPUT_TOKENS,
    A.USAGE_TOTAL_TOKENS,
    A.COST_USD,
)

_INPUT_TOKEN_KEYS = ("input_tokens", "prompt_tokens")
_OUTPUT_TOKEN_KEYS = ("output_tokens", "completion_tokens")


def _get(source: Any, key: str) -> Any:
    # type() first: most responses are plain dicts, and the Mapping ABC check is slow.
    if type(source) is dict or isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def llm_response_attributes(response: Any) -> dict[str, Any]:
    """Token usage and response model found in an LLM response (dict or SDK object)."""
    found: dict[str, Any] = {}
    if response is None or isinstance(response, str | int | float | bool | list):
        return found
    model = _get(response, "model")
    if isinstance(model, str):
        found[A.GEN_AI_RESPONSE_MODEL] = model
    usage = _get(response, "usage")
    if usage is None:
        return found
    for keys, attribute in (
        (_INPUT_TOKEN_KEYS, A.GEN_AI_USAGE_INPUT_TOKENS),
        (_OUTPUT_TOKEN_KEYS, A.GEN_AI_USAGE_OUTPUT_TOKENS),
        (("total_tokens",), A.USAGE_TOTAL_TOKENS),
    ):
        for key in keys:
            value = _get(usage, key)
            if isinstance(value, int) and not isinstance(value, bool):
                found[attribute] = value
                break
    return found
