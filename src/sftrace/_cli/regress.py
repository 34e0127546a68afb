"""``sftrace diff``, ``sftrace test`` and ``sftrace export``: regression testing commands.

Exit codes: 0 equivalent / every case passed; 1 behaviour changed / a case failed;
2 bad input (unreadable bundle or suite, bad options) or a case that could not run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from sftrace._bundle.load import load_bundle
from sftrace._cli.main import EXIT_BAD_INPUT, EXIT_CHANGED, EXIT_OK, bad_input_policy
from sftrace._cli.options import (
    ALLOW_LIVE_TOOL_OPTION,
    LIVE_LLM_OPTION,
    MATCH_IGNORE_OPTION,
    MATCH_OPTION,
    ON_MISS_OPTION,
    TIERS_OPTION,
    check_output_location,
    expectation_file_options,
    parse_match_ignore_option,
    parse_tiers_option,
)
from sftrace._cli.output import echo, human_console
from sftrace._cli.view import finish_page, html_option, write_suite_pages
from sftrace._errors import ConfigError, SftraceError
from sftrace._model.text import one_line, printable
from sftrace._record.manual import check_agent_version
from sftrace._regress.compare import diff
from sftrace._regress.findings import ComparisonPolicy, FindingCode, Report, Severity
from sftrace._regress.junit import junit_xml, summary_line
from sftrace._regress.pytest_export import export_pytest
from sftrace._regress.suite import CaseResult, Suite, discover_suites, load_suite
from sftrace._view.render import render_comparison

_SEVERITY_STYLES = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "dim"}
_OUTCOME_STYLES = {"passed": "bold green", "failed": "bold red", "error": "bold magenta"}
_OUTCOME_WORDS = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR"}


def register(group: click.Group) -> None:
    group.add_command(diff_command)
    group.add_command(test_command)
    group.add_command(export_command)


def _policy(ignore: tuple[str, ...], severity: tuple[str, ...]) -> ComparisonPolicy:
    overrides: dict[str, str] = {}
    for item in severity:
        code, sep, level = item.partition("=")
        if not sep or not code.strip() or not level.strip():
            raise ConfigError(
                f"--severity takes CODE=LEVEL (e.g. OUTPUT_TEXT_CHANGED=error), got {item!r}"
            )
        overrides[code.strip()] = level.strip()
    return ComparisonPolicy(severity_overrides=overrides, ignore_paths=ignore)


def _dump_json(document: object) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


# --- diff --------------------------------------------------------------------------


@click.command("diff")
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--ignore",
    multiple=True,
    metavar="PATH",
    help="A JSON path whose differences are only info (e.g. reply.generated_at, items.*.id). "
    "Repeatable.",
)
@click.option(
    "--severity",
    multiple=True,
    metavar="CODE=LEVEL",
    help="Override a finding's severity (error, warning or info). Repeatable.",
)
@html_option("Also write the comparison as a self-contained HTML page.")
def diff_command(
    baseline: Path,
    candidate: Path,
    as_json: bool,
    ignore: tuple[str, ...],
    severity: tuple[str, ...],
    html_path: Path | None,
) -> None:
    """Compare the behaviour of two recorded runs (BASELINE and CANDIDATE bundles).

    Calls are aligned by content, so an inserted call shows as one added call. Exit 0
    when equivalent (no error finding), 1 when behaviour changed, 2 on bad input.
    """
    with bad_input_policy():
        policy = _policy(ignore, severity)
        runs = (load_bundle(baseline), load_bundle(candidate))
        report = diff(*runs, policy=policy)
    if as_json:
        _dump_json(report.to_dict())
    else:
        print_report(human_console(), report)
    if html_path is not None:
        finish_page(html_path, render_comparison(*runs, report=report), err=as_json)
    raise click.exceptions.Exit(EXIT_OK if report.passed else EXIT_CHANGED)


def print_report(console: Console, report: Report, *, indent: str = "") -> None:
    """The report's text, with severities in colour."""
    for line in report.format().splitlines():
        style = ""
        stripped = line.lstrip()
        if stripped.startswith(("FAIL:", "PASS:")):
            style = "bold red" if stripped.startswith("FAIL") else "bold green"
        for level, level_style in _SEVERITY_STYLES.items():
            if stripped.startswith(f"{level.value} "):
                style = level_style
        console.print(Text(indent + line, style=style))


