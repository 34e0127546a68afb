"""sftrace benchmark suite: recording, replay and bundle loading against a bare span.

Run from the repository root::

    .venv/bin/python benchmarks/bench.py            # full run (10-20 minutes)
    .venv/bin/python benchmarks/bench.py --quick    # smaller runs, fewer repeats

It prints a table and writes the results as JSON (``benchmarks/results.json`` unless
``--json`` says otherwise). Every figure is the median of repeated runs, measured side
by side in this one process: the floor (the undecorated function), the baseline (a bare
OpenTelemetry SDK span carrying the same JSON input and output through a
``SimpleSpanProcessor``) and sftrace itself, so the ratios hold on any machine even where
the absolute times do not. See ``benchmarks/README.md`` for the targets and results.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import payload_mix  # noqa: E402
import workload  # noqa: E402
from redaction_bench import measure_redaction  # noqa: E402

import sftrace  # noqa: E402
from sftrace import Redactor, llm_request, load_bundle, record, replay, trace_tool  # noqa: E402
from sftrace._model.attributes import INPUT_ALIASES, OUTPUT_ALIASES  # noqa: E402
from sftrace._model.calls import call_from_span  # noqa: E402
from sftrace._model.otlp_json import encode_span  # noqa: E402

# What a bundle leaves out of each line (it restores them on read): the floor does too.
ALIASES = frozenset(INPUT_ALIASES + OUTPUT_ALIASES)

# --- the contenders -----------------------------------------------------------------


class DiscardingExporter(SpanExporter):
    """The baseline's exporter: accepts every span and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def bare_tracer() -> Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DiscardingExporter()))
    return provider.get_tracer("bench-baseline")


def _dumps(value: Any) -> str:
    """Inputs as sftrace stores them: JSON with sorted keys (canonical)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _dumps_output(value: Any) -> str:
    """Outputs as sftrace stores them: JSON in the value's own key order."""
    return orjson.dumps(value).decode()


def bare_tool(tracer: Tracer) -> Callable[..., Any]:
    """The baseline: the tool wrapped in a hand-written span with JSON input and output."""
    func = workload.search_flights

    def wrapper(destination: str, date: str, passengers: int = 1, cabin: str = "economy") -> Any:
        arguments = {
            "destination": destination,
            "date": date,
            "passengers": passengers,
            "cabin": cabin,
        }
        with tracer.start_as_current_span(
            "execute_tool search_flights", attributes={"input": _dumps(arguments)}
        ) as span:
            result = func(destination, date, passengers, cabin)
            span.set_attribute("output", _dumps_output(result))
            return result

    return wrapper


def bare_tool_with_sftrace_attributes(
    tracer: Tracer,
    func: Callable[..., Any] = workload.search_flights,
    name: str = "search_flights",
) -> Callable[..., Any]:
    """A floor: the bare span carrying every attribute sftrace puts on a tool span.

    The 12 attributes: GenAI names, ``sftrace.*``, and the digests of the stored input
    and output. With ``JournalExporter`` behind it, also written to disk as each span
    ends: what any durable span recorder must at least do, without sftrace's own
    machinery. ``func``/``name``: the tool (the payload mix uses its own).
    """
    static = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        "sftrace.kind": "tool",
        "sftrace.replay_policy": "frozen",
    }
    span_name = f"execute_tool {name}"
    seqs = iter(range(1, 1 << 62))

    def wrapper(destination: str, date: str, passengers: int = 1, cabin: str = "economy") -> Any:
        arguments = {
            "destination": destination,
            "date": date,
            "passengers": passengers,
            "cabin": cabin,
        }
        input_json = _dumps(arguments)
        attributes = {
            **static,
            "sftrace.seq": next(seqs),
            "sftrace.input": input_json,
            "sftrace.input.sha256": hashlib.sha256(input_json.encode()).hexdigest(),
            "gen_ai.tool.call.arguments": input_json,
        }
        with tracer.start_as_current_span(span_name, attributes=attributes) as span:
            result = func(destination, date, passengers, cabin)
            output_json = _dumps_output(result)
            span.set_attributes(
                {
                    "sftrace.output": output_json,
                    "sftrace.output.sha256": hashlib.sha256(output_json.encode()).hexdigest(),
                    "gen_ai.tool.call.result": output_json,
                }
            )
            return result

    return wrapper


def parse_recorded_output(
    destination: str, date: str, passengers: int = 1, cabin: str = "economy"
) -> Any:
    """Row 6b's tool body: the recorded output text parsed anew, as a frozen replay hands
    the agent a fresh object instead of running the tool."""
    return orjson.loads(RECORDED_OUTPUT)


RECORDED_OUTPUT = _dumps_output(workload.TOOL_RESULT)


