"""An agent whose three tool calls run in a shared thread pool, in the order ``ORDER``
fixes (so a test can make a replay reach them in another order, as scheduling may), for
tests/test_thread_divergence.py. The entrypoint submits and waits on them as a, b, c."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

from sftrace import llm_request, trace_tool

POOL = concurrent.futures.ThreadPoolExecutor(max_workers=3)
ORDER = ("a", "b", "c")


@trace_tool(name="fetch")
def fetch(key: str) -> str:
    return key.upper()


def run(task: str) -> dict[str, Any]:
    done = {key: threading.Event() for key in ORDER}

    def work(key: str) -> str:
        position = ORDER.index(key)
        if position:  # the timeout is only a guard: the call before always sets it
            done[ORDER[position - 1]].wait(timeout=10)
        try:
            return fetch(key)
        finally:
            done[key].set()

    futures = [POOL.submit(work, key) for key in ("a", "b", "c")]
    values = [future.result() for future in futures]
    summary = llm_request(
        provider="openai", model="m", input={"task": task, "values": values}, call=lambda: "ok"
    )
    return {"values": values, "summary": summary}
