"""Calls made from threads and executors belong to the run that started the work.

Runs overlap for sure (barriers): every run is open while every other run makes its
calls, all through one module-level pool whose threads were started before any run.
A call that carries no run's context is never answered by a replay, and a recording
adopts it only when it is the one run of the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context

from sftrace import load_bundle, record, replay, trace_tool
from sftrace._record import run as run_module
from sftrace._record import threads

STEPS = 3
EXECUTED: list[tuple[int, int]] = []
_executed_lock = threading.Lock()

# Long-lived, shared by every run; warmed up so its threads exist before any run starts.
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="shared")
list(POOL.map(abs, range(8)))


@trace_tool
def lookup(who: int, step: int) -> dict[str, int]:
    with _executed_lock:
        EXECUTED.append((who, step))
    return {"who": who, "step": step}


def _via_pool(who: int, step: int) -> Any:
    return POOL.submit(lookup, who, step).result()


def _via_run_in_executor(who: int, step: int) -> Any:
    async def main() -> Any:
        return await asyncio.get_running_loop().run_in_executor(POOL, lookup, who, step)

    return asyncio.run(main())


def _via_raw_thread(who: int, step: int) -> Any:
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(lookup(who, step)))
    worker.start()
    worker.join()
    return results[0]


def _via_to_thread(who: int, step: int) -> Any:
    return asyncio.run(asyncio.to_thread(lookup, who, step))


class _Worker(threading.Thread):
    """A thread subclass that overrides run(): the context reaches it too."""

    def __init__(self, who: int, step: int) -> None:
        super().__init__()
        self.args = (who, step)
        self.result: Any = None

    def run(self) -> None:
        self.result = lookup(*self.args)


def _via_thread_subclass(who: int, step: int) -> Any:
    worker = _Worker(who, step)
    worker.start()
    worker.join()
    return worker.result


SUBMITTERS: dict[str, Callable[[int, int], Any]] = {
    "pool": _via_pool,
    "run_in_executor": _via_run_in_executor,
    "raw_thread": _via_raw_thread,
    "to_thread": _via_to_thread,
    "thread_subclass": _via_thread_subclass,
}


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXECUTED.clear()


def _in_threads(count: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            target(index)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []


@pytest.mark.parametrize("runs", [2, 8])
@pytest.mark.parametrize("how", sorted(SUBMITTERS))
def test_concurrent_runs_sharing_a_pool_each_keep_their_own_calls(
    tmp_path: Path, runs: int, how: str
) -> None:
    """N runs at once, all submitting work to one shared pool (or loop executor, raw
    thread, to_thread): each bundle holds exactly its own calls, under its run span."""
    submit = SUBMITTERS[how]
    barrier = threading.Barrier(runs)

    def one_run(who: int) -> None:
        with record(f"agent-{who}", output=tmp_path / f"{who}.sftrace") as session:
            barrier.wait()  # every run is open before any call is made
            results = [submit(who, step) for step in range(STEPS)]
            barrier.wait()  # and none ends before every run made its calls
            session.set_output(len(results))
        assert results == [{"who": who, "step": step} for step in range(STEPS)]

    _in_threads(runs, one_run)
    for who in range(runs):
        bundle = load_bundle(tmp_path / f"{who}.sftrace", verify_integrity=True)
        assert [(c.input["who"], c.input["step"]) for c in bundle.calls] == [
            (who, step) for step in range(STEPS)
        ]
        assert {c.parent_span_id for c in bundle.calls} == {bundle.run_span["spanId"]}
    assert len(EXECUTED) == runs * STEPS


@pytest.mark.parametrize("how", sorted(SUBMITTERS))
def test_production_calls_beside_a_replay_run_for_real(tmp_path: Path, how: str) -> None:
    """A replay in one thread never answers the production calls of another thread
    (direct, pooled or threaded, outside any run), nor records them."""
    with record("agent", output=tmp_path / "r.sftrace"):
        lookup(0, 0)
    EXECUTED.clear()
    submit = SUBMITTERS[how]
    barrier = threading.Barrier(2)
    sessions: list[Any] = []

    def replaying() -> None:
        with replay(tmp_path / "r.sftrace") as session:
            barrier.wait()  # the replay is active while production runs
            barrier.wait()
            assert lookup(0, 0) == {"who": 0, "step": 0}
        sessions.append(session)

    def production() -> None:
        barrier.wait()
        try:
            assert lookup(7, 1) == {"who": 7, "step": 1}
            assert submit(7, 2) == {"who": 7, "step": 2}
        finally:
            barrier.wait()

    def both(index: int) -> None:
        (replaying if index == 0 else production)()

    _in_threads(2, both)
    assert sorted(EXECUTED) == [(7, 1), (7, 2)]  # production ran; the replay ran nothing
    (session,) = sessions
    assert [m.action for m in session.matched] == ["substituted"]
    assert session.unused == []


def test_production_recording_beside_a_replay_records_its_own_calls(tmp_path: Path) -> None:
    """A recording in another thread than a replay records its calls, pooled ones too."""
    with record("agent", output=tmp_path / "r.sftrace"):
        lookup(0, 0)
    EXECUTED.clear()
    barrier = threading.Barrier(2)

    def both(index: int) -> None:
        if index == 0:
            with replay(tmp_path / "r.sftrace"):
                barrier.wait()
                barrier.wait()
                lookup(0, 0)
        else:
            with record("prod", output=tmp_path / "prod.sftrace"):
                barrier.wait()
                try:
                    _via_pool(5, 0)
                    _via_raw_thread(5, 1)
                finally:
                    barrier.wait()

    _in_threads(2, both)
    bundle = load_bundle(tmp_path / "prod.sftrace")
    assert [(c.input["who"], c.input["step"]) for c in bundle.calls] == [(5, 0), (5, 1)]
    assert sorted(EXECUTED) == [(5, 0), (5, 1)]


class _Consumer:
    """A long-lived thread running work handed over a queue: it carries no run's context
    (a queue is not a way sftrace knows to carry it)."""

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self.queue = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            func, future = self.queue.get()
            try:
                future.set_result(func())
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, func: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.queue.put((func, future))
        return future.result()


CONSUMER = _Consumer()


def _contextless(who: int, step: int) -> None:
    CONSUMER.call(lambda: lookup(who, step))


def test_a_single_recording_adopts_contextless_calls(tmp_path: Path) -> None:
    """With exactly one recording in the process, a call without context belongs to it."""
    with record("agent", output=tmp_path / "one.sftrace") as session:
        _contextless(1, 0)
        session.set_output("done")
    bundle = load_bundle(tmp_path / "one.sftrace")
    assert [c.input for c in bundle.calls] == [{"who": 1, "step": 0}]
    assert {c.parent_span_id for c in bundle.calls} == {bundle.run_span["spanId"]}


def test_contextless_calls_go_nowhere_when_runs_are_ambiguous(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two recordings, or a recording and a replay: a call without context runs for real,
    is recorded by neither, and one warning says so."""
    with record("agent", output=tmp_path / "r.sftrace"):
        lookup(0, 0)
    EXECUTED.clear()
    threads.reset_warning()
    caplog.set_level(logging.WARNING, logger="sftrace")
    with record("a", output=tmp_path / "a.sftrace"), record("b", output=tmp_path / "b.sftrace"):
        _contextless(1, 0)
        _contextless(1, 1)
    with record("c", output=tmp_path / "c.sftrace"), replay(tmp_path / "r.sftrace") as session:
        _contextless(2, 0)
        lookup(0, 0)
    assert sorted(EXECUTED) == [(1, 0), (1, 1), (2, 0)]
    for name in "abc":
        assert load_bundle(tmp_path / f"{name}.sftrace").calls == []
    assert [m.action for m in session.matched] == ["substituted"]
    warnings = [r for r in caplog.records if "no run's context" in r.getMessage()]
    assert len(warnings) == 1, caplog.records


