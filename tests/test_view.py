"""The HTML report without a browser: what goes into the page, the CLI, the hooks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner, Result

import sftrace
from regress_helpers import record_agent, write_agent
from sftrace._cli.main import cli
from sftrace._cli.regress import register as register_regress
from sftrace._cli.replay import register as register_replay
from sftrace._cli.view import register
from sftrace._view.compare_data import text_window
from sftrace._view.render import render_html
from sftrace._view.values import Values, script_json
from view_helpers import HOSTILE_ERROR, HOSTILE_NAME, HOSTILE_OUTPUT, HOSTILE_TEXT, record_hostile

register(cli)
register_regress(cli)
register_replay(cli)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REFUND_BUNDLES = EXAMPLES / "refund_agent" / "bundles"
OUTSIDE = REFUND_BUNDLES / "refund_outside_window.sftrace"
INSIDE = REFUND_BUNDLES / "refund_inside_window.sftrace"

_SCRIPT = re.compile(r'<script type="application/json" id="(sftrace-[a-z]+)">(.*?)</script>', re.S)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def page_data(page: str) -> tuple[dict, list]:
    """The page's payload and its values, decoded as the page's script decodes them."""
    blocks = dict(_SCRIPT.findall(page))
    payload = json.loads(blocks["sftrace-data"])
    table = blocks["sftrace-values"]
    units = table.encode("utf-16-le")
    offsets = payload["offsets"]
    values = [
        json.loads(units[2 * offsets[i] : 2 * offsets[i + 1]].decode("utf-16-le"))
        for i in range(0, len(offsets), 2)
    ]
    assert values == json.loads(table)
    return payload, values


def test_values_are_found_by_their_utf16_offsets() -> None:
    """Each value's range in the table is in JavaScript's string units, also for text
    outside the BMP, so the page parses only the value it shows."""
    values = Values()
    originals = ["é", "😀 emoji", {"<k>": "a\u2028b&c"}, [1, 2.5, None], "\r"]
    for item in originals:
        values.add(item)
    table, offsets = values.script()
    units = table.encode("utf-16-le")
    decoded = [
        json.loads(units[2 * offsets[i] : 2 * offsets[i + 1]].decode("utf-16-le"))
        for i in range(0, len(offsets), 2)
    ]
    assert decoded == originals


def test_script_json_leaves_no_markup_and_keeps_the_value() -> None:
    text = json.dumps({"a": "</script><!-- & \u2028\u2029 >"}, ensure_ascii=False)
    escaped = script_json(text)
    assert not set("<>&\u2028\u2029") & set(escaped)
    assert json.loads(escaped) == json.loads(text)


def test_run_page_holds_every_call_and_its_values() -> None:
    """The run page lists the run and each call in tree order with their inputs and
    outputs; the header carries the totals and versions."""
    page = render_html(OUTSIDE)
    payload, values = page_data(page)
    assert payload["page"] == "run"
    assert payload["sftrace"] == sftrace.__version__
    header = payload["header"]
    assert header["agent"] == "refund-agent"
    assert header["totals"]["total_tokens"] == 127
    assert header["recorded_with"] == "0.1.0"
    bundle = sftrace.load_bundle(OUTSIDE)
    rows = payload["rows"]
    assert [row["k"] for row in rows] == ["run"] + [call.kind for call in bundle.calls]
    assert [row["d0"] for row in rows] == [0, 1, 1, 1]
    for row, call in zip(rows[1:], bundle.calls, strict=True):
        assert row["seq"] == call.seq
        assert values[row["in"]] == call.input
        assert values[row["out"]] == call.output
    assert rows[2]["usage"] == {"input": 96, "output": 31}
    assert values[rows[0]["out"]] == bundle.output


def test_hostile_strings_never_reach_the_page_as_markup(tmp_path: Path) -> None:
    """Names, outputs and errors that are markup stay JSON strings inside the data
    blocks: outside them the page has exactly its own three scripts and no recorded text."""
    bundle = record_hostile(tmp_path / "hostile.sftrace")
    for page in (render_html(bundle), render_html(bundle, bundle)):
        assert page.count("<script") == 3
        assert page.count("</script>") == 3
        outside = _SCRIPT.sub("", page)
        for hostile in (HOSTILE_NAME, HOSTILE_OUTPUT, "onerror", "__pwned", "<svg", "<b>"):
            assert hostile not in outside
        payload, values = page_data(page)
        assert HOSTILE_NAME in json.dumps(payload) + json.dumps(values)
    payload, values = page_data(render_html(bundle))
    names = {row.get("name") for row in payload["rows"]}
    assert HOSTILE_NAME in names
    errors = [row["err"]["message"] for row in payload["rows"] if "err" in row]
    assert HOSTILE_ERROR in errors
    assert {"html": HOSTILE_OUTPUT, HOSTILE_TEXT: [HOSTILE_NAME]} in values


def test_the_inline_script_cannot_end_its_element() -> None:
    """The script is inlined verbatim: nothing in it may close or confuse its element."""
    from importlib import resources

    assets = resources.files("sftrace._view").joinpath("assets")
    for name in ("view.js", "view.css"):
        text = assets.joinpath(name).read_text("utf-8").lower()
        for marker in ("<script", "</script", "<!--", "</style"):
            assert marker not in text, (name, marker)


def test_page_allows_only_its_own_script() -> None:
    """The page's Content-Security-Policy names its one script by hash and no source."""
    page = render_html(OUTSIDE)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert "default-src 'none'" in policy.group(1)
    assert "script-src 'sha256-" in policy.group(1)
    assert "http" not in policy.group(1)


