"""Starting a run (its span, a trace of its own, and the :class:`ActiveRun` around it)
and setting its output.

``record()`` and ``replay()`` both start runs through :func:`start_run` and set outputs
through :func:`set_run_output`, so a recorded run span and a replayed one carry the same
attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Tracer

from sftrace._model import attributes as A
from sftrace._model.serialize import Serializer, dumps
from sftrace._record.redaction import KnownSecrets, Redactor
from sftrace._record.run import ActiveRun

if TYPE_CHECKING:
    from sftrace._record.intercept import Interceptor


def start_run(
    tracer: Tracer,
    *,
    agent_name: str,
    run_id: str,
    attributes: Mapping[str, Any] | None = None,
    links: Sequence[Link] = (),
    replay: Interceptor | None = None,
    redactor: Redactor | None = None,
    known_secrets: KnownSecrets | None = None,
    serializer: Serializer | None = None,
) -> ActiveRun:
    """Start the run span ``invoke_agent <agent_name>`` in a new trace; return the run.

    ``attributes`` are added to the ones every run span has (kind, seq 0, run id,
    operation and agent name): the run's input and metadata, what a replay replays.
    """
    span = tracer.start_span(
        f"{A.OPERATION_INVOKE_AGENT} {agent_name}",
        context=Context(),  # every run is a trace of its own
        kind=SpanKind.INTERNAL,
        attributes={
            A.KIND: A.KIND_RUN,
            A.SEQ: 0,
            A.RUN_ID: run_id,
            A.GEN_AI_OPERATION_NAME: A.OPERATION_INVOKE_AGENT,
            A.GEN_AI_AGENT_NAME: agent_name,
            **(attributes or {}),
        },
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )
    return ActiveRun(
        tracer=tracer,
        agent_name=agent_name,
        run_id=run_id,
        span=span,
        replay=replay,
        redactor=redactor,
        known_secrets=known_secrets,
        serializer=serializer,
    )


def set_run_output(run: ActiveRun, value: Any, serializer: Serializer | None = None) -> None:
    """Set the run's final output (redacted): what a replay is compared against."""
    output_json, found = run.redactor.redact_json(
        dumps(value, serializer=serializer, what="run output"), known=run.known_secrets
    )
    run.note_redactions(0, [redaction.record("run.output") for redaction in found])
    run.output_json = output_json
    run.has_output = True


__all__ = ["set_run_output", "start_run"]