class JournalExporter(SpanExporter):
    """Writes each span as one OTLP/JSON line to an unbuffered file as it ends.

    The simplest durable exporter (it borrows sftrace's span-to-OTLP/JSON mapping): the
    floor for a recorder that keeps every span on disk the moment it ends. Like a bundle,
    it leaves out the attributes that repeat the input and output (the GenAI aliases).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "w+b", buffering=0)  # noqa: SIM115

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            self._file.write(orjson.dumps(encode_span(span, ALIASES)) + b"\n")
        return SpanExportResult.SUCCESS

    def truncate(self) -> None:
        self._file.seek(0)
        self._file.truncate()

    def finish(self, target: Path) -> str:
        """Finish the journal as a bundle's spans file must be: the lines in call order
        (the root span, written last, goes first), the file's sha256, fsynced.

        The least any writer of the bundle format does at the end of a run (2d): one
        ordered copy and one digest of everything written.
        """
        size = self._file.tell()
        fd = self._file.fileno()
        root = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
        root = root[root.rfind(b"\n", 0, len(root) - 1) + 1 :]
        digest = hashlib.sha256(root)
        with open(target, "wb", buffering=0) as out:
            out.write(root)
            offset, end = 0, size - len(root)
            while offset < end:
                chunk = os.pread(fd, min(end - offset, 4 << 20), offset)
                digest.update(chunk)
                out.write(chunk)
                offset += len(chunk)
            os.fsync(out.fileno())
        return digest.hexdigest()

    def shutdown(self) -> None:
        self._file.close()


def bare_llm(tracer: Tracer, request: dict[str, Any]) -> Any:
    with tracer.start_as_current_span(
        "chat gpt-4o-mini", attributes={"input": _dumps(request)}
    ) as span:
        response = workload.chat_completion()
        span.set_attribute("output", _dumps_output(response))
        return response


traced_search = trace_tool(workload.search_flights)


def traced_llm(request: dict[str, Any]) -> Any:
    return llm_request(
        provider="openai", model="gpt-4o-mini", input=request, call=workload.chat_completion
    )


# --- timing -------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Nanoseconds of wall-clock time and of CPU time (all the process's threads)."""

    wall: float
    cpu: float

    def __truediv__(self, count: float) -> Timing:
        return Timing(self.wall / count, self.cpu / count)

    def __add__(self, other: Timing) -> Timing:
        return Timing(self.wall + other.wall, self.cpu + other.cpu)


def timed(action: Callable[[], Any]) -> Timing:
    """How long ``action`` takes (collecting garbage first, leaving the GC on).

    Wall-clock time is what the agent sees and what the targets are judged on. CPU time
    is reported beside it: on a machine shared with other work it is far steadier, so
    it shows whether a change in wall-clock time is real.
    """
    gc.collect()
    cpu = time.process_time_ns()
    start = time.perf_counter_ns()
    action()
    wall = time.perf_counter_ns() - start
    return Timing(wall, time.process_time_ns() - cpu)


def call_tool(func: Callable[..., Any], arguments: list[tuple[str, str, int]]) -> None:
    for destination, date, passengers in arguments:
        func(destination, date, passengers=passengers)


