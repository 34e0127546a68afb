"""Run by ``test_dropin_setups.py`` in a fresh interpreter: sftrace beside a tracing set-up.

``python dropin_setups_child.py SETUP ORDER SAMPLING WORKDIR`` makes the application's
tracing set-up (SETUP: ``sdk``, ``logfire``, ``pydantic-ai`` [Logfire instrumenting
Pydantic AI], ``phoenix``, ``traceloop``, ``openinference``) with its own in-memory
exporter, configures sftrace before (ORDER ``sftrace-first``) or after it
(``app-first``), records one run inside an application span (for ``openinference`` and
``pydantic-ai``, of an agent on the library they instrument, replayed too), and prints
one JSON line: the bundle's spans, the spans the application's exporter received, the
application span's id. SAMPLING ``off`` gives the
application a sampler that drops everything. Set-ups patch the process (global provider,
Logfire's and Traceloop's own state), hence one process per case.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler

import sample_agents as agents
import sftrace

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "integrations"))

AppSpan = Callable[[], AbstractContextManager[Any]]


def _otel_span() -> AbstractContextManager[Any]:
    return trace.get_tracer("app").start_as_current_span("app work")


def setup_sdk(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    return _otel_span


def setup_logfire(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    import logfire

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="app",
        additional_span_processors=[SimpleSpanProcessor(memory)],
        sampling=logfire.SamplingOptions(head=sampler),
        inspect_arguments=False,
    )
    return lambda: logfire.span("app work")


def setup_phoenix(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    from phoenix.otel import register

    # Phoenix's own OTLP exporter goes to a port nobody listens on (loopback): the
    # in-memory processor added to the provider it made stands for the application's.
    provider = register(
        endpoint="http://127.0.0.1:9/v1/traces",
        project_name="app",
        batch=False,
        verbose=False,
        sampler=sampler,
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return _otel_span


def setup_traceloop(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    from traceloop.sdk import Traceloop

    Traceloop.init(
        app_name="app",
        exporter=memory,
        disable_batch=True,
        telemetry_enabled=False,
        sampler=sampler,
    )
    return _otel_span


def setup_openinference(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    return _otel_span


def setup_pydantic_ai(memory: InMemorySpanExporter, sampler: Sampler) -> AppSpan:
    """Logfire with its Pydantic AI instrumentation: the agent's own spans (agent run,
    model request, tool run) go to Logfire's provider, beside sftrace's."""
    import logfire

    app_span = setup_logfire(memory, sampler)
    logfire.instrument_pydantic_ai()
    return app_span


SETUPS = {
    "sdk": setup_sdk,
    "logfire": setup_logfire,
    "pydantic-ai": setup_pydantic_ai,
    "phoenix": setup_phoenix,
    "traceloop": setup_traceloop,
    "openinference": setup_openinference,
}


@contextmanager
def openai_agent() -> Iterator[tuple[Callable[[], Any], Any]]:
    """An agent making one chat completion through an sftrace-instrumented OpenAI client
    (answered offline), beside OpenInference's instrumentation of the same SDK."""
    import fake_llm_api as fake
    import openai

    from sftrace.integrations import openai as sf_openai

    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    api.reply_json(fake.chat_completion("Lisbon it is"))
    client = sf_openai.instrument(
        api.sdk_client(openai.OpenAI, openai.AsyncOpenAI, is_async=False, api_key="sk-test")
    )

    def agent() -> Any:
        reply = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "where to?"}]
        )
        return reply.choices[0].message.content

    yield agent, api


@contextmanager
def pydantic_ai_agent() -> Iterator[tuple[Callable[[], Any], Any]]:
    """A Pydantic AI agent on OpenAIChatModel (answered offline) calling one function tool,
    instrumented by sftrace: one tool call, then the answer."""
    import fake_llm_api as fake
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from sftrace.integrations.pydantic_ai import instrument

    api = fake.FakeAPI("openai", request_id_header="x-request-id")
    call = fake.tool_call("call_1", "parcel_status", {"parcel_id": 42})
    api.reply_json(fake.chat_completion(tool_calls=[call]))
    api.reply_json(fake.chat_completion("It shipped."))
    client = AsyncOpenAI(
        http_client=api.async_client(), api_key="sk-test", base_url="http://llm.test/v1"
    )
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, name="support")

    @agent.tool_plain
    def parcel_status(parcel_id: int) -> str:
        return f"parcel {parcel_id} shipped"

    instrument(agent)
    yield lambda: agent.run_sync("Where is parcel 42?").output, api


AGENTS = {"openinference": openai_agent, "pydantic-ai": pydantic_ai_agent}


def describe(span: ReadableSpan) -> dict[str, Any]:
    assert span.context is not None
    return {
        "id": f"{span.context.span_id:016x}",
        "parent": f"{span.parent.span_id:016x}" if span.parent else None,
        "name": span.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "sampled": span.context.trace_flags.sampled,
    }


def main(setup: str, order: str, sampling: str, workdir: Path) -> dict[str, Any]:
    os.chdir(workdir)
    memory = InMemorySpanExporter()
    sampler = ALWAYS_OFF if sampling == "off" else ALWAYS_ON
    if order == "sftrace-first":
        sftrace.configure(bundle_dir=workdir / "traces")
    app_span = SETUPS[setup](memory, sampler)
    if order == "app-first":
        sftrace.configure(bundle_dir=workdir / "traces")
    replayed: dict[str, Any] = {}
    if setup in AGENTS:
        with (
            AGENTS[setup]() as (agent, api),
            app_span() as outer,
            sftrace.record("child-agent") as session,
        ):
            session.set_output(agent())
        api.offline()  # the replay must answer from the bundle, beside their spans
        result = sftrace.replay_run(session.path or "", agent)
        replayed = {"status": result.status, "output": result.output, "refused": api.refused}
    else:
        with app_span() as outer, sftrace.record("child-agent") as session:
            session.set_output(agents.booking_agent())
    bundle = sftrace.load_bundle(session.path or "", verify_integrity=True)
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    context = outer.get_span_context()
    return {
        "app_span": f"{context.span_id:016x}",
        "app_span_sampled": context.trace_flags.sampled,
        "calls": [call.name for call in bundle.calls],
        "output": bundle.output,
        "bundle": [
            {"id": s["spanId"], "parent": s.get("parentSpanId") or None, "name": s["name"]}
            for s in bundle.spans
        ],
        "exported": [describe(span) for span in memory.get_finished_spans()],
        "replayed": replayed,
    }


if __name__ == "__main__":
    print(orjson.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))).decode())
