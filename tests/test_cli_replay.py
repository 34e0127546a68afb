"""``sftrace replay``: the report, the JSON document, --save, and exit codes 0/1/2."""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from sftrace import load_bundle, record, replay_run
from sftrace._cli.main import cli
from sftrace._cli.replay import register

register(cli)

# The agent: a tool, an LLM call, a tool again. Variants below change one thing.
AGENT_SOURCE = """
from sftrace import llm_request, trace_tool

BODIES = []  # real tool and model bodies that ran


@trace_tool
def weather(city: str) -> dict:
    BODIES.append("weather")
    return {{"city": city, "temp": 21}}


@trace_tool
def book(city: str) -> dict:
    BODIES.append("book")
    if city == "Atlantis":
        raise ValueError("no hotel in " + city)
    return {{"hotel": "H-" + city}}


def ask(prompt):
    def call():
        BODIES.append("llm")
        return {{"text": "go", "usage": {{"prompt_tokens": 2, "completion_tokens": 1}}}}
    return llm_request(provider="fake", model="m-1", input={{"prompt": prompt}}, call=call)


def run(city):
    print("agent says hello")
    forecast = weather({weather_arg})
    ask("weather is " + str(forecast["temp"]))
    hotel = book(city)
    return {{"city": city, "hotel": hotel["hotel"]{extra_output}}}
"""


def agent_source(*, weather_arg: str = "city", extra_output: str = "") -> str:
    return AGENT_SOURCE.format(weather_arg=weather_arg, extra_output=extra_output)


# Variants of the agent, each a different behaviour against the same recording.
DIVERGING = agent_source(weather_arg='"Porto"')  # asks for another city's weather
CHANGED = agent_source(extra_output=', "extra": 1')  # same calls, different result
SWAPPED = agent_source().replace(  # the same calls in another order
    '    forecast = weather(city)\n    ask("weather is " + str(forecast["temp"]))\n',
    '    ask("weather is 21")\n    forecast = weather(city)\n',
)
SHORTER = agent_source().replace("    hotel = book(city)\n", '    hotel = {"hotel": "none"}\n')

_names = itertools.count()