# --- test --------------------------------------------------------------------------


@click.command("test")
@click.argument("suites", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--junit-xml",
    "junit_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the results as JUnit XML to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--entrypoint",
    "-e",
    metavar="MODULE:FUNCTION",
    help="Run every case against this entrypoint instead of the suites' own.",
)
@click.option(
    "--agent-version",
    metavar="VERSION",
    help="The version of the agent under test, carried by every replayed run and shown "
    "beside the recorded version in reports.",
)
@html_option(
    "Also write one HTML page per case and an index.html into this directory.", directory=True
)
def test_command(
    suites: tuple[Path, ...],
    junit_path: Path | None,
    as_json: bool,
    entrypoint: str | None,
    agent_version: str | None,
    html_path: Path | None,
) -> None:
    """Run regression suites (*.sftrace-suite.toml files; default: search the working
    directory).

    Prints PASS, FAIL (with the error findings) or ERROR per case and a summary line.
    Exit 0 when every case passed, 1 when a case failed, 2 when a suite is invalid or a
    case could not run.
    """
    stderr = human_console(stderr=True)
    with bad_input_policy():
        check_agent_version(agent_version)
        check_output_location(junit_path, "--junit-xml")
        check_output_location(html_path, "--html", directory=True)
    paths = discover_suites(suites or [Path(".")])
    if not paths:
        stderr.print(
            Text(
                "sftrace: error: no suite files found (looked for *.sftrace-suite.toml under "
                f"{', '.join(str(p) for p in suites) or os.getcwd()})"
            )
        )
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    loaded: list[Suite] = []
    invalid: dict[Path, str] = {}
    for path in paths:
        try:
            loaded.append(load_suite(path))
        except SftraceError as exc:
            invalid[path] = one_line(str(exc))
            stderr.print(Text(f"sftrace: error: {invalid[path]}"))
    if invalid:
        if junit_path is not None:  # CI reads the report: it says why nothing ran
            _write_junit(junit_path, [], invalid)
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    results = _run_suites(loaded, entrypoint, agent_version, as_json, stderr)
    summary = summary_line(results)
    if junit_path is not None:
        _write_junit(junit_path, results)
    if html_path is not None:
        write_suite_pages(html_path, results, err=as_json)
    if as_json:
        _dump_json(
            {
                "summary": {
                    "passed": sum(1 for r in results if r.outcome == "passed"),
                    "failed": sum(1 for r in results if r.outcome == "failed"),
                    "errors": sum(1 for r in results if r.outcome == "error"),
                    "total": len(results),
                },
                "suites": [str(suite.path) for suite in loaded],
                "cases": [result.to_dict() for result in results],
            }
        )
        stderr.print(Text(summary))
    else:
        human_console().print(Text(summary, style="bold"))
    if any(result.outcome == "error" for result in results):
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    if any(result.outcome == "failed" for result in results):
        raise click.exceptions.Exit(EXIT_CHANGED)
    raise click.exceptions.Exit(EXIT_OK)


def _write_junit(
    path: Path, results: list[CaseResult], invalid: dict[Path, str] | None = None
) -> None:
    with bad_input_policy():
        path.parent.mkdir(parents=True, exist_ok=True)
        junit_xml(results, invalid).write(path, encoding="utf-8", xml_declaration=True)


def _run_suites(
    suites: list[Suite],
    entrypoint: str | None,
    agent_version: str | None,
    as_json: bool,
    stderr: Console,
) -> list[CaseResult]:
    # The bar shares the console of the case lines (rich draws lines above a live bar
    # only on its own console); with --json stdout is the document, so both go to stderr.
    console = stderr if as_json else human_console()
    total = sum(len(suite.cases) for suite in suites)
    results: list[CaseResult] = []
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("running cases", total=total)
        for suite in suites:
            for case in suite.cases:
                progress.update(task, description=escape(printable(case.id)))
                result = case.run(entrypoint=entrypoint, agent_version=agent_version)
                results.append(result)
                if not as_json:
                    _print_result(progress.console, result)
                progress.advance(task)
    return results


