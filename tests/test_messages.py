"""Messages that show the difference: long values show where they differ (replay, diff,
``sftrace test``, ``replay --json``), one changed argument is one finding, public error
names and plurals."""

from __future__ import annotations

import importlib
import itertools
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import sftrace
from sftrace import ReplayMismatchError, record, replay, replay_run, trace_tool
from sftrace._model.text import difference_window, line_diff, pluralize, shorten, show_pair

PREFIX = "You are a careful support agent. " * 60  # ~2,000 characters in common


@trace_tool
def summarize(prompt: str) -> str:
    return "ok"


def _record_prompt(path: Path, prompt: str) -> Path:
    with record("long-prompt", output=path):
        summarize(prompt)
    return path


# --- the text helpers ---------------------------------------------------------------


def test_difference_window_is_around_the_first_differing_character() -> None:
    a, b = PREFIX + "refund order A-1", PREFIX + "refund order B-2"
    offset, left, right = difference_window(a, b, 40)
    assert offset == len(PREFIX) + len("refund order ")
    assert left.endswith("A-1")
    assert right.endswith("B-2")
    assert left.startswith("...")
    assert len(left) <= 43 + 3
    assert difference_window("same", "same") == (4, "", "")


def test_line_diff_shows_the_changed_lines_only() -> None:
    a = "\n".join(f"line {i}" for i in range(40))
    b = a.replace("line 31", "line thirty-one")
    assert line_diff(a, b) == [
        "@@ -31,3 +31,3 @@",
        " line 30",
        "-line 31",
        "+line thirty-one",
        " line 32",
    ]


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("a", "b", 'recorded "a", reached "b"'),
        ({"k": [1]}, None, 'recorded {"k":[1]}, reached null'),
        (PREFIX + "A-1", PREFIX + "B-2", "first difference at character 1981"),
    ],
)
def test_show_pair(left: Any, right: Any, expected: str) -> None:
    assert expected in show_pair(left, right, labels=("recorded", "reached"))[0]


def test_shorten_and_pluralize() -> None:
    assert shorten("abcdef", 5) == "ab..."
    assert shorten("abc", 5) == "abc"
    assert [pluralize(n, "recorded call") for n in (0, 1, 2)] == [
        "0 recorded calls",
        "1 recorded call",
        "2 recorded calls",
    ]
    assert pluralize(1, "entry", "entries") == "1 entry"


# --- item 7: long values differing at their end ----------------------------------------


def test_replay_mismatch_of_a_long_prompt_shows_where_it_differs(tmp_path: Path) -> None:
    """A 2,000-character prompt differing at its end: the message shows both endings."""
    bundle = _record_prompt(tmp_path / "p.sftrace", PREFIX + "refund order A-1")
    with replay(bundle), pytest.raises(ReplayMismatchError) as caught:
        summarize(PREFIX + "refund order B-2")
    message = str(caught.value)
    line = next(line for line in message.splitlines() if "$.prompt" in line)
    assert "order A-1" in line
    assert "order B-2" in line
    assert f"character {len(PREFIX) + 14}" in line
    # the full values stay on the error
    assert caught.value.differences == [
        ("$.prompt", PREFIX + "refund order A-1", PREFIX + "refund order B-2")
    ]


def test_diff_of_long_values_shows_where_they_differ(tmp_path: Path) -> None:
    left = _record_prompt(tmp_path / "a.sftrace", PREFIX + "refund order A-1")
    right = _record_prompt(tmp_path / "b.sftrace", PREFIX + "refund order B-2")
    text = sftrace.diff(left, right).format()
    line = next(line for line in text.splitlines() if "$.prompt" in line)
    assert "order A-1" in line
    assert "order B-2" in line


def test_diff_of_multi_line_text_is_a_line_diff(tmp_path: Path) -> None:
    a = "\n".join(f"step {i}: check the order" for i in range(30))
    b = a.replace("step 21: check the order", "step 21: refund the order")
    text = sftrace.diff(
        _record_prompt(tmp_path / "a.sftrace", a), _record_prompt(tmp_path / "b.sftrace", b)
    ).format()
    assert "-step 21: check the order" in text
    assert "+step 21: refund the order" in text
    assert "step 5:" not in text


# --- item 8 and the CLI: one changed argument, one finding ----------------------------