def test_propagation_is_idempotent_and_reversible() -> None:
    """Installing twice wraps once; uninstalling restores the original methods."""
    pool_class, thread_class = concurrent.futures.ThreadPoolExecutor, threading.Thread
    threads.install()
    wrapped = (pool_class.submit, thread_class.start)
    threads.install()
    assert (pool_class.submit, thread_class.start) == wrapped
    threads.uninstall()
    try:
        assert not threads.installed()
        assert pool_class.submit.__module__ == "concurrent.futures.thread"
        assert thread_class.start.__module__ == "threading"
    finally:
        threads.install()
    assert (pool_class.submit, thread_class.start) == wrapped


def test_propagation_never_changes_what_the_work_returns_or_raises(tmp_path: Path) -> None:
    """Inside a run, pooled work and threads return and raise exactly as without sftrace."""

    def boom() -> None:
        raise KeyError("k")

    marker = object()
    with record("agent", output=tmp_path / "x.sftrace"):
        assert POOL.submit(lambda: marker).result() is marker
        future = POOL.submit(boom)
        with pytest.raises(KeyError, match="k"):
            future.result()
        timer = threading.Timer(0, lambda: None)
        timer.start()
        timer.join()
        assert "run" not in vars(timer)  # the per-thread wrapper is gone after it ran


def test_a_pool_started_inside_a_run_does_not_keep_it(tmp_path: Path) -> None:
    """Worker threads a run's submission started carry no run into later work."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        with record("agent", output=tmp_path / "p.sftrace"):
            assert pool.submit(run_module.current_run).result() is not None
        assert pool.submit(otel_context.get_value, threads.RUN_KEY).result() is None
    finally:
        pool.shutdown()


def test_starting_a_thread_twice_fails_as_without_sftrace(tmp_path: Path) -> None:
    """A failed start() raises the same error and leaves the thread as it was."""
    worker = threading.Thread(target=lambda: None)
    with record("agent", output=tmp_path / "t.sftrace"):
        worker.start()
        worker.join()
        with pytest.raises(RuntimeError, match="threads can only be started once"):
            worker.start()
    assert "run" not in vars(worker)


def test_an_asyncio_task_outside_the_run_is_never_adopted(tmp_path: Path) -> None:
    """A web server: while one request records, another request's task (a health probe,
    a background job started by an earlier request) makes a call. It carries no run, and
    is not the recording's: adopting it put one request's calls into another's bundle,
    which then replayed as diverged."""

    async def main() -> None:
        recording = asyncio.Event()
        finish = asyncio.Event()

        async def request_a() -> None:
            async with record("svc", output=tmp_path / "a.sftrace") as session:
                lookup(1, 0)
                recording.set()
                await finish.wait()
                lookup(1, 1)
                session.set_output("done")

        async def health_probe() -> None:
            await recording.wait()
            lookup(99, 0)  # this task was started outside any run
            finish.set()

        await asyncio.gather(request_a(), health_probe())

    threads.reset_warning()
    asyncio.run(main())
    assert [c.input for c in load_bundle(tmp_path / "a.sftrace").calls] == [
        {"who": 1, "step": 0},
        {"who": 1, "step": 1},
    ]