def _print_result(console: Console, result: CaseResult) -> None:
    word = _OUTCOME_WORDS[result.outcome]
    # A failed case says how many findings it has: ``FAIL  refund-flow  1 error, 1 warning``;
    # a case that passed with warnings (a relaxed match) names them, and each one.
    report = result.report
    warnings = report.by_severity(Severity.WARNING) if report is not None else []
    counts = ""
    if report is not None and (result.outcome == "failed" or warnings):
        counts = f" {report.counts_text()} "
    console.print(
        Text.assemble(
            (word, _OUTCOME_STYLES[result.outcome]),
            f" {result.id} ",
            counts,
            (f"({result.duration_s:.2f}s)", "dim"),
        )
    )
    if result.outcome == "failed" and report is not None:
        for finding in report.by_severity(Severity.ERROR):
            console.print(Text(f"      {finding.code.value}: {finding.message}", style="red"))
            for line in report.difference_lines(finding):
                console.print(Text(f"        {line}"))
        errors = report.by_severity(Severity.ERROR)
        shown = any(f.code is FindingCode.REPLAY_DIVERGED for f in errors)
        if report.divergence and not shown:
            first = report.divergence.strip().splitlines()[0]
            console.print(Text(f"      first divergence: {first}", style="red"))
    elif result.outcome == "passed":
        for finding in warnings:
            console.print(Text(f"      {finding.code.value}: {finding.message}", style="yellow"))
    elif result.outcome == "error":
        console.print(Text(f"      {one_line(result.error or '')}", style="magenta"))


# --- export ------------------------------------------------------------------------


@click.command("export")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--pytest", "as_pytest", is_flag=True, help="Write a pytest test module.")
@click.option(
    "--entrypoint",
    "-e",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The agent's entrypoint the test replays the bundle against.",
)
@expectation_file_options(
    output_help="A JSON file holding the corrected output the test expects.",
    trajectory_help="A JSON or TOML expectations document (called, not_called, counts, "
    "arguments, order, sequence, max_calls).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="The test module to write (default: test_<bundle name>.py).",
)
@click.option("--overwrite", is_flag=True, help="Replace the test module if it exists.")
@MATCH_OPTION
@TIERS_OPTION
@MATCH_IGNORE_OPTION
@ON_MISS_OPTION
@ALLOW_LIVE_TOOL_OPTION
@LIVE_LLM_OPTION
def export_command(
    bundle: Path,
    as_pytest: bool,
    entrypoint: str,
    expect_output: Path | None,
    expect_trajectory: Path | None,
    output: Path | None,
    overwrite: bool,
    match: str,
    tiers: str | None,
    match_ignore: tuple[str, ...],
    on_miss: str,
    allow_live_tools: tuple[str, ...],
    live_llms: tuple[str, ...],
) -> None:
    """Turn a recorded run (BUNDLE) into a regression test.

    With --expect-output and/or --expect-trajectory the test checks the corrected
    behaviour; without them, that the replay behaves as recorded (or, for a recorded
    failure, that the run now completes).
    """
    if not as_pytest:
        raise click.UsageError("choose what to export: --pytest (a pytest test module)")
    with bad_input_policy():
        written = export_pytest(
            bundle,
            entrypoint=entrypoint,
            expect_output=expect_output,
            expect_trajectory=expect_trajectory,
            output=output,
            overwrite=overwrite,
            match=match,
            tiers=parse_tiers_option(tiers),
            match_ignore=parse_match_ignore_option(match_ignore),
            on_miss=on_miss,
            allow_live_tools=allow_live_tools,
            live_llms=live_llms,
        )
    echo(f"wrote {written}")
    if expect_output is None and expect_trajectory is None:
        echo(
            "tip: pass --expect-output FILE (the corrected output) or --expect-trajectory FILE "
            "to state the behaviour the fixed agent must show",
            err=True,
        )
