"""Runs for the HTML report's tests: hostile strings, very large runs, and the browser.

The browser is the distribution's Chromium driven by Playwright (its own browser
download cannot be fetched on these machines); ``.ci/run`` installs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from sftrace import llm_request, record, trace_tool
from sftrace._bundle.manifest import Manifest, Totals
from sftrace._bundle.reader import Bundle
from sftrace._model.calls import Call

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Recorded strings that would run script or add elements if a page treated them as HTML.
HOSTILE_NAME = "</script><script>alert(1)</script>"
HOSTILE_OUTPUT = '<img src=x onerror="window.__pwned=1">'
HOSTILE_ERROR = "<script>window.__pwned=2</script>\u2028</script><b>bold</b>"
HOSTILE_TEXT = '<svg onload="window.__pwned=3"></svg> & \u2029 ]]> <!-- -->'


def record_hostile(path: Path) -> Path:
    """A run whose agent, tool names, inputs, outputs and errors are markup and script."""

    @trace_tool(name=HOSTILE_NAME)
    def hostile_tool(query: str) -> dict[str, Any]:
        return {"html": HOSTILE_OUTPUT, HOSTILE_TEXT: [HOSTILE_NAME]}

    @trace_tool(name="fails")
    def failing(query: str) -> None:
        raise ValueError(HOSTILE_ERROR)

    with (
        contextlib.suppress(RuntimeError),
        record(HOSTILE_NAME, output=path, run_input={"q": HOSTILE_TEXT}) as session,
    ):
        hostile_tool(HOSTILE_OUTPUT)
        with contextlib.suppress(ValueError):
            failing(HOSTILE_NAME)
        llm_request(
            provider="<b>p</b>",
            model=HOSTILE_NAME,
            input={"messages": [{"role": HOSTILE_NAME, "content": HOSTILE_OUTPUT}]},
            call=lambda: {"choices": [{"message": {"role": "assistant", "content": HOSTILE_TEXT}}]},
        )
        session.record_state_change(key=HOSTILE_NAME, before=HOSTILE_OUTPUT, after=HOSTILE_TEXT)
        raise RuntimeError(HOSTILE_ERROR)
    return path


def big_bundle(calls: int, *, output_bytes: int = 0) -> Bundle:
    """A loaded run of ``calls`` tool calls, built in memory (a recording of 100,000 calls
    takes minutes; the page only reads what a loaded bundle holds)."""
    run_id = "a" * 16
    step_ns = 1_000_000
    run_span = {
        "traceId": "b" * 32,
        "spanId": run_id,
        "name": "invoke_agent big-agent",
        "startTimeUnixNano": str(step_ns),
        "endTimeUnixNano": str(step_ns * (calls + 2)),
        "attributes": [],
    }
    big_output = orjson.dumps({"blob": "x" * output_bytes}).decode() if output_bytes else None
    built = [
        Call(
            seq=i,
            kind="tool",
            name=f"step_{i % 7}",
            provider=None,
            input_json=f'{{"i":{i}}}',
            output_json=big_output if big_output and i == calls else f'{{"ok":true,"i":{i}}}',
            error=None,
            policy="frozen",
            span_id=f"{i:016x}",
            parent_span_id=run_id,
            start_time_ns=step_ns * (i + 1),
            end_time_ns=step_ns * (i + 1) + step_ns // 2,
        )
        for i in range(1, calls + 1)
    ]
    manifest = Manifest(
        format="sftrace-bundle",
        format_version=1,
        run_id="big-run",
        trace_id="b" * 32,
        agent_name="big-agent",
        created_at="2026-01-01T00:00:00Z",
        status="completed",
        totals=Totals(spans=calls + 1, tool_calls=calls, duration_ms=calls + 1.0),
    )
    return Bundle(
        path=None,
        manifest=manifest,
        spans=[run_span],
        calls=built,
        run_input=None,
        output=None,
        has_run_input=False,
        has_output=False,
        state_changes=[],
        redactions=[],
    )


# --- the browser -------------------------------------------------------------------------


@dataclass
class Loaded:
    """A page opened from disk, with every request it made and every script error."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def network(self) -> list[str]:
        """Requests other than the page's own file:// load."""
        return [url for url in self.requests if url != self.url]

    def dom_nodes(self) -> int:
        count: int = self.page.evaluate("document.getElementsByTagName('*').length")
        return count


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium` "
            f"(.ci/run does)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def open_page(
    browser: Any, path: Path, *, width: int = 1400, height: int = 900
) -> Iterator[Loaded]:
    """Open the page at ``path`` and wait until its script has built it."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(10_000)
    page.set_default_navigation_timeout(120_000)
    loaded = Loaded(page, path.resolve().as_uri())
    page.on("request", lambda request: loaded.requests.append(request.url))
    page.on("pageerror", lambda error: loaded.errors.append(str(error)))

    def dismiss(dialog: Any) -> None:
        loaded.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    try:
        page.goto(loaded.url)
        page.wait_for_selector("html[data-ready='1']", timeout=60_000)
        yield loaded
    finally:
        page.close()


def write_page(path: Path, page: str) -> Path:
    path.write_text(page, encoding="utf-8")
    return path
