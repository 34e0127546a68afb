"""``render_html``: one self-contained HTML page for a run, a replay or a comparison.

A page holds its CSS, its script and its data inline: it opens from disk or from a CI
artifact and makes no network request. Its Content-Security-Policy allows no source
but the page's own style and the one script whose hash it names, so even markup that got
into the page could not load or run anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final

from sftrace._bundle.load import load_bundle
from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError
from sftrace._model.text import printable
from sftrace._regress.compare import compare, diff
from sftrace._regress.findings import ComparisonPolicy, Report
from sftrace._regress.runs import as_run
from sftrace._regress.suite import CaseResult
from sftrace._replay.run import ReplayResult
from sftrace._view.compare_data import build_compare
from sftrace._view.data import build_index, build_run, document
from sftrace._view.values import Values, dumps, script_json

__all__ = ["render_case", "render_html", "render_index", "write_html"]

Run = Bundle | ReplayResult | str | os.PathLike[str]

# The notebook frame's height; the page scrolls inside it.
_NOTEBOOK_HEIGHT_PX: Final = 640


@cache
def _asset(name: str) -> str:
    return resources.files("sftrace._view").joinpath("assets", name).read_text("utf-8")


def _page(payload: dict[str, Any], values: Values, title: str) -> str:
    script = _asset("view.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    table, offsets = values.script()
    data = script_json(dumps({**document(payload, title), "offsets": offsets}))
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(printable(title))}</title>\n"
        f"<style>{_asset('view.css')}</style>\n"
        '</head>\n<body>\n<div id="app"><noscript>This report needs JavaScript.</noscript></div>\n'
        f'<script type="application/json" id="sftrace-data">{data}</script>\n'
        f'<script type="application/json" id="sftrace-values">{table}</script>\n'
        f"<script>{script}</script>\n"
        "</body>\n</html>\n"
    )


def _as_bundle(value: Bundle | str | os.PathLike[str]) -> Bundle:
    return value if isinstance(value, Bundle) else load_bundle(value)


def _title_of(value: Any) -> str:
    if isinstance(value, Bundle):
        return f"{value.agent_name} run {value.run_id}"
    if isinstance(value, ReplayResult):
        return f"replay of {value.bundle.agent_name} run {value.bundle.run_id}"
    return "run"


def render_run(bundle: Bundle, *, title: str | None = None) -> str:
    """The page of one recorded run: header, waterfall of its spans, each call's values."""
    values = Values()
    payload = build_run(bundle, values)
    return _page(payload, values, title or _title_of(bundle))


def _actions(result: ReplayResult) -> dict[int, tuple[str, str | None]]:
    """Recorded call number -> what the replay did with it, and its match tier if any."""
    actions: dict[int, tuple[str, str | None]] = {}
    for matched in result.matched:
        if matched.action == "live":  # no recorded call: shown on the replayed side only
            continue
        tier = getattr(matched, "tier", None)
        actions[matched.recorded.seq] = (matched.action, None if tier is None else str(tier))
    return actions


def render_comparison(
    baseline: Run,
    candidate: Run,
    *,
    report: Report | None = None,
    policy: ComparisonPolicy | None = None,
    title: str | None = None,
    facts: dict[str, Any] | None = None,
) -> str:
    """The page of a comparison: the calls aligned side by side, findings at their paths.

    ``report`` (default: ``diff``, or ``compare`` when the candidate is a replay of the
    baseline) gives the alignment and the findings; when the candidate is a
    ``ReplayResult``, each row also shows what the replay did with the recorded call.
    """
    if not isinstance(baseline, ReplayResult):
        baseline = _as_bundle(baseline)
    if not isinstance(candidate, ReplayResult):
        candidate = _as_bundle(candidate)
    if report is None:
        if isinstance(candidate, ReplayResult) and candidate.bundle is baseline:
            report = compare(candidate.bundle, candidate, policy)
        else:
            report = diff(baseline, candidate, policy=policy)
    base, cand = as_run(baseline, report.baseline.label), as_run(candidate, report.candidate.label)
    values = Values()
    payload = build_compare(
        report,
        values,
        baseline_calls=base.calls,
        candidate_calls=cand.calls,
        baseline_output=(base.has_output, base.output),
        candidate_output=(cand.has_output, cand.output),
        actions=_actions(candidate) if isinstance(candidate, ReplayResult) else None,
        baseline_input=_run_input(baseline),
        candidate_input=_run_input(candidate),
    )
    if facts:
        payload["facts"] = facts
    if title is None:
        title = f"{report.baseline.source} vs {report.candidate.source}"
    return _page(payload, values, title)