def test_long_strings_show_the_window_where_they_differ() -> None:
    left = "a" * 500 + "OLD" + "b" * 500
    right = "a" * 500 + "NEW!" + "b" * 500
    window = text_window(left, right)
    assert window is not None
    assert (window["baseline"], window["candidate"]) == ("OLD", "NEW!")
    assert (window["before"], window["after"]) == ("a" * 60, "b" * 60)
    assert (window["skipped_before"], window["skipped_after"]) == (440, 440)
    assert text_window("short", "other") is None


def test_comparison_page_follows_the_diff_alignment() -> None:
    """The comparison rows are the report's alignment, each with its findings and the
    differing paths; the first row is the run itself."""
    report = sftrace.diff(INSIDE, OUTSIDE)
    payload, _ = page_data(render_html(INSIDE, OUTSIDE))
    assert payload["page"] == "compare"
    assert payload["verdict"] == report.verdict.value
    rows = payload["rows"]
    assert rows[0]["st"] == "run"
    assert [row["st"] for row in rows[1:]] == [aligned.status for aligned in report.alignment]
    attached = sorted(index for row in rows for index in row["f"])
    assert attached == list(range(len(report.findings)))
    llm_row = rows[2]
    codes = {payload["findings"][i]["code"] for i in llm_row["f"]}
    assert codes == {"CALL_INPUT_CHANGED", "CALL_OUTPUT_CHANGED"}
    paths = {d["path"] for i in llm_row["f"] for d in payload["findings"][i]["diffs"]}
    assert "$.order.order_id" in paths
    assert llm_row["sev"] == "error"


def test_report_alone_renders_its_findings() -> None:
    report = sftrace.diff(INSIDE, OUTSIDE)
    payload, _ = page_data(render_html(report))
    assert payload["summary"] == report.summary()
    assert len(payload["findings"]) == len(report.findings)
    assert payload["rows"][1]["b"]["label"] == "tool lookup_order"


def test_notebooks_show_bundles_reports_and_replays_as_the_page() -> None:
    """_repr_html_ gives the page in a sandboxed iframe (its data escaped for srcdoc)."""
    bundle = sftrace.load_bundle(OUTSIDE)
    report = sftrace.diff(INSIDE, OUTSIDE)
    for shown in (bundle, report):
        snippet = shown._repr_html_()
        assert snippet is not None
        assert snippet.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;')
        assert 'sandbox="allow-scripts"' in snippet