@pytest.fixture
def write_agent(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Write agent source into a fresh module in the working directory; return its name."""
    written: list[str] = []

    def write(source: str) -> str:
        name = f"cli_replay_agent_{os.getpid()}_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def record_agent(module_name: str, path: Path, city: str = "Lisbon") -> ModuleType:
    """Record ``module.run(city)`` into ``path`` (a failure is recorded, not raised)."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    module = importlib.import_module(module_name)
    try:
        with record("trip-agent", output=path, run_input=city) as session:
            session.set_output(module.run(city))
    except ValueError:
        pass
    module.BODIES.clear()
    return module


@pytest.fixture
def bundle(tmp_path: Path, write_agent: Callable[[str], str]) -> tuple[Path, str]:
    """A completed recording of the agent, and the name of the agent's module."""
    name = write_agent(agent_source())
    path = tmp_path / "trip.sftrace"
    record_agent(name, path)
    return path, name


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def replay_cli(path: Path, entrypoint: str, *options: str) -> Result:
    return invoke("replay", path, "--entrypoint", entrypoint, *options)


def test_replay_of_a_bundle_cut_at_a_line_boundary_is_bad_input(
    bundle: tuple[Path, str],
) -> None:
    """A spans file that lost its last lines: exit 2 naming the bundle, before any agent
    code runs (the lost calls are not reported as the agent's divergence)."""
    path, name = bundle
    spans = path / "spans.jsonl"
    spans.write_bytes(b"".join(spans.read_bytes().splitlines(keepends=True)[:-1]))
    result = replay_cli(path, f"{name}:run")
    assert result.exit_code == 2, result.output
    assert "is incomplete" in result.stderr
    assert "diverged" not in result.output
    assert importlib.import_module(name).BODIES == []


@pytest.mark.parametrize(
    ("entrypoint", "given"),
    [("takes_nothing", "the recorded run_input"), ("takes_two", "the recorded run_input")],
)
def test_an_entrypoint_that_cannot_take_the_recorded_input_is_bad_input(
    bundle: tuple[Path, str], write_agent: Callable[[str], str], entrypoint: str, given: str
) -> None:
    """The replay calls the entrypoint with the recorded run_input: one that cannot take
    it is bad input (exit 2, before it runs), not a divergence of the agent (exit 1)."""
    path, _ = bundle
    name = write_agent(
        "def takes_nothing():\n    return 1\n\n\ndef takes_two(a, b):\n    return 2\n"
    )
    result = replay_cli(path, f"{name}:{entrypoint}")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert f"cannot be called with {given}" in result.stderr


def test_matching_replay_exits_0_without_running_bodies(bundle: tuple[Path, str]) -> None:
    """A replay that matches and reproduces the output: every call substituted, exit 0."""
    path, name = bundle
    result = replay_cli(path, f"{name}:run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    recorded = load_bundle(path)
    for call in recorded.calls:
        assert f"#{call.seq} {call.label}" in out
    assert out.count("substituted") == len(recorded.calls) == 3
    assert f"run {recorded.run_id} (completed) with {name}:run" in out
    assert 'result: completed, returned {"city":"Lisbon","hotel":"H-Lisbon"}' in out
    assert "reproduced: the replay matched the recording and its behaviour" in out
    assert sys.modules[name].BODIES == []


def test_replaying_a_failure_reproduces_it(
    tmp_path: Path, write_agent: Callable[[str], str]
) -> None:
    """A recorded failure that comes back the same way is a reproduction: exit 0."""
    name = write_agent(agent_source())
    path = tmp_path / "fail.sftrace"
    record_agent(name, path, city="Atlantis")
    result = replay_cli(path, f"{name}:run")
    assert result.exit_code == 0, result.output
    assert "result: failed: ValueError: no hotel in Atlantis" in result.stdout
    assert "recorded: failed: ValueError: no hotel in Atlantis" in result.stdout
    assert "(recorded error ValueError: no hotel in Atlantis)" in result.stdout
    assert "reproduced: the replay matched the recording and its failure" in result.stdout


@pytest.mark.parametrize(
    ("source", "verdict", "says"),
    [
        (DIVERGING, "diverged", "replay diverged at call 1: reached tool weather with a different"),
        (CHANGED, "changed", "behaviour changed: every call matched, but the result differs"),
        (SHORTER, "incomplete", "unused recorded calls: 1"),
        (SWAPPED, "diverged", "replay diverged at call 1: reached llm fake/m-1"),
    ],
)
def test_differing_agent_exits_1(
    source: str,
    verdict: str,
    says: str,
    bundle: tuple[Path, str],
    write_agent: Callable[[str], str],
) -> None:
    """An agent that diverges, skips calls or returns something else: exit 1, and why."""
    path, _ = bundle
    entrypoint = f"{write_agent(source)}:run"
    result = replay_cli(path, entrypoint)
    assert result.exit_code == 1, result.output
    assert says in result.stdout
    assert "Traceback" not in result.output
    document = orjson.loads(replay_cli(path, entrypoint, "--json").stdout)
    assert document["verdict"] == verdict
    assert document["reproduced"] is False


def test_divergence_shows_the_differing_input(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    """The divergence message gives the JSON path and both values."""
    path, _ = bundle
    result = replay_cli(path, f"{write_agent(DIVERGING)}:run")
    assert "divergence:" in result.stdout
    assert '"Porto"' in line_with(result.stdout, "$.city")
    assert '"Lisbon"' in line_with(result.stdout, "$.city")
    assert "result: diverged: the replay raised sftrace.ReplayMismatchError at call 1" in (
        result.stdout
    )


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


@pytest.mark.parametrize(
    ("options", "exit_code", "bodies", "actions"),
    [
        ((), 0, [], ["substituted"] * 3),
        (("--mode", "live"), 1, [], ["refused"]),
        (
            ("--mode", "live", "--allow-live-tool", "weather", "--allow-live-tool", "book"),
            0,
            ["weather", "llm", "book"],
            ["executed"] * 3,
        ),
        (
            ("--mode", "hybrid", "--live-llm", "fake/m-1"),
            0,
            ["llm"],
            ["substituted", "executed", "substituted"],
        ),
    ],
)
def test_modes_decide_which_bodies_run(
    options: tuple[str, ...],
    exit_code: int,
    bodies: list[str],
    actions: list[str],
    bundle: tuple[Path, str],
) -> None:
    """--mode, --allow-live-tool and --live-llm reach the replay: the right bodies run."""
    path, name = bundle
    result = replay_cli(path, f"{name}:run", *options, "--json")
    assert result.exit_code == exit_code, result.output
    document = orjson.loads(result.stdout)
    assert [item["action"] for item in document["matched"]] == actions
    assert bodies == sys.modules[name].BODIES


@pytest.mark.parametrize(("match", "exit_code"), [("strict", 1), ("unordered", 0)])
def test_match_option(
    match: str, exit_code: int, bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    """--match unordered accepts the same calls in another order; strict does not."""
    path, _ = bundle
    result = replay_cli(path, f"{write_agent(SWAPPED)}:run", "--match", match)
    assert result.exit_code == exit_code, result.output
    # a divergence says how a fix that changed a call on purpose keeps replaying
    assert ("--on-miss live runs calls the recording lacks" in result.output) == (exit_code == 1)


def test_json_document(bundle: tuple[Path, str]) -> None:
    """--json: the report's facts as one JSON document; the agent's prints go to stderr."""
    path, name = bundle
    result = replay_cli(path, f"{name}:run", "--json")
    assert result.exit_code == 0, result.output
    assert "agent says hello" in result.stderr
    document = orjson.loads(result.stdout)
    recorded = load_bundle(path)
    assert list(document) == [
        "bundle",
        "entrypoint",
        "mode",
        "match",
        "verdict",
        "reproduced",
        "reproduced_failure",
        "recorded",
        "replay",
        "matched",
        "match_counts",
        "unused",
        "covered",
        "divergence",
        "recording_end",
        "saved_path",
    ]
    assert document["verdict"] == "reproduced"
    assert (document["entrypoint"], document["mode"], document["match"]) == (
        f"{name}:run",
        "frozen",
        "strict",
    )
    assert document["recorded"]["run_id"] == recorded.run_id
    assert document["recorded"]["output"] == recorded.output
    assert document["replay"]["return_value"] == recorded.output
    assert document["replay"]["error"] is None
    assert [(item["seq"], item["name"]) for item in document["matched"]] == [
        (call.seq, call.name) for call in recorded.calls
    ]
    assert document["unused"] == []
    assert document["divergence"] is None


def test_json_document_of_a_divergence(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    """--json names the divergence (type, call number, message) and the unused calls."""
    path, _ = bundle
    result = replay_cli(path, f"{write_agent(DIVERGING)}:run", "--json")
    assert result.exit_code == 1, result.output
    document = orjson.loads(result.stdout)
    divergence = document["divergence"]
    assert (divergence["type"], divergence["call_number"]) == ("ReplayMismatchError", 1)
    assert '"Porto"' in divergence["message"]
    assert document["replay"]["status"] == "diverged"
    assert document["replay"]["error"]["type"] == "sftrace.ReplayMismatchError"
    assert [call["name"] for call in document["unused"]] == ["weather", "m-1", "book"]


def test_save_writes_the_replayed_run(bundle: tuple[Path, str], tmp_path: Path) -> None:
    """--save writes the replayed run as a bundle pointing back at the recording."""
    path, name = bundle
    saved = tmp_path / "replayed.sftrace"
    result = replay_cli(path, f"{name}:run", "--save", str(saved))
    assert result.exit_code == 0, result.output
    assert f"saved the replayed run: {saved}" in result.stdout
    replayed, recorded = load_bundle(saved), load_bundle(path)
    assert replayed.manifest.derived_from == {"run_id": recorded.run_id, "how": "replay"}
    assert [call.input for call in replayed.calls] == [call.input for call in recorded.calls]
    again = replay_cli(path, f"{name}:run", "--save", str(saved))
    assert again.exit_code == 2
    assert "--overwrite" in again.stderr
    assert replay_cli(path, f"{name}:run", "--save", str(saved), "--overwrite").exit_code == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.sftrace", "--entrypoint", "{name}:run"], "bundle not found"),
        (["{bundle}", "--entrypoint", "no_such_module_xyz:run"], "cannot import"),
        (["{bundle}", "--entrypoint", "{name}:nothing"], "has no attribute 'nothing'"),
        (["{bundle}", "--entrypoint", "no-colon"], "must be 'module:function'"),
        (["{bundle}", "-e", "{name}:run", "--mode", "hybrid", "--live-llm", "m-1"], "provider"),
        (["{bundle}", "-e", "{name}:run", "--live-llm", "fake/m-1"], "needs mode='hybrid'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], says: str, bundle: tuple[Path, str]
) -> None:
    """Unreadable bundles, unimportable entrypoints, bad values: one stderr line, exit 2."""
    path, name = bundle
    result = invoke("replay", *(arg.format(bundle=path, name=name) for arg in args))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert sys.modules[name].BODIES == []


@pytest.mark.parametrize("option", ["--mode", "--match"])
def test_invalid_choice_is_a_usage_error(option: str, bundle: tuple[Path, str]) -> None:
    """An unknown --mode or --match value is refused before anything runs: exit 2."""
    path, name = bundle
    result = replay_cli(path, f"{name}:run", option, "sideways")
    assert result.exit_code == 2
    assert "'sideways' is not one of" in result.stderr
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback(bundle: tuple[Path, str]) -> None:
    """--debug prints the traceback of a bad-input error (and still exits 2)."""
    path, _ = bundle
    result = invoke("--debug", "replay", path, "--entrypoint", "no_such_module_xyz:run")
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert "ConfigError" in result.stderr


def test_reproduced_compares_the_return_value_when_no_output_was_set(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    """A recording made with set_output(run(...)) is reproduced by run's return value."""
    path, name = bundle
    assert replay_run(path, f"{name}:run").reproduced
    assert not replay_run(path, f"{write_agent(CHANGED)}:run").reproduced


# --- the installed command ----------------------------------------------------------


def sftrace_command() -> str:
    """The ``sftrace`` console script of the environment running the tests."""
    beside = Path(sys.executable).parent / "sftrace"
    found = str(beside) if beside.exists() else shutil.which("sftrace")
    assert found, "the sftrace console script is not installed (pip install -e .)"
    return found


@pytest.mark.slow
def test_installed_command_exit_codes_without_tracebacks(
    bundle: tuple[Path, str], write_agent: Callable[[str], str], tmp_path: Path
) -> None:
    """The real `sftrace replay`, in a fresh process: exit 0, 1 and 2, never a traceback."""
    path, name = bundle
    diverging = write_agent(DIVERGING)
    cases: list[tuple[list[str], int]] = [
        ([f"{name}:run"], 0),
        ([f"{diverging}:run"], 1),
        (["no_such_module_xyz:run"], 2),
        ([f"{name}:run", "--mode", "sideways"], 2),
    ]
    for entrypoint_and_options, expected in cases:
        args = [sftrace_command(), "replay", str(path), "--entrypoint", *entrypoint_and_options]
        done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert done.returncode == expected, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
    missing = subprocess.run(
        [sftrace_command(), "replay", "nowhere.sftrace", "-e", f"{name}:run", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stdout == ""
    assert missing.stderr.count("\n") == 1
    document: dict[str, Any] = orjson.loads(
        subprocess.run(
            [sftrace_command(), "replay", str(path), "-e", f"{name}:run", "--json"],
            capture_output=True,
            cwd=tmp_path,
            timeout=60,
            check=True,
        ).stdout
    )
    assert document["verdict"] == "reproduced"


def test_limit_shortens_the_list_of_matched_calls(bundle: tuple[Path, str]) -> None:
    """--limit lists the first N matched calls and says how many more there are."""
    path, name = bundle
    result = replay_cli(path, f"{name}:run", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("substituted") == 1
    assert "... and 2 more matched calls (--limit 0 lists all)" in result.stdout


# --- match tiers ----------------------------------------------------------------------

PADDED = agent_source(weather_arg='city + " "')  # the same city, with a trailing space


def test_a_normalized_match_is_shown_with_its_tier_and_paths(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    path, _ = bundle
    name = write_agent(PADDED)
    result = replay_cli(path, f"{name}:run")
    assert result.exit_code == 0, result.output
    assert "substituted [normalized]  (input differs at $.city)" in result.stdout
    assert result.stdout.count("[exact]") == 2
    document = orjson.loads(replay_cli(path, f"{name}:run", "--json").stdout)
    assert [item["tier"] for item in document["matched"]] == ["normalized", "exact", "exact"]
    assert document["matched"][0]["differences"] == [
        {"path": "$.city", "recorded": "Lisbon", "reached": "Lisbon ", "missing": None}
    ]
    assert document["match_counts"] == {
        "exact": 2,
        "normalized": 1,
        "relaxed": 0,
        "live": 0,
        "unused": 0,
    }


def test_tiers_exact_turns_tolerance_off(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    path, _ = bundle
    name = write_agent(PADDED)
    result = replay_cli(path, f"{name}:run", "--tiers", "exact")
    assert result.exit_code == 1, result.output
    assert "diverged" in result.stdout


def test_match_ignore_matches_a_changed_input_relaxed(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    path, _ = bundle
    name = write_agent(DIVERGING)  # asks for Porto's weather
    assert replay_cli(path, f"{name}:run").exit_code == 1
    result = replay_cli(path, f"{name}:run", "--match-ignore", "weather=$.city")
    assert result.exit_code == 0, result.output
    assert "substituted [relaxed]  (input differs at $.city)" in result.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--tiers", "exact,fuzzy"], "unknown match tier 'fuzzy'"),
        (["--tiers", "normalized"], "must include 'exact'"),
        (["--match-ignore", "weather"], "--match-ignore takes NAME=PATH"),
        (["--match-ignore", "weather=a..b"], "invalid match_ignore['weather'] path"),
        (["--tiers", "exact", "--match-ignore", "weather=city"], "leave out 'relaxed'"),
    ],
)
def test_bad_tier_options_exit_2_with_one_line(
    bundle: tuple[Path, str], options: list[str], message: str
) -> None:
    path, name = bundle
    result = replay_cli(path, f"{name}:run", *options)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


# --- on_miss="live" -------------------------------------------------------------------

WITH_CHECK = (
    agent_source().replace(  # the fix adds a check (a new tool call) before booking
        "    hotel = book(city)\n",
        "    check(city)\n    hotel = book(city)\n",
    )
    + """

@trace_tool
def check(city: str) -> dict:
    BODIES.append("check")
    return {"ok": True}
"""
)


def test_on_miss_live_runs_the_new_call_and_saves_a_refreshed_bundle(
    bundle: tuple[Path, str], write_agent: Callable[[str], str], tmp_path: Path
) -> None:
    path, _ = bundle
    name = write_agent(WITH_CHECK)
    assert replay_cli(path, f"{name}:run").exit_code == 1  # diverges without on_miss
    refreshed = tmp_path / "refreshed.sftrace"
    result = replay_cli(
        path, f"{name}:run", "--on-miss", "live", "--allow-live-tool", "check", "--save", refreshed
    )
    assert result.exit_code == 0, result.output
    assert "new tool check" in result.stdout
    assert "live" in result.stdout
    module = sys.modules[name]
    assert module.BODIES == ["check"]
    saved = load_bundle(refreshed)
    assert saved.manifest.derived_from == {"run_id": load_bundle(path).run_id, "how": "on_miss"}
    assert [call.name for call in saved.calls] == ["weather", "m-1", "check", "book"]
    module.BODIES.clear()
    frozen = replay_cli(refreshed, f"{name}:run", "--json")
    assert frozen.exit_code == 0, frozen.output
    assert orjson.loads(frozen.stdout)["match_counts"]["exact"] == 4
    assert module.BODIES == []


def test_on_miss_live_without_the_tool_allowed_diverges(
    bundle: tuple[Path, str], write_agent: Callable[[str], str]
) -> None:
    path, _ = bundle
    name = write_agent(WITH_CHECK)
    result = replay_cli(path, f"{name}:run", "--on-miss", "live")
    assert result.exit_code == 1, result.output
    assert sys.modules[name].BODIES == []


def test_bad_on_miss_exits_2(bundle: tuple[Path, str]) -> None:
    path, name = bundle
    result = replay_cli(path, f"{name}:run", "--on-miss", "retry")
    assert result.exit_code == 2
    assert "retry" in result.stderr


def test_a_failure_standing_for_an_unreachable_class_is_named_once() -> None:
    """A replayed failure whose class no imported module holds shows its recorded type
    and message once, not ``pkg.Error: pkg.Error: message``."""
    from sftrace import RecordedDependencyError
    from sftrace._cli.replay_report import _error_document

    error = RecordedDependencyError("pkg.QuotaExceeded", "quota exceeded for acme")
    assert _error_document(error) == {
        "type": "pkg.QuotaExceeded",
        "message": "quota exceeded for acme",
    }
