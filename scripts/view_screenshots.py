"""Screenshot the HTML report (``sftrace view``) for the README (a dev tool, not CI).

Renders the booking agent's failed run (``view-bundle.png``) and the refund agent's two
recorded runs compared (``view-diff.png``) from the bundles under ``examples/``, opens
each page in headless Chromium through Playwright, selects a call (a failed one, the LLM
call), and saves the screenshots::

    .venv/bin/python scripts/view_screenshots.py [--output-dir docs/img]

Needs ``pip install -e '.[test]'`` (Playwright) and Chromium at /usr/bin/chromium (Debian:
``apt-get install chromium``; Playwright's own browser download is not used).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

import sftrace

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 640}


def pages() -> dict[str, tuple[str, str]]:
    """Screenshot name -> (page HTML, text of the row to select)."""
    # relative paths: the pages name the bundles as the README's commands do
    booking = Path("examples/booking_agent/bundles/sold_out_fare.sftrace")
    refunds = Path("examples/refund_agent/bundles")
    return {
        "view-bundle.png": (sftrace.render_html(booking), "#3"),
        "view-diff.png": (
            sftrace.render_html(
                refunds / "refund_inside_window.sftrace",
                refunds / "refund_outside_window.sftrace",
                title="refund_inside_window vs refund_outside_window",
            ),
            "support-1",
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.output_dir = args.output_dir.resolve()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport=VIEWPORT)
        for name, (html, row_text) in pages().items():
            source = Path(scratch) / f"{name}.html"
            source.write_text(html, encoding="utf-8")
            page.goto(source.as_uri())
            page.wait_for_selector("html[data-ready='1']")
            page.locator(".vp .row", has_text=row_text).first.click()
            target = args.output_dir / name
            page.screenshot(path=str(target))
            print(f"wrote {target}")
        browser.close()


if __name__ == "__main__":
    main()