def test_render_html_rejects_what_it_cannot_show() -> None:
    with pytest.raises(sftrace.ConfigError, match="cannot render int"):
        render_html(3)  # type: ignore[arg-type]


def test_importing_sftrace_does_not_load_the_view() -> None:
    code = "import sys, sftrace\nprint(sorted(m for m in sys.modules if '_view' in m))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --- the command -------------------------------------------------------------------------


def test_view_writes_the_page_next_to_the_bundle(tmp_path: Path) -> None:
    bundle = record_hostile(tmp_path / "run.sftrace")
    result = invoke("view", bundle)
    assert result.exit_code == 0, result.output
    page = tmp_path / "run.html"
    assert result.stdout == f"wrote {page}\n"
    assert page_data(page.read_text())[0]["page"] == "run"


def test_view_output_option_and_two_bundles(tmp_path: Path) -> None:
    single = invoke("view", OUTSIDE, "-o", tmp_path / "one.html")
    assert single.exit_code == 0, single.output
    assert (tmp_path / "one.html").exists()
    pair = invoke("view", INSIDE, OUTSIDE, "--output", tmp_path / "sub" / "two.html")
    assert pair.exit_code == 0, pair.output
    assert page_data((tmp_path / "sub" / "two.html").read_text())[0]["page"] == "compare"


def test_view_of_a_missing_bundle_is_bad_input(tmp_path: Path) -> None:
    result = invoke("view", tmp_path / "nope.sftrace")
    assert result.exit_code == 2
    assert result.stderr.startswith("sftrace: error: bundle not found")
    assert not (tmp_path / "nope.html").exists()


# --- replays, diff --html, test --html ---------------------------------------------------

REFUND_DIR = EXAMPLES / "refund_agent"


@pytest.fixture
def refund_agent(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(REFUND_DIR))
    return "refund_agent_fixed:handle"


def test_replay_page_marks_each_call_with_the_replays_action(refund_agent: str) -> None:
    """Recorded and replayed calls side by side; each recorded call carries what the replay
    did with it (an unreached one is 'unused'); run-level findings stay on the run row."""
    result = sftrace.replay_run(OUTSIDE, refund_agent)
    payload, values = page_data(render_html(result))
    rows = payload["rows"]
    assert [row.get("act") for row in rows] == [None, "substituted", "substituted", "unused"]
    assert [row.get("tier") for row in rows] == [None, "exact", "exact", None]
    missing = rows[3]
    assert missing["st"] == "missing"
    assert {payload["findings"][i]["code"] for i in missing["f"]} == {"MISSING_CALL"}
    run_codes = {payload["findings"][i]["code"] for i in rows[0]["f"]}
    assert "OUTPUT_VALUE_CHANGED" in run_codes
    assert payload["facts"]["replay status"] == "completed"
    assert payload["facts"]["covered recorded calls"] == 0
    recorded_input = sftrace.load_bundle(OUTSIDE).run_input
    # the run row shows each run's input (it said "none" on comparison pages)
    assert values[rows[0]["b"]["in"]] == values[rows[0]["c"]["in"]] == recorded_input


def test_replay_page_shows_a_match_tier_when_the_replay_has_one(refund_agent: str) -> None:
    result = sftrace.replay_run(OUTSIDE, refund_agent)
    result.matched = [
        SimpleNamespace(number=m.number, recorded=m.recorded, action=m.action, tier="exact")
        for m in result.matched
    ]
    payload, _ = page_data(render_html(result))
    assert [row.get("tier") for row in payload["rows"][1:3]] == ["exact", "exact"]


