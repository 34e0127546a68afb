"""Span and attribute names: the one place they are spelled.

GenAI names follow the OpenTelemetry GenAI semantic conventions (still "Development",
so they are kept here rather than imported). ``sftrace.*`` names carry what replay
needs; they are part of the bundle format (see ``docs/bundle-format.md``).
"""

from __future__ import annotations

from typing import Final

# --- OpenTelemetry GenAI semantic conventions ------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"

# --- OpenInference (helps Phoenix, Langfuse and older backends render spans) -------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
LLM_MODEL_NAME: Final = "llm.model_name"
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
LLM_PROVIDER: Final = "llm.provider"
TOOL_NAME: Final = "tool.name"
OPENINFERENCE_AGENT: Final = "AGENT"
OPENINFERENCE_TOOL: Final = "TOOL"
OPENINFERENCE_LLM: Final = "LLM"
MIME_JSON: Final = "application/json"

# --- resource --------------------------------------------------------------------
SERVICE_NAME: Final = "service.name"
SFTRACE_VERSION: Final = "sftrace.version"

# --- sftrace ---------------------------------------------------------------------
KIND: Final = "sftrace.kind"  # "run", "tool" or "llm"
SEQ: Final = "sftrace.seq"  # order in which boundaries were reached; the run is 0
RUN_ID: Final = "sftrace.run_id"
INPUT: Final = "sftrace.input"  # canonical JSON of the call's input
OUTPUT: Final = "sftrace.output"  # canonical JSON of the call's output
# SHA-256 (hex) of the UTF-8 text of sftrace.input / sftrace.output as stored (redacted):
# `sftrace validate` names the call whose value changed after it was recorded.
INPUT_SHA256: Final = "sftrace.input.sha256"
OUTPUT_SHA256: Final = "sftrace.output.sha256"
# In bundle lines (format version 2) instead of the two above: the first 16 hex digits of
# each digest, input's then output's (see _model/stored.py).
DIGESTS: Final = "sftrace.digests"
# True on a call made directly in work handed to another thread (a ThreadPoolExecutor's
# submitted function, a Thread's run): its order among such calls is the scheduler's.
HANDED_OFF: Final = "sftrace.handed_off"
# Instead of OUTPUT when the result could not become JSON: why (redacted).
OUTPUT_UNRECORDED: Final = "sftrace.output.unrecorded"
# With OUTPUT when the result held non-finite floats, stored there as the strings "NaN",
# "Infinity", "-Infinity": JSON of their paths (lists of keys and indexes).
OUTPUT_NONFINITE: Final = "sftrace.output.nonfinite"
# With OUTPUT when the integration turns the result into text that its JSON does not give
# back (LangChain's ToolMessage content: str() of a value json.dumps refuses): that text,
# redacted; a replay hands it to the integration with the recorded output.
OUTPUT_TEXT: Final = "sftrace.output.text"
# With OUTPUT when an llm_request's call returned a pydantic model or a dataclass: its
# class, "pkg.mod.Qualname" (as ERROR_TYPE names a class); a replay rebuilds the response
# as that class when an imported module holds it.
OUTPUT_TYPE: Final = "sftrace.output.type"
# JSON array of the paths of a result's pydantic model fields that were not set (its JSON
# holds their defaults): a replay unsets them again on the rebuilt model
OUTPUT_UNSET: Final = "sftrace.output.unset"
REPLAY_POLICY: Final = "sftrace.replay_policy"
ERROR_TYPE: Final = "sftrace.error.type"  # qualified name of the exception type
ERROR_MESSAGE: Final = "sftrace.error.message"
ERROR_BUILTIN: Final = "sftrace.error.builtin"  # True when the type is a Python builtin
ERROR_ARGS: Final = "sftrace.error.args"  # JSON array of the exception's args (redacted)
# JSON object of the exception's own attributes whose values are plain JSON (redacted)
ERROR_FIELDS: Final = "sftrace.error.fields"
# JSON object of the exception it was raised from (__cause__, or __context__), nested
ERROR_CAUSE: Final = "sftrace.error.cause"
ERROR_STATUS_CODE: Final = "sftrace.error.status_code"  # an SDK error's HTTP status code
ERROR_BODY: Final = "sftrace.error.body"  # JSON of an SDK error's response body (redacted)
# JSON object of an SDK error's response headers that handlers read (retry-after, request
# and rate-limit ids), redacted
ERROR_HEADERS: Final = "sftrace.error.headers"
# JSON array of {"seq", "kind", "name"}: calls still running when the run ended (run span)
UNFINISHED: Final = "sftrace.unfinished"
# JSON array of the seqs of calls whose parent span never ended (the process died inside
# it), attached to the run span by recovery (run span of an interrupted bundle)
INSIDE_UNFINISHED: Final = "sftrace.inside_unfinished"
ERROR_STEP: Final = "sftrace.error.step"  # seq of the boundary the run failed in
CANCELLED: Final = "sftrace.cancelled"
# True on a cancelled async call whose own code raised the CancelledError (its task was not
# being cancelled); absent when it was cancelled from outside (a timeout, task.cancel()).
CANCELLED_WITHIN: Final = "sftrace.cancelled.within"
STATUS: Final = "sftrace.status"  # run status: "completed" or "failed"
USAGE_TOTAL_TOKENS: Final = "sftrace.usage.total_tokens"
COST_USD: Final = "sftrace.cost_usd"
METADATA: Final = "sftrace.metadata"  # JSON object given to record(metadata=...)
AGENT_VERSION: Final = "sftrace.agent_version"  # record(agent_version=) / replay override
RUN_INPUT: Final = "sftrace.run.input"
RUN_OUTPUT: Final = "sftrace.run.output"
REPLAY_OF: Final = "sftrace.replay_of"  # run id of the recorded run a replay re-ran
# JSON {"run_id", "how", ...}: the run a derived run (replay, on_miss, fork) came from
DERIVED_FROM: Final = "sftrace.derived_from"
REDACTIONS: Final = "sftrace.redactions"  # JSON list of {field, path, rule}; never the value
# Set on OTLP copies of spans only (never in bundles): what the OTLP export left out.
TRUNCATED: Final = "sftrace.truncated"  # keys of attributes capped by max_payload_bytes
CONTENT_OMITTED: Final = "sftrace.content_omitted"  # True with capture_content=False

KIND_RUN: Final = "run"
KIND_TOOL: Final = "tool"
KIND_LLM: Final = "llm"

# Span event for a recorded state change.
EVENT_STATE_CHANGE: Final = "sftrace.state_change"
EVENT_KEY: Final = "sftrace.state.key"
EVENT_BEFORE: Final = "sftrace.state.before"
EVENT_AFTER: Final = "sftrace.state.after"

# The span event of a recorded exception (OpenTelemetry semantic conventions); sftrace
# writes it itself so that the message and stack trace are redacted.
EVENT_EXCEPTION: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
EXCEPTION_ESCAPED: Final = "exception.escaped"

INSTRUMENTATION_SCOPE: Final = "sftrace"

# Attributes that repeat sftrace.input / sftrace.output for the GenAI conventions and
# OpenInference. Bundles do not store them; readers restore them (docs/bundle-format.md).
INPUT_ALIASES: Final = (GEN_AI_TOOL_CALL_ARGUMENTS, INPUT_VALUE)
OUTPUT_ALIASES: Final = (GEN_AI_TOOL_CALL_RESULT, OUTPUT_VALUE)