@dataclass
class Samples:
    """Per-call nanoseconds of each case, one sample per round (wall and CPU)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    cpu_values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, timing: Timing) -> None:
        self.values.setdefault(name, []).append(timing.wall)
        self.cpu_values.setdefault(name, []).append(timing.cpu)

    def median(self, name: str) -> float:
        return statistics.median(self.values[name])

    def cpu(self, name: str) -> float:
        return statistics.median(self.cpu_values[name])


class Bench:
    def __init__(
        self, lengths: list[int], passthrough_calls: int, min_calls: int, workdir: Path
    ) -> None:
        self.lengths = lengths
        self.passthrough_calls = passthrough_calls
        self.min_calls = min_calls
        self.workdir = workdir
        self.tracer = bare_tracer()
        self.bare_search = bare_tool(self.tracer)
        self.attributes_search = bare_tool_with_sftrace_attributes(self.tracer)
        self.replay_floor_search = bare_tool_with_sftrace_attributes(
            self.tracer, func=parse_recorded_output
        )
        journal_provider = TracerProvider()
        self.journal = JournalExporter(workdir / "journal-floor.jsonl")
        journal_provider.add_span_processor(SimpleSpanProcessor(self.journal))
        self.journal_tracer = journal_provider.get_tracer("bench-journal")
        self.journal_search = bare_tool_with_sftrace_attributes(self.journal_tracer)
        self.provider = TracerProvider()
        sftrace.configure(tracer_provider=self.provider, bundle_dir=workdir / "traces")
        self.tool_args = {n: workload.tool_arguments(n) for n in lengths}
        self.llm_args = {n: workload.llm_inputs(n) for n in lengths}
        self.samples = Samples()
        self.bundles: dict[int, sftrace.Bundle] = {}
        self.sizes: dict[int, dict[str, float]] = {}
        self._counter = 0
        # stepfork slows down with run length (about 1 ms a call at 2,000 calls): it runs
        # the shorter lengths only.
        self.stepfork_lengths = [n for n in lengths if n <= 2000]
        self.payload_mix = True  # rows 2m and 4m (--no-payload-mix: off)

    def _path(self, label: str) -> Path:
        self._counter += 1
        return self.workdir / f"{label}-{self._counter}.sftrace"

    # -- setup: one recording per length, loaded once, for replay ---------------------
    def prepare(self) -> None:
        for n in self.lengths:
            path = self.workdir / f"replay-source-{n}.sftrace"
            with record("bench", output=path):
                call_tool(traced_search, self.tool_args[n])
            bundle = load_bundle(path)
            if len(bundle.calls) != n:
                raise SystemExit(f"recorded {len(bundle.calls)} calls, expected {n}")
            self.bundles[n] = bundle
            self.sizes[n] = bundle_size(path, bundle)

    # -- one round of every case -------------------------------------------------------
    def round(self) -> None:
        s = self.samples
        k = self.passthrough_calls
        many = workload.tool_arguments(k)
        s.add("floor", timed(lambda: call_tool(workload.search_flights, many)) / k)
        s.add("passthrough", timed(lambda: call_tool(traced_search, many)) / k)
        requests = workload.llm_inputs(k)
        s.add("floor_llm", timed(lambda: [workload.chat_completion() for _ in requests]) / k)
        s.add("passthrough_llm", timed(lambda: [traced_llm(r) for r in requests]) / k)
        for n in self.lengths:
            self._round_at(n)

    def _sample(
        self, name: str, n: int, run: Callable[[int], Any], reps: int | None = None
    ) -> None:
        """Time ``run(i)`` for i in range(reps), a run of ``n`` calls each, per call.

        Short runs are repeated until a sample covers ``min_calls`` calls (unless ``reps``
        says how often), so a 200-call figure is as steady as a 20,000-call one; each
        repetition is a whole run (its fixed costs included).
        """
        reps = reps or max(1, self.min_calls // n)
        self.samples.add(name, timed(lambda: [run(i) for i in range(reps)]) / (n * reps))

    def _interleaved(self, n: int, rows: list[tuple[str, Callable[[int], Any]]], reps: int) -> None:
        """Time the rows' runs in turn: run i of every row, then run i + 1 of every row.

        A shared virtual CPU changes speed from one few-second stretch to the next (by up to
        1.7x, seen with nothing else running): rows timed one after another would each
        catch a different speed, and their ratios with it. Taken in turn, every row's
        sample spans the same stretch of time. Each run is timed alone (collecting
        garbage first); a row's sample is the sum of its runs, per call.
        """
        totals = {name: Timing(0, 0) for name, _ in rows}
        for i in range(reps):
            for name, run in rows:
                totals[name] = totals[name] + timed(functools.partial(run, i))
        for name, _ in rows:
            self.samples.add(name, totals[name] / (n * reps))

    def fresh_bundles(self, n: int, count: int) -> list[sftrace.Bundle]:
        """``count`` loads of the recording of ``n`` calls, none replayed yet."""
        return [load_bundle(self.workdir / f"replay-source-{n}.sftrace") for _ in range(count)]

    def bundle_floor(self, func: Callable[..., Any], args: Any) -> Callable[[int], None]:
        """Row 2d: a run of 2c's spans, its journal then finished as a bundle's spans file."""
        target = self.workdir / "bundle-floor.jsonl"

        def run(_: int) -> None:
            self.journal.truncate()
            with self.journal_tracer.start_as_current_span("invoke_agent bench"):
                call_tool(func, args)
            self.journal.finish(target)

        return run

    def _round_at(self, n: int) -> None:
        args, requests = self.tool_args[n], self.llm_args[n]
        tracer = self.tracer
        reps = max(1, self.min_calls // n)

        def under_root(run_tracer: Tracer, func: Callable[..., Any]) -> Callable[[int], None]:
            def run(_: int) -> None:
                with run_tracer.start_as_current_span("invoke_agent bench"):
                    call_tool(func, args)

            return run

        def bare_llm_run(_: int) -> None:
            with tracer.start_as_current_span("invoke_agent bench"):
                for request in requests:
                    bare_llm(tracer, request)

        tool_paths = [self._path("tool") for _ in range(reps)]
        llm_paths = [self._path("llm") for _ in range(reps)]

        def record_run(i: int) -> None:
            with record("bench", output=tool_paths[i]):
                call_tool(traced_search, args)

        def record_llm_run(i: int) -> None:
            with record("bench", output=llm_paths[i]):
                for request in requests:
                    traced_llm(request)

        def replay_run(match: str) -> Callable[[int], None]:
            # Each replay gets a bundle loaded for it (untimed), as a real replay does: what
            # loading leaves to first use (parsing values, decoding attributes) is timed.
            fresh = self.fresh_bundles(n, reps)

            def run(i: int) -> None:
                with replay(fresh[i], match=match) as session:
                    call_tool(traced_search, args)
                if session.divergence is not None or session.unused:
                    raise SystemExit(f"replay of {n} calls did not match: {session.divergence}")

            return run

        self.journal.truncate()
        self._interleaved(
            n,
            [
                (f"bare@{n}", under_root(tracer, self.bare_search)),
                (f"bare_attributes@{n}", under_root(tracer, self.attributes_search)),
                (f"bare_parse@{n}", under_root(tracer, self.replay_floor_search)),
                (f"bare_journal@{n}", under_root(self.journal_tracer, self.journal_search)),
                (f"bare_bundle@{n}", self.bundle_floor(self.journal_search, args)),
                (f"bare_llm@{n}", bare_llm_run),
                (f"record@{n}", record_run),
                (f"record_llm@{n}", record_llm_run),
                (f"replay_strict@{n}", replay_run("strict")),
                (f"replay_unordered@{n}", replay_run("unordered")),
            ],
            reps,
        )
        for path in tool_paths + llm_paths:
            shutil.rmtree(path)

        bundle = self.bundles[n]

        if n == self.lengths[-1]:
            self._without_redaction(n, args, bundle)
        if self.payload_mix:
            payload_mix.sample_round(self, n)

        source = self.workdir / f"replay-source-{n}.sftrace"
        spans = len(bundle.spans)
        loads: list[tuple[str, Callable[[int], Any]]] = [
            (f"load@{n}", lambda _: load_bundle(source)),
            (f"load_floor@{n}", lambda _: read_and_parse(source / "spans.jsonl")),
        ]
        if n == self.lengths[-1]:
            loads += [
                (f"load_python_floor@{n}", lambda _: read_parse_and_index(source)),
                (f"load_call_floor@{n}", lambda _: read_parse_and_call(source)),
                (f"load_eager@{n}", lambda _: load_bundle(source, eager=True)),
                (
                    f"load_eager_floor@{n}",
                    lambda _: read_and_parse(source / "spans.jsonl", values=True),
                ),
            ]
            typed = typed_span_decoder()
            if typed is not None:
                loads.append((f"load_typed_floor@{n}", lambda _: read_and_decode(source, typed)))
        self._interleaved(spans, loads, max(1, self.min_calls // spans))

    def _without_redaction(self, n: int, args: Any, bundle: sftrace.Bundle) -> None:
        """Recording and replay with redaction switched off: its share of the cost."""
        traces = self.workdir / "traces"
        sftrace.configure(
            tracer_provider=self.provider, bundle_dir=traces, redaction=Redactor(builtins=False)
        )
        try:
            paths = [self._path("plain") for _ in range(max(1, self.min_calls // n))]

            def record_run(i: int) -> None:
                with record("bench", output=paths[i]):
                    call_tool(traced_search, args)

            self._sample(f"record_noredact@{n}", n, record_run)
            for path in paths:
                shutil.rmtree(path)

            fresh = self.fresh_bundles(n, max(1, self.min_calls // n))

            def replay_run(i: int) -> None:
                with replay(fresh[i]):
                    call_tool(traced_search, args)

            self._sample(f"replay_noredact@{n}", n, replay_run)
        finally:
            sftrace.configure(tracer_provider=self.provider, bundle_dir=traces)


def lines_of(data: bytes) -> Iterator[memoryview]:
    """Each line of ``data`` (without its newline), found with ``bytes.find`` (memchr) and
    not copied: the cheapest way to split a file into lines in CPython (``splitlines``
    scans byte by byte and copies each line: about 14,000 instructions more per span of
    the bench's bundle, 38% of 7b; ``split(b"\\n")`` about 7,700 more). The floors use
    it, as ``load_bundle`` finds its lines the same way."""
    find, view = data.find, memoryview(data)
    position, size = 0, len(data)
    while position < size:
        end = find(b"\n", position)
        if end < 0:
            end = size
        yield view[position:end]
        position = end + 1


def read_and_parse(path: Path, *, values: bool = False) -> int:
    """The floor of a loader: read the file and parse every line; with ``values``, also
    parse every input and output (they must be JSON text), as an eager loader must."""
    count = 0
    for line in lines_of(path.read_bytes()):
        span = orjson.loads(line)
        if values:
            for item in span["attributes"]:
                if item["key"] in ("sftrace.input", "sftrace.output"):
                    orjson.loads(item["value"]["stringValue"])
        count += 1
    return count


def read_parse_and_index(path: Path) -> int:
    """7b plus the least a loader written in Python does with each line: a dict of its
    attributes (what the checks and the call are made from) and one small object per
    span, kept. No check at all: the floor of any checking loader on CPython."""
    kept = []
    for line in lines_of((path / "spans.jsonl").read_bytes()):
        span = orjson.loads(line)
        attributes = {item["key"]: item["value"] for item in span["attributes"]}
        kept.append((span["spanId"], attributes.get("sftrace.seq")))
    return len(kept)


def read_parse_and_call(path: Path) -> int:
    """7b plus what any loader written in Python keeps of a bundle: each line's
    attributes decoded into a dict and a ``Call`` per call span (``call_from_span``, the
    loader's own constructor, keeping the line's position as loading does). No check at
    all: with 7e, the floor of a checking loader on CPython that builds the calls."""
    data = (path / "spans.jsonl").read_bytes()
    calls = []
    for number, line in enumerate(lines_of(data), start=1):
        span = orjson.loads(line)
        attributes: dict[str, Any] = {}
        for item in span["attributes"]:
            value = item["value"]
            attributes[item["key"]] = (
                value["stringValue"] if "stringValue" in value else int(value["intValue"])
            )
        if attributes["sftrace.kind"] != "run":
            calls.append(call_from_span(span, attributes, (data, 0, 0, "spans.jsonl", number)))
    return len(calls) + 1


@functools.cache
def typed_span_decoder() -> Any:
    """A msgspec decoder of the OTLP/JSON span lines sftrace writes into typed structs
    (types checked in C while parsing), or None when msgspec is not installed: row 7f,
    the parse floor of a loader built on msgspec. sftrace itself does not use it."""
    try:
        import msgspec
    except ImportError:
        return None

    # defstruct: real types (this module's annotations are strings, see __future__)
    value = msgspec.defstruct(
        "Value",
        [
            ("stringValue", str | None, None),
            ("intValue", str | None, None),
            ("boolValue", bool | None, None),
            ("doubleValue", float | None, None),
        ],
        gc=False,
    )
    key_value = msgspec.defstruct("KeyValue", [("key", str), ("value", value)], gc=False)
    span = msgspec.defstruct(
        "Span",
        [
            ("traceId", str),
            ("spanId", str),
            ("name", str),
            ("kind", int, 1),
            ("startTimeUnixNano", str, "0"),
            ("endTimeUnixNano", str, "0"),
            ("attributes", list[key_value], []),  # type: ignore[valid-type]
            ("parentSpanId", str, ""),
            ("status", dict[str, Any], {}),
        ],
        gc=False,
    )
    return msgspec.json.Decoder(span)


def read_and_decode(path: Path, decoder: Any) -> int:
    """Row 7f: read the file and decode every line with ``decoder`` (typed_span_decoder)."""
    count = 0
    decode = decoder.decode
    for line in lines_of((path / "spans.jsonl").read_bytes()):
        decode(line)
        count += 1
    return count


# What a call's span line needs to hold its information (see envelope_floor).
_FLOOR_FIELDS = ("traceId", "spanId", "parentSpanId", "name", "kind")
_FLOOR_TIMES = ("startTimeUnixNano", "endTimeUnixNano")
_FLOOR_ATTRIBUTES = ("sftrace.kind", "sftrace.seq", "sftrace.input", "sftrace.output")


def envelope_floor(line: bytes) -> int:
    """Bytes of the smallest OTLP/JSON span line holding a call's information: its ids,
    name, kind and times, and as attributes only its kind, sequence number, input and
    output (everything else a bundle line carries can be derived from these or is
    redundant), compact, plus its newline."""
    span = orjson.loads(line)
    floor: dict[str, Any] = {key: span[key] for key in _FLOOR_FIELDS if key in span}
    floor.update({key: span[key] for key in _FLOOR_TIMES})
    floor["attributes"] = [item for item in span["attributes"] if item["key"] in _FLOOR_ATTRIBUTES]
    return len(orjson.dumps(floor)) + 1


def bundle_size(path: Path, bundle: sftrace.Bundle) -> dict[str, float]:
    """Bytes on disk of a bundle, against the raw JSON of the inputs and outputs it holds
    and against the OTLP/JSON envelope's floor (``envelope_floor`` of every call line)."""
    total = sum(entry.stat().st_size for entry in path.iterdir())
    raw = sum(len(c.input_json) + len(c.output_json or "") for c in bundle.calls)
    lines = (path / "spans.jsonl").read_bytes().splitlines()
    floor = sum(envelope_floor(line) for line in lines[1:])  # the calls' lines
    calls = len(bundle.calls)
    return {
        "bundle_bytes": total,
        "bytes_per_call": total / calls,
        "raw_json_bytes": raw,
        "size_ratio": total / raw,
        "floor_bytes": floor,
        "floor_bytes_per_call": floor / calls,
        "floor_ratio": floor / raw,
        "size_vs_floor": total / floor,
    }


# --- OTLP export to a real local collector --------------------------------------------


def measure_otlp(bench: Bench, repeats: int) -> dict[str, Any] | None:
    """Recording with OTLP export on, through a local Rotel collector (see otlp.py)."""
    import inspect

    if "otlp_endpoint" not in inspect.signature(sftrace.configure).parameters:
        return {"error": "sftrace.configure() has no otlp_endpoint option yet"}
    import otlp

    return otlp.measure(bench, repeats)


# --- memory (in a subprocess) ---------------------------------------------------------


def measure_memory(calls: int, load_calls: int) -> dict[str, Any]:
    results = {}
    for mode, count in (("sftrace", calls), ("bare", calls), ("load", load_calls)):
        completed = subprocess.run(
            [sys.executable, str(HERE / "memory_child.py"), "--calls", str(count), "--mode", mode],
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            raise SystemExit(f"memory measurement failed:\n{completed.stderr}")
        results[mode] = json.loads(completed.stdout.strip().splitlines()[-1])
    return results


# --- stepfork, side by side (optional) ------------------------------------------------

STEPFORK = "stepfork==0.2.1"
STEPFORK_VENV = Path(tempfile.gettempdir()) / "sftrace-bench-stepfork-0.2.1"


def measure_stepfork(lengths: list[int], repeats: int) -> dict[str, Any]:
    """Run the same workload through stepfork, installed in a throwaway venv under /tmp."""
    python = STEPFORK_VENV / "bin" / "python"
    if not python.exists():
        print(f"installing {STEPFORK} into {STEPFORK_VENV}...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(STEPFORK_VENV)], check=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", STEPFORK],
            capture_output=True,
            text=True,
            check=False,
        )
        if installed.returncode != 0:
            shutil.rmtree(STEPFORK_VENV, ignore_errors=True)
            return {"error": f"{STEPFORK} could not be installed: {installed.stderr.strip()}"}
    print("running the workload through stepfork...", file=sys.stderr, flush=True)
    completed = subprocess.run(
        [
            str(python),
            str(HERE / "stepfork_child.py"),
            "--lengths",
            ",".join(map(str, lengths)),
            "--repeats",
            str(repeats),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        return {"error": f"stepfork run failed: {completed.stderr.strip()[-2000:]}"}
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


# --- report -------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sftrace": sftrace.__version__,
        "sftrace_commit": commit,
        "opentelemetry_sdk": version("opentelemetry-sdk"),
        "orjson": version("orjson"),
    }


# Targets of issue 16 (ratios measured side by side in one run).
RECORD_TARGET = 1.15  # a recorded tool call against the durable floor (2c)
REPLAY_TARGET = 1.5  # frozen replay against the bare span
STEPFORK_REPLAY_TARGET = 3  # stepfork 0.2.1's frozen replay against sftrace's
FLOOR_MARGIN = 1.1  # where a target is out of reach: within 10% of the measured floor


@dataclass
class Row:
    name: str
    value: str
    ratio: str = ""
    cpu: str = ""
    target: str = ""
    ok: bool | None = None


def us(ns: float) -> str:
    return f"{ns / 1000:.2f} µs"


def mix_rows(
    s: Samples, lengths: list[int], compared: Callable[..., Row], flat: Callable[..., Row]
) -> list[Row]:
    """Rows 2m and 4m: the payload mix (payload_mix.py) against its own durable floor."""
    last = lengths[-1]
    rows = [
        Row(
            f"   2m. payload mix (71 KB result): 2c floor, per call @ {last:,}",
            us(s.median(f"mix_journal@{last}")),
            "",
            us(s.cpu(f"mix_journal@{last}")),
        )
    ]
    for n in lengths:
        rows.append(
            compared(
                f"4m. payload mix in record(), per call @ {n:,}",
                f"mix@{n}",
                f"mix_journal@{n}",
                "2m",
                RECORD_TARGET,
                f"record_mix_vs_journal@{n}",
            )
        )
    rows.append(
        compared(
            f"   2m. ... finished as a bundle (2d), per call @ {last:,}",
            f"mix_bundle@{last}",
            f"mix_journal@{last}",
            "2m",
            None,
            "floor_mix_bundle",
        )
    )
    for n in lengths:
        rows.append(
            compared(
                f"   ... against 2d (the bundle floor) @ {n:,}",
                f"mix@{n}",
                f"mix_bundle@{n}",
                "2d",
                FLOOR_MARGIN,
                f"record_mix_vs_bundle_floor@{n}",
            )
        )
    rows.append(flat("payload mix recording", "mix", "record_mix_flat"))
    return rows


def build_report(
    bench: Bench,
    memory: dict[str, Any] | None,
    otlp: dict[str, Any] | None,
    stepfork: dict[str, Any] | None,
    args: Any,
    redaction: dict[str, Any] | None = None,
    short_runs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    s = bench.samples
    lengths = bench.lengths
    first, last = lengths[0], lengths[-1]
    rows: list[Row] = []
    checks: dict[str, dict[str, Any]] = {}

    def check(key: str, value: float, limit: float, *, at_least: bool = False) -> bool:
        ok = value >= limit if at_least else value <= limit
        checks[key] = {"value": value, "limit": limit, "ok": ok}
        return ok

    def compared(
        name: str, key: str, base: str, base_label: str, target: float | None, check_key: str
    ) -> Row:
        """A row of ``key`` per call against ``base``: wall time (judged) and CPU time."""
        wall, cpu = s.median(key), s.cpu(key)
        ratio = wall / s.median(base)
        return Row(
            name,
            us(wall),
            f"{ratio:.2f}x {base_label}",
            f"{us(cpu)} = {cpu / s.cpu(base):.2f}x",
            f"<= {target}x" if target is not None else "",
            check(check_key, ratio, target) if target is not None else None,
        )

    def flat(name: str, key: str, check_key: str) -> Row:
        ratio = s.median(f"{key}@{last}") / s.median(f"{key}@{first}")
        cpu = s.cpu(f"{key}@{last}") / s.cpu(f"{key}@{first}")
        return Row(
            f"   {name} flat: {last:,} vs {first:,} calls",
            "",
            f"{ratio:.2f}x",
            f"{cpu:.2f}x",
            "<= 1.2x",
            check(check_key, ratio, 1.2),
        )

    floor, passthrough = s.median("floor"), s.median("passthrough")
    rows.append(Row("1. undecorated tool function (floor)", us(floor), "", us(s.cpu("floor"))))
    bare_last = s.median(f"bare@{last}")
    rows.append(
        Row(
            f"2. bare OTel span (baseline), per call @ {last:,}",
            us(bare_last),
            "",
            us(s.cpu(f"bare@{last}")),
        )
    )
    rows.append(
        compared(
            "   2b. + the 12 attributes sftrace sets",
            f"bare_attributes@{last}",
            f"bare@{last}",
            "bare",
            None,
            "floor_attributes",
        )
    )
    rows.append(
        compared(
            "   2c. + each span written to disk as it ends",
            f"bare_journal@{last}",
            f"bare@{last}",
            "bare",
            None,
            "floor_journal",
        )
    )
    rows.append(
        compared(
            "   2d. + finished as a bundle (ordered copy, its sha256, fsync)",
            f"bare_bundle@{last}",
            f"bare@{last}",
            "bare",
            None,
            "floor_bundle",
        )
    )
    over = passthrough - floor
    rows.append(
        Row(
            "3. @trace_tool outside record() (passthrough)",
            us(passthrough),
            f"+{over:.0f} ns over floor",
            f"+{s.cpu('passthrough') - s.cpu('floor'):.0f} ns",
            "<= +500 ns",
            check("passthrough_overhead_ns", over, 500),
        )
    )
    for n in lengths:
        rows.append(
            compared(
                f"4. @trace_tool in record(), per call @ {n:,}",
                f"record@{n}",
                f"bare_journal@{n}",
                "2c",
                RECORD_TARGET,
                f"record_vs_journal@{n}",
            )
        )
    for n in lengths:
        rows.append(
            compared(
                f"   ... against the bare span @ {n:,}",
                f"record@{n}",
                f"bare@{n}",
                "bare",
                None,
                f"record_vs_bare@{n}",
            )
        )
    for n in lengths:
        rows.append(
            compared(
                f"   ... against 2d (the bundle floor) @ {n:,}",
                f"record@{n}",
                f"bare_bundle@{n}",
                "2d",
                FLOOR_MARGIN,
                f"record_vs_bundle_floor@{n}",
            )
        )
    rows.append(
        compared(
            f"   ... with redaction off @ {last:,}",
            f"record_noredact@{last}",
            f"bare_journal@{last}",
            "2c",
            None,
            "record_noredact_vs_journal",
        )
    )
    rows.append(flat("recording", "record", "record_flat"))
    if f"mix@{last}" in s.values:
        rows.extend(mix_rows(s, lengths, compared, flat))
    for n in lengths:
        rows.append(
            compared(
                f"5. llm_request in record(), per call @ {n:,}",
                f"record_llm@{n}",
                f"bare_llm@{n}",
                "bare",
                1.3,
                f"record_llm_vs_bare@{n}",
            )
        )
    rows.append(flat("llm recording", "record_llm", "record_llm_flat"))
    for match in ("strict", "unordered"):
        for n in lengths:
            rows.append(
                compared(
                    f"6. frozen replay ({match}), per call @ {n:,}",
                    f"replay_{match}@{n}",
                    f"bare@{n}",
                    "bare",
                    REPLAY_TARGET,
                    f"replay_{match}_vs_bare@{n}",
                )
            )
        rows.append(flat(f"replay ({match})", f"replay_{match}", f"replay_{match}_flat"))
        if match == "strict":
            rows.append(
                compared(
                    f"   ... strict, with redaction off @ {last:,}",
                    f"replay_noredact@{last}",
                    f"bare@{last}",
                    "bare",
                    None,
                    "replay_noredact_vs_bare",
                )
            )
            rows.append(
                compared(
                    f"   ... against 2b (span with the same attributes) @ {last:,}",
                    f"replay_strict@{last}",
                    f"bare_attributes@{last}",
                    "2b",
                    None,
                    "replay_vs_attributes",
                )
            )
            rows.append(
                compared(
                    f"   6b. floor: 2b + parse the recorded output @ {last:,}",
                    f"bare_parse@{last}",
                    f"bare@{last}",
                    "bare",
                    None,
                    "replay_floor_vs_bare",
                )
            )
        rows.append(
            compared(
                f"   ... {match} against 6b (the replay floor) @ {last:,}",
                f"replay_{match}@{last}",
                f"bare_parse@{last}",
                "6b",
                FLOOR_MARGIN,
                f"replay_{match}_vs_floor",
            )
        )
    for n in lengths:
        rows.append(
            compared(
                f"7. load_bundle, per span @ {n:,} calls",
                f"load@{n}",
                f"load_floor@{n}",
                "7b",
                1.2 if n == last else None,
                "load_vs_floor" if n == last else f"load_vs_floor@{n}",
            )
        )
    rows.append(
        Row(
            f"   7b. floor: read the file, parse each line @ {last:,}",
            us(s.median(f"load_floor@{last}")),
            "",
            us(s.cpu(f"load_floor@{last}")),
        )
    )
    rows.append(
        compared(
            "   7e. floor in Python: 7b + a dict of each line's attributes",
            f"load_python_floor@{last}",
            f"load_floor@{last}",
            "7b",
            None,
            "load_python_floor_vs_floor",
        )
    )
    rows.append(
        compared(
            f"   ... load_bundle against 7e @ {last:,}",
            f"load@{last}",
            f"load_python_floor@{last}",
            "7e",
            None,
            "load_vs_python_floor",
        )
    )
    rows.append(
        compared(
            "   7g. floor in Python: 7b + a dict of attributes and a Call per call",
            f"load_call_floor@{last}",
            f"load_floor@{last}",
            "7b",
            None,
            "load_call_floor_vs_floor",
        )
    )
    rows.append(
        compared(
            f"   ... load_bundle against 7g @ {last:,}",
            f"load@{last}",
            f"load_call_floor@{last}",
            "7g",
            None,
            "load_vs_call_floor",
        )
    )
    if f"load_typed_floor@{last}" in s.values:
        rows.append(
            compared(
                "   7f. msgspec floor: read, decode each line into typed structs",
                f"load_typed_floor@{last}",
                f"load_floor@{last}",
                "7b",
                None,
                "load_typed_floor_vs_floor",
            )
        )
    rows.append(
        compared(
            f"   7c. load_bundle(eager=True) @ {last:,}",
            f"load_eager@{last}",
            f"load_eager_floor@{last}",
            "7d",
            None,
            "load_eager_vs_floor",
        )
    )
    rows.append(
        Row(
            "   7d. floor: 7b + parse every input and output",
            us(s.median(f"load_eager_floor@{last}")),
            "",
            us(s.cpu(f"load_eager_floor@{last}")),
        )
    )
    size = bench.sizes[last]
    rows.append(
        Row(
            f"   bundle size per call @ {last:,}",
            f"{size['bytes_per_call']:.0f} B",
            f"{size['size_vs_floor']:.2f}x floor, {size['size_ratio']:.2f}x raw JSON",
            "",
            "<= 1.1x floor",
            check("size_vs_floor", size["size_vs_floor"], 1.1),
        )
    )
    rows.append(
        Row(
            "   envelope floor per call (OTLP/JSON)",
            f"{size['floor_bytes_per_call']:.0f} B",
            f"{size['floor_ratio']:.2f}x raw JSON",
            "",
        )
    )
    if otlp is not None:
        if "error" in otlp:
            rows.append(Row("8. OTLP export to a local collector", "not run", otlp["error"]))
        else:
            rows.extend(Row(**row) for row in otlp["rows"])
            checks.update(otlp["checks"])
    if memory is not None:
        grown = memory["sftrace"]["growth_mb"]
        rows.append(
            Row(
                f"9. peak memory growth, {memory['sftrace']['calls']:,}-call recording",
                f"{grown:.1f} MB",
                f"bare spans: {memory['bare']['growth_mb']:.1f} MB",
                "",
                "<= 64 MB",
                check("memory_growth_mb", grown, 64),
            )
        )
        load = memory["load"]
        rows.append(
            Row(
                f"   9b. peak memory of load_bundle @ {load['calls']:,} calls",
                f"{load['growth_mb']:.1f} MB",
                f"{load['ratio']:.2f}x spans.jsonl ({load['spans_bytes'] / 2**20:.1f} MB)",
                "",
                "<= 3x file",
                check("load_memory_ratio", load["ratio"], 3),
            )
        )
    if redaction is not None:
        rows.extend(Row(**row) for row in redaction["rows"])
        checks.update(redaction["checks"])
    if short_runs is not None:
        rows.extend(Row(**row) for row in short_runs["rows"])
    if stepfork is not None:
        if "error" in stepfork:
            rows.append(Row("   stepfork 0.2.1 side by side", "not run", stepfork["error"][:60]))
        else:
            medians = stepfork["medians_ns"]
            for what, ours in (("record", "record"), ("replay", "replay_strict")):
                for n in bench.stepfork_lengths:
                    theirs = medians[f"{what}@{n}"]
                    speedup = theirs / s.median(f"{ours}@{n}")
                    targeted = what == "replay"
                    rows.append(
                        Row(
                            f"   stepfork {stepfork['stepfork']} {what}, per call @ {n:,}",
                            us(theirs),
                            f"{speedup:.1f}x sftrace",
                            "",
                            f">= {STEPFORK_REPLAY_TARGET}x" if targeted else "",
                            check(
                                f"stepfork_replay_vs_sftrace@{n}",
                                speedup,
                                STEPFORK_REPLAY_TARGET,
                                at_least=True,
                            )
                            if targeted
                            else None,
                        )
                    )
            n = bench.stepfork_lengths[-1]
            rows.append(
                Row(
                    f"   stepfork {stepfork['stepfork']} load, per call @ {n:,}",
                    us(medians[f"load_per_call@{n}"]),
                    f"{medians[f'load_per_call@{n}'] / s.median(f'load@{n}'):.1f}x sftrace",
                )
            )
    return {
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "rounds": args.repeats,
        "lengths": lengths,
        "min_calls_per_sample": bench.min_calls,
        "medians_ns": {name: s.median(name) for name in s.values},
        "cpu_medians_ns": {name: s.cpu(name) for name in s.cpu_values},
        "samples_ns": s.values,
        "cpu_samples_ns": s.cpu_values,
        "sizes": {str(n): v for n, v in bench.sizes.items()},
        "memory": memory,
        "otlp": otlp,
        "stepfork": stepfork,
        "redaction": redaction,
        "short_runs": short_runs,
        "checks": checks,
        "table": [row.__dict__ for row in rows],
    }


COLUMNS = (
    ("name", "", "<"),
    ("value", "wall/call", ">"),
    ("ratio", "wall ratio", "<"),
    ("cpu", "CPU/call = ratio", "<"),
    ("target", "target", "<"),
)


def table_lines(report: dict[str, Any]) -> list[str]:
    rows = report["table"]
    widths = [max(len(title), *(len(str(r[key])) for r in rows)) for key, title, _ in COLUMNS]
    lines = [
        "  ".join(
            f"{title:{align}{w}}" for (_, title, align), w in zip(COLUMNS, widths, strict=True)
        )
    ]
    for r in rows:
        mark = "" if r["ok"] is None else ("ok" if r["ok"] else "MISSED")
        cells = [f"{r[key]:{align}{w}}" for (key, _, align), w in zip(COLUMNS, widths, strict=True)]
        lines.append("  ".join(cells) + f"  {mark}")
    return lines


def print_table(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(
        f"\nsftrace {m['sftrace']} ({m['sftrace_commit']}) on {m['cpus']} x {m['cpu_model']}, "
        f"Python {m['python']}; medians of {report['rounds']} rounds\n"
    )
    print("\n".join(table_lines(report)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="runs of 200 and 2,000 calls, 3 rounds"
    )
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5; quick 3)")
    parser.add_argument(
        "--json", type=Path, default=HERE / "results.json", help="where to write JSON"
    )
    parser.add_argument(
        "--lengths", default=None, help="run lengths, e.g. 200,2000,20000 (the default)"
    )
    parser.add_argument(
        "--min-calls",
        type=int,
        default=None,
        help="repeat shorter runs until each sample has this many calls (default 10,000)",
    )
    parser.add_argument("--memory-calls", type=int, default=100_000)
    parser.add_argument(
        "--load-memory-calls",
        type=int,
        default=20_000,
        help="calls of the bundle whose loading row 9b measures",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    parser.add_argument("--no-otlp", action="store_true", help="skip the OTLP measurement")
    parser.add_argument(
        "--no-payload-mix", action="store_true", help="skip the payload-mix rows (2m, 4m)"
    )
    parser.add_argument(
        "--no-redaction", action="store_true", help="skip the redaction-per-KB measurement"
    )
    parser.add_argument(
        "--no-short-runs", action="store_true", help="skip row 11 (short runs, fsync on/off)"
    )
    parser.add_argument(
        "--stepfork",
        action="store_true",
        help=f"also run the workload through {STEPFORK} (installed into a venv under /tmp)",
    )
    args = parser.parse_args(argv)
    lengths = [200, 2000] if args.quick else [200, 2000, 20000]
    if args.lengths:
        lengths = sorted({int(n) for n in args.lengths.split(",")})
    args.repeats = args.repeats or (3 if args.quick else 5)
    if args.min_calls is None:
        args.min_calls = 2000 if args.quick else 10_000
    with tempfile.TemporaryDirectory(prefix="sftrace-bench-") as tmp:
        passthrough_calls = min(5000 if args.quick else 20000, 10 * lengths[-1])
        bench = Bench(lengths, passthrough_calls, args.min_calls, Path(tmp))
        bench.payload_mix = not args.no_payload_mix
        bench.prepare()
        bench.round()  # warm-up, discarded
        bench.samples = Samples()
        for number in range(args.repeats):
            print(f"round {number + 1}/{args.repeats}...", file=sys.stderr, flush=True)
            bench.round()
        otlp = None if args.no_otlp else measure_otlp(bench, args.repeats)
        bench.bundles.clear()
        memory = (
            None if args.no_memory else measure_memory(args.memory_calls, args.load_memory_calls)
        )
        redaction = None
        if not args.no_redaction:
            redaction = measure_redaction(args.repeats, quick=args.quick)
        short = None
        if not args.no_short_runs:
            import short_runs

            short = short_runs.measure(args.repeats, runs_per_block=40 if args.quick else 100)
        stepfork = None
        if args.stepfork:
            stepfork = measure_stepfork(bench.stepfork_lengths, min(args.repeats, 3))
        report = build_report(bench, memory, otlp, stepfork, args, redaction, short)
    print_table(report)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