AGENT = """
from sftrace import trace_tool

@trace_tool
def lookup(order_id, note):
    return {"order_id": order_id, "days": 45}

@trace_tool
def policy(days):
    return {"window": 30}

@trace_tool
def refund(order_id, amount):
    return {"refunded": order_id}

@trace_tool
def notify(order_id, text):
    return {"sent": True}

def run(request, note=NOTE + "A-1"):
    order = lookup(request["order_id"], note)
    policy(order["days"])
    refund(order["order_id"], 30)
    notify(order["order_id"], "your refund is on its way")
    return {"decision": "refunded"}

def changed(request):
    return run(request, note=NOTE + "B-2")
"""
_names = itertools.count()


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """An agent module with four tools and its recorded run; ``changed`` changes one
    argument of the first tool (a 2,000-character note that differs at its end)."""
    name = f"messages_agent_{os.getpid()}_{next(_names)}"
    source = f"NOTE = {PREFIX!r}\n" + textwrap.dedent(AGENT)
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    importlib.invalidate_caches()
    module = importlib.import_module(name)
    bundle = tmp_path / "run.sftrace"
    with record("refunds", output=bundle, run_input={"order_id": "A-1"}) as session:
        session.set_output(module.run({"order_id": "A-1"}))
    yield name, bundle
    sys.modules.pop(name, None)


def test_one_changed_argument_is_one_finding(agent: tuple[str, Path]) -> None:
    """Not a cascade of status, output, error and missing-call findings."""
    name, bundle = agent
    report = sftrace.compare(bundle, replay_run(bundle, f"{name}:changed"))
    (finding,) = report.findings
    assert finding.code is sftrace.FindingCode.REPLAY_DIVERGED
    assert "3 recorded calls from there on were not reached" in finding.message
    (difference,) = finding.differences
    assert difference.path == "$.note"
    assert difference.candidate == PREFIX + "B-2"
    assert report.verdict == "fail"


def test_sftrace_test_fail_output_shows_path_and_both_values(
    agent: tuple[str, Path], tmp_path: Path
) -> None:
    name, bundle = agent
    suite = tmp_path / "r.sftrace-suite.toml"
    suite.write_text(f'name = "r"\nentrypoint = "{name}:changed"\n[[cases]]\nname = "one"\n')
    suite.write_text(suite.read_text() + f'bundle = "{bundle.name}"\n')
    from sftrace._cli.main import cli
    from sftrace._cli.regress import register

    register(cli)
    result = CliRunner().invoke(cli, ["test", str(suite)])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    findings = [line.split(":")[0] for line in lines if re.match(r" {6}\S", line)]
    assert findings == ["      REPLAY_DIVERGED"]
    (path_line,) = [line for line in lines if "$.note" in line]
    assert 'agent. A-1"' in path_line
    assert "B-2" in path_line
    assert "sftrace._" not in result.stdout


def test_replay_json_carries_the_full_values(agent: tuple[str, Path]) -> None:
    name, bundle = agent
    from sftrace._cli.main import cli
    from sftrace._cli.replay import register

    register(cli)
    result = CliRunner().invoke(
        cli, ["replay", str(bundle), "--entrypoint", f"{name}:changed", "--json"]
    )
    divergence = orjson.loads(result.stdout)["divergence"]
    assert divergence["differences"] == [
        {"path": "$.note", "recorded": PREFIX + "A-1", "reached": PREFIX + "B-2", "missing": None}
    ]
    assert divergence["recorded"]["input"]["note"] == PREFIX + "A-1"


# --- public names and plurals ------------------------------------------------------------


def test_errors_are_named_by_their_public_name(agent: tuple[str, Path]) -> None:
    """Recorded failures, reports and tracebacks say sftrace.X, not sftrace._errors.X."""
    name, bundle = agent
    result = replay_run(bundle, f"{name}:changed")
    assert result.calls[0].error is not None
    assert result.calls[0].error.type == "sftrace.ReplayMismatchError"
    assert type(result.error).__module__ == "sftrace"
    assert sftrace.ReplayMismatchError.__module__ == "sftrace"


def test_one_unreached_call_is_singular(tmp_path: Path) -> None:
    bundle = _record_prompt(tmp_path / "p.sftrace", "hello")
    with replay(bundle) as session, pytest.raises(sftrace.IncompleteReplayError) as caught:
        session.verify_complete()
    assert "1 of 1 recorded call was never reached" in str(caught.value)


def test_a_bundle_naming_sftrace_errors_privately_still_reproduces(tmp_path: Path) -> None:
    """Bundles written before the errors were named sftrace.X hold sftrace._errors.X: the
    replayed failure is still the recorded one, and no call error 'changed'."""

    @trace_tool
    def configure_agent(level: str) -> str:
        raise sftrace.ConfigError(f"unknown level {level!r}")

    def agent(level: str) -> None:
        configure_agent(level)

    bundle = tmp_path / "old.sftrace"
    with pytest.raises(sftrace.ConfigError), record("old", output=bundle, run_input="x"):
        agent("x")
    for file in bundle.iterdir():
        text = file.read_text()
        file.write_text(text.replace('"sftrace.ConfigError"', '"sftrace._errors.ConfigError"'))
    assert "sftrace._errors.ConfigError" in (bundle / "manifest.json").read_text()
    result = replay_run(bundle, agent)
    assert result.reproduced_failure
    assert sftrace.compare(bundle, result).findings == ()