def _run_input(run: Bundle | ReplayResult) -> tuple[bool, Any]:
    """Whether a run had an input, and which (a replay's is its recording's)."""
    bundle = run.bundle if isinstance(run, ReplayResult) else run
    return bundle.has_run_input, bundle.run_input


def render_replay(
    result: ReplayResult,
    *,
    report: Report | None = None,
    policy: ComparisonPolicy | None = None,
    title: str | None = None,
    facts: dict[str, Any] | None = None,
) -> str:
    """The page of a replay: the recorded calls beside the replayed ones, each with the
    replay's action (substituted, executed, derived, manual, refused, overridden)."""
    replay_facts: dict[str, Any] = {
        "replay status": result.status,
        "reproduced": result.reproduced,
        "unused recorded calls": len(result.unused),
        "covered recorded calls": len(result.covered),
        **(facts or {}),
    }
    return render_comparison(
        result.bundle,
        result,
        report=report,
        policy=policy,
        title=title or _title_of(result),
        facts=replay_facts,
    )


def render_report(report: Report, *, title: str | None = None) -> str:
    """The page of a report alone: its findings and alignment (calls by reference)."""
    values = Values()
    payload = build_compare(report, values)
    return _page(payload, values, title or report.summary())


def render_html(
    run: Run | Report,
    candidate: Run | None = None,
    *,
    policy: ComparisonPolicy | None = None,
    title: str | None = None,
) -> str:
    """A self-contained HTML report (one string): no network, no external files.

    - ``render_html(bundle)`` (a ``Bundle`` or a bundle path): the run's header, a
      waterfall of its spans, and each call's input, output, error and redactions;
    - ``render_html(result)`` for a ``ReplayResult``: the recorded and replayed calls side
      by side, each with the replay's action;
    - ``render_html(baseline, candidate)``: the two runs compared as ``sftrace.diff``
      compares them (``policy`` as there), findings highlighted at their JSON paths;
    - ``render_html(report)`` for a ``Report``: its verdict, findings and alignment.
    """
    if candidate is not None:
        if isinstance(run, Report):
            raise ConfigError("render_html(report, candidate): a Report is rendered alone")
        return render_comparison(run, candidate, policy=policy, title=title)
    if isinstance(run, Report):
        return render_report(run, title=title)
    if isinstance(run, ReplayResult):
        return render_replay(run, policy=policy, title=title)
    if isinstance(run, Bundle | str | os.PathLike):
        return render_run(_as_bundle(run), title=title)
    raise ConfigError(
        f"cannot render {type(run).__qualname__} {run!r}: expected a Bundle, a bundle path, "
        f"a ReplayResult or a Report"
    )


def render_case(result: CaseResult) -> str:
    """The page of one suite case: its replay against the recording, judged by the
    case's own report (expectations included)."""
    title = f"{result.id}: {result.outcome}"
    facts: dict[str, Any] = {"case": result.id, "outcome": result.outcome}
    facts["entrypoint"] = result.case.entrypoint
    if result.replay is not None and result.report is not None:
        return render_replay(result.replay, report=result.report, title=title, facts=facts)
    values = Values()
    payload: dict[str, Any] = {"page": "error", "facts": facts, "error": result.error or ""}
    return _page(payload, values, title)


def render_index(title: str, entries: Iterable[tuple[CaseResult, str]]) -> str:
    """The index of a suite run: each case's outcome, linking to its page (``href``)."""
    cases = [
        {
            "id": result.id,
            "outcome": result.outcome,
            "duration_s": round(result.duration_s, 3),
            "href": href,
            "summary": result.report.summary() if result.report is not None else result.error,
        }
        for result, href in entries
    ]
    return _page(build_index(title, cases), Values(), title)


def write_html(path: str | os.PathLike[str], page: str) -> Path:
    """Write a page (UTF-8); return its path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


def notebook_html(value: Any) -> str:
    """The page in an ``<iframe srcdoc>``, so notebook styles and scripts stay apart."""
    page = render_html(value)
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{_NOTEBOOK_HEIGHT_PX}px;border:1px solid #ccc" '
        'sandbox="allow-scripts"></iframe>'
    )
