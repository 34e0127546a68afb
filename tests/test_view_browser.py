"""The HTML report in a real browser (the distribution's Chromium, through Playwright):
pages load from disk, make no network request, show a call's values when it is clicked,
run no recorded script, and stay small in the DOM however large the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import sftrace
from sftrace._view.render import render_html
from view_helpers import (
    HOSTILE_NAME,
    HOSTILE_OUTPUT,
    big_bundle,
    chromium,
    open_page,
    record_hostile,
    write_page,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
OUTSIDE = EXAMPLES / "refund_agent" / "bundles" / "refund_outside_window.sftrace"
INSIDE = EXAMPLES / "refund_agent" / "bundles" / "refund_inside_window.sftrace"
# The page shows a screenful of rows: far fewer nodes than a run of 100,000 calls.
MAX_NODES_AT_LOAD = 1500

# Each test drives Chromium for a few seconds: CI runs them (`.ci/run` installs Chromium).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_bundle_view_shows_the_clicked_calls_input_and_output(browser: Any, tmp_path: Path) -> None:
    path = write_page(tmp_path / "run.html", render_html(OUTSIDE))
    with open_page(browser, path) as loaded:
        page = loaded.page
        assert "refund-agent" in page.locator("header").inner_text()
        assert page.locator(".vp .row").count() == 4
        page.locator(".vp .row", has_text="lookup_order").click()
        detail = page.locator(".right")
        assert detail.locator("h2").inner_text().endswith("lookup_order")
        text = detail.inner_text()
        assert '"order_id": "A-1001"' in text  # the input
        assert '"delivered_days_ago": 45' in text  # the output
        page.locator(".vp .row", has_text="support-1").click()
        transcript = detail.locator(".chat").inner_text()
        assert "My headphones stopped working" in transcript
        assert loaded.errors == []
        assert loaded.network() == []


def test_diff_view_highlights_the_paths_that_differ(browser: Any, tmp_path: Path) -> None:
    path = write_page(tmp_path / "diff.html", render_html(INSIDE, OUTSIDE))
    with open_page(browser, path) as loaded:
        page = loaded.page
        assert page.locator("header .badge").first.inner_text() == "FAIL"
        page.locator(".vp .row", has_text="support-1").first.click()
        detail = page.locator(".right")
        assert "CALL_INPUT_CHANGED" in detail.inner_text()
        marked = detail.locator(".m-diff > .jl")
        assert marked.count() >= 4  # the same paths, on both sides
        assert "order_id" in marked.all_inner_texts()[0] or any(
            "order_id" in text for text in marked.all_inner_texts()
        )
        assert loaded.errors == []
        assert loaded.network() == []


def test_hostile_strings_run_no_script_and_add_no_element(browser: Any, tmp_path: Path) -> None:
    bundle = record_hostile(tmp_path / "hostile.sftrace")
    for name, page_text in (("run", render_html(bundle)), ("diff", render_html(bundle, bundle))):
        path = write_page(tmp_path / f"{name}.html", page_text)
        with open_page(browser, path) as loaded:
            page = loaded.page
            for row in range(page.locator(".vp .row").count()):
                page.locator(".vp .row").nth(row).click()
                foldable = page.locator(".right .jl.jx")
                if foldable.count():  # fold and unfold a value
                    foldable.first.click()
                    foldable.first.click()
            assert page.evaluate("window.__pwned") is None
            assert loaded.dialogs == []
            assert page.locator("img, svg, iframe, object, embed").count() == 0
            assert page.locator("b", has_text="bold").count() == 0
            handlers = (
                "[...document.querySelectorAll('*')]"
                ".filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length"
            )
            assert page.evaluate(handlers) == 0
            assert page.evaluate("document.scripts.length") == 3
            assert HOSTILE_NAME in page.locator("body").inner_text()
            assert loaded.errors == []
            assert loaded.network() == []
    # the value itself is shown as text
    path = write_page(tmp_path / "values.html", render_html(bundle))
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator(".vp .row", has=page.locator(".k-tool"), has_text=HOSTILE_NAME).click()
        assert HOSTILE_OUTPUT.replace('"', '\\"') in page.locator(".right").inner_text()


def test_bidi_overrides_are_shown_as_escapes_not_obeyed(browser: Any, tmp_path: Path) -> None:
    """A file name "invoice\u202egpj.exe" must not read as a .jpg: format characters are
    shown as escapes in values, long texts and names, as the CLI shows them."""

    @sftrace.trace_tool(name="attach\u202efdp.exe")
    def attach(name: str) -> str:
        return "invoice\u202egpj.exe"

    bundle = tmp_path / "bidi.sftrace"
    with sftrace.record("bidi", output=bundle):
        attach("report\u2066x\u2069.pdf")
    path = write_page(tmp_path / "bidi.html", render_html(bundle))
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator(".vp .row", has=page.locator(".k-tool")).click()
        text = page.locator("body").inner_text()
        assert "\u202e" not in text  # none of them obeyed
        assert "\u2066" not in text
        assert '"invoice\\u202egpj.exe"' in text
        assert "report\\u2066x\\u2069.pdf" in text
        assert "attach\\u202efdp.exe" in text
        assert loaded.errors == []


def test_a_one_megabyte_output_is_collapsed_until_asked(browser: Any, tmp_path: Path) -> None:
    bundle = big_bundle(3, output_bytes=1_000_000)
    path = write_page(tmp_path / "large.html", render_html(bundle))
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator(".vp .row").last.click()
        output = page.locator(".right .sec", has_text="Output")
        assert len(output.inner_text()) < 2000
        output.locator("button.more").click()
        assert output.evaluate("node => node.textContent.length") > 1_000_000
        assert loaded.dom_nodes() < MAX_NODES_AT_LOAD
        assert loaded.errors == []


def test_a_run_of_100000_calls_renders_only_what_is_in_view(
    browser: Any, tmp_path: Path, record_property: Any
) -> None:
    """The timeline is virtual: the DOM at load holds a screenful of rows, and any call
    can still be reached (scrolled to, filtered, clicked)."""
    path = write_page(tmp_path / "big.html", render_html(big_bundle(100_000)))
    with open_page(browser, path) as loaded:
        page = loaded.page
        nodes = loaded.dom_nodes()
        record_property("dom_nodes_at_load", nodes)
        rows_in_dom = page.locator(".vp .row").count()
        assert rows_in_dom < 80
        assert nodes < MAX_NODES_AT_LOAD
        page.locator(".vp").evaluate("node => { node.scrollTop = node.scrollHeight; }")
        # (the page's Content-Security-Policy forbids eval, so no wait_for_function)
        page.wait_for_selector('.vp .row[data-index="100000"]')
        page.locator('.vp .row[data-index="100000"]').click()
        assert '"i": 100000' in page.locator(".right").inner_text()
        page.locator(".tools input").fill("step_3")
        expect(page.locator(".tools .count")).to_have_text("14286 / 100001")
        assert loaded.dom_nodes() < MAX_NODES_AT_LOAD
        assert loaded.errors == []
        assert loaded.network() == []


def test_replay_view_shows_each_calls_action(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES / "refund_agent"))
    result = sftrace.replay_run(OUTSIDE, "refund_agent_fixed:handle")
    path = write_page(tmp_path / "replay.html", render_html(result))
    with open_page(browser, path) as loaded:
        page = loaded.page
        badges = page.locator(".vp .row > .badge").all_inner_texts()
        assert badges == ["substituted · exact", "substituted · exact", "unused"]
        page.locator(".vp .row", has_text="lookup_order").click()
        replayed = page.locator(".right .cols > div").nth(1)
        assert "substituted" in replayed.locator("h2").inner_text()
        assert '"order_id": "A-1001"' in replayed.inner_text()
        assert loaded.errors == []
        assert loaded.network() == []


def test_suite_index_links_to_each_case_page(browser: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sftrace._cli.main import cli
    from sftrace._cli.regress import register

    register(cli)
    report = tmp_path / "report"
    ran = CliRunner().invoke(cli, ["test", str(EXAMPLES / "refund_agent"), "--html", str(report)])
    assert ran.exit_code == 0, ran.output
    with open_page(browser, report / "index.html") as loaded:
        page = loaded.page
        links = page.locator("table.cases a")
        assert links.count() == 3  # refunds (2 cases) and policy_check (1)
        assert loaded.network() == []
        links.first.click()
        page.wait_for_selector("html[data-ready='1']")
        assert page.url.startswith((report.resolve()).as_uri() + "/001-")
        assert "refund outside the 30-day window" in page.locator("header").inner_text()
        page.locator(".vp .row", has_text="support-1").click()
        assert "My headphones stopped working" in page.locator(".right").inner_text()
        assert all(url.startswith(report.resolve().as_uri()) for url in loaded.requests)
        assert loaded.errors == []


def test_notebook_display_renders_inside_its_frame(browser: Any, tmp_path: Path) -> None:
    """A Bundle's _repr_html_ (what Jupyter shows) is the page in a sandboxed frame."""
    snippet = sftrace.load_bundle(OUTSIDE)._repr_html_()
    assert snippet is not None
    notebook = write_page(tmp_path / "notebook.html", f"<!DOCTYPE html><body>{snippet}</body>")
    page = browser.new_page()
    try:
        page.goto(notebook.as_uri())
        frame = page.frames[1]
        frame.wait_for_selector("html[data-ready='1']")
        assert frame.locator(".vp .row").count() == 4
    finally:
        page.close()