def test_diff_html_writes_the_comparison_after_the_report(tmp_path: Path) -> None:
    result = invoke("diff", INSIDE, OUTSIDE, "--html", tmp_path / "diff.html")
    assert result.exit_code == 1
    assert result.stdout.startswith("FAIL: ")
    assert result.stdout.endswith(f"wrote {tmp_path / 'diff.html'}\n")
    payload, _ = page_data((tmp_path / "diff.html").read_text())
    assert payload["summary"] == sftrace.diff(INSIDE, OUTSIDE).summary()
    as_json = invoke("diff", INSIDE, OUTSIDE, "--json", "--html", tmp_path / "d.html")
    json.loads(as_json.stdout)  # stdout stays one JSON document
    assert as_json.stderr == f"wrote {tmp_path / 'd.html'}\n"


def test_replay_html_writes_the_replay_page(tmp_path: Path, refund_agent: str) -> None:
    page = tmp_path / "replay.html"
    result = invoke("replay", OUTSIDE, "-e", refund_agent, "--html", page)
    assert result.exit_code == 1  # the fixed agent no longer refunds: behaviour changed
    assert result.stdout.endswith(f"wrote {page}\n")
    payload, _ = page_data(page.read_text())
    assert payload["facts"]["entrypoint"] == refund_agent
    assert payload["facts"]["verdict"] == "incomplete"


def test_test_html_writes_one_page_per_case_and_an_index(tmp_path: Path) -> None:
    result = invoke("test", REFUND_DIR, "--html", tmp_path / "report")
    assert result.exit_code == 0, result.output
    index, _ = page_data((tmp_path / "report" / "index.html").read_text())
    assert [case["outcome"] for case in index["cases"]] == ["passed"] * 3
    for case in index["cases"]:
        page, _ = page_data((tmp_path / "report" / case["href"]).read_text())
        assert page["page"] == "compare"
        assert page["facts"]["case"] == case["id"]
    assert "wrote" in result.stdout


def test_a_call_the_replay_refused_is_marked_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reached call answered with a divergence is 'refused', not 'unused'."""
    module = write_agent(tmp_path)
    bundle = record_agent(tmp_path, module, tmp_path / "buggy.sftrace")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = sftrace.replay_run(bundle, f"{module}:wrong_order")
    assert result.status == "diverged"
    payload, _ = page_data(render_html(result))
    assert [(row["st"], row.get("act")) for row in payload["rows"]] == [
        ("run", None),
        ("changed", "refused"),
        ("missing", "unused"),
    ]


def test_the_applications_own_spans_nest_in_the_waterfall(tmp_path: Path) -> None:
    """A span the application opens around a tool call is a row, the call nested in it."""
    from sftrace._record.config import get_state

    tracer = get_state().tracer  # the test's provider

    @sftrace.trace_tool
    def fetch(item: str) -> str:
        return item.upper()

    with sftrace.record("nesting-agent", output=tmp_path / "nested.sftrace"):
        with tracer.start_as_current_span("plan step"):
            fetch("a")
        fetch("b")
    payload, _ = page_data(render_html(tmp_path / "nested.sftrace"))
    rows = [(row["k"], row["name"], row["d0"]) for row in payload["rows"]]
    assert rows == [
        ("run", "nesting-agent", 0),
        ("span", "plan step", 1),
        ("tool", "fetch", 2),
        ("tool", "fetch", 1),
    ]


def test_a_calls_redaction_records_are_on_its_row(tmp_path: Path) -> None:
    """Where a call's values were redacted (field, path, rule) shows with the call."""

    @sftrace.trace_tool
    def login(user: str, password: str) -> str:
        return "ok"

    with sftrace.record("redacting-agent", output=tmp_path / "redacted.sftrace"):
        login("ada", password="hunter2-very-secret")
    payload, values = page_data(render_html(tmp_path / "redacted.sftrace"))
    call = payload["rows"][1]
    assert call["red"] == [{"field": "input", "path": "$.password", "rule": "sensitive_key"}]
    assert "hunter2" not in json.dumps(values)
