"""``sftrace export --pytest``: turn a recorded run into a short, readable pytest module.

The module uses the plugin's API (the ``sftrace_replay`` fixture and
``sftrace.testing.assert_expectations``), so it states what the test checks and
nothing of how replay works::

    BUNDLE = Path(__file__).parent / "bundles/refund.sftrace"
    ENTRYPOINT = "refund_agent:handle"
    AGENT_PATH = ...  # the agent's directory, put on sys.path: runs from any directory
    EXPECTED_OUTPUT = {"decision": "denied"}

    def test_refund(sftrace_replay):
        result = sftrace_replay(BUNDLE, ENTRYPOINT, agent_path=AGENT_PATH)
        assert_expectations(result, output=EXPECTED_OUTPUT, not_called=["issue_refund"])

Without expectations the test checks that the replay behaves as recorded; when the
recorded run failed, that the replay now completes (the failure is fixed).
"""

from __future__ import annotations

import keyword
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from sftrace._bundle.load import load_bundle
from sftrace._errors import ConfigError
from sftrace._model.policy import MatchMode
from sftrace._model.text import first_line
from sftrace._regress.expectations import Expectations, expectations_from_files
from sftrace._replay.options import ReplayOptions
from sftrace._replay.run import resolve_entrypoint

_ENTRYPOINT: Final = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_WIDTH: Final = 88


def export_pytest(
    bundle: str | os.PathLike[str],
    *,
    entrypoint: str,
    expect_output: str | os.PathLike[str] | None = None,
    expect_trajectory: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    match: MatchMode | str = MatchMode.STRICT,
    tiers: Iterable[str] | None = None,
    match_ignore: Mapping[str, Iterable[str]] | None = None,
    on_miss: str = "error",
    allow_live_tools: Iterable[str] | None = None,
    live_llms: Iterable[str] | None = None,
) -> Path:
    """Write a pytest module replaying ``bundle`` against ``entrypoint``; return its path.

    ``expect_output``: a JSON file holding the corrected output. ``expect_trajectory``:
    an expectations document (JSON or TOML; see ``sftrace.Expectations``). ``output``:
    the module to write (default ``test_<bundle name>.py`` in the working directory);
    an existing file is replaced only with ``overwrite``. ``match``: how the test's replay
    pairs calls (``"strict"`` already accepts any order among calls the recording shows
    were concurrent; ``"unordered"`` accepts any order at all). ``tiers``,
    ``match_ignore``, ``on_miss``, ``allow_live_tools`` and ``live_llms``: as
    ``sftrace.replay_run`` takes them, so the test follows a fix that rewords a prompt or
    adds a call; they are written into the test's replay call.
    """
    parsed_match = MatchMode.parse(match, parameter="match")
    replay_options = _replay_options(
        match=parsed_match,
        tiers=tiers,
        match_ignore=match_ignore,
        on_miss=on_miss,
        allow_live_tools=allow_live_tools,
        live_llms=live_llms,
    )
    bundle_path = Path(bundle)
    recorded = load_bundle(bundle_path)
    if not isinstance(entrypoint, str) or not _ENTRYPOINT.match(entrypoint):
        raise ConfigError(
            f"entrypoint must be 'module:function' (e.g. 'my_agent:run'), got {entrypoint!r}"
        )
    expectations = expectations_from_files(expect_output, expect_trajectory)
    target = Path(output) if output is not None else Path(f"test_{_identifier(bundle_path)}.py")
    if target.suffix != ".py":
        raise ConfigError(f"the test module must be a .py file, got {str(target)!r}")
    if target.exists() and not overwrite:
        raise ConfigError(
            f"{str(target)!r} already exists; choose another path with -o or pass --overwrite"
        )
    agent_dir = _import_root(entrypoint)
    failure = recorded.failure if recorded.status == "failed" else None
    source = render_module(
        bundle=_relative(bundle_path, target),
        entrypoint=entrypoint,
        import_root=_relative(agent_dir, target),
        expectations=expectations,
        test_name=_test_name(target, bundle_path),
        recorded=(
            f"failed with {failure.type}: {first_line(failure.message or '')}"
            if failure is not None
            else recorded.status
        ),
        recorded_failed=failure is not None,
        match=parsed_match,
        replay_options=replay_options,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(source, encoding="utf-8")
    os.replace(partial, target)
    return target


def _replay_options(
    *,
    match: MatchMode,
    tiers: Iterable[str] | None,
    match_ignore: Mapping[str, Iterable[str]] | None,
    on_miss: str,
    allow_live_tools: Iterable[str] | None,
    live_llms: Iterable[str] | None,
) -> dict[str, Any]:
    """The replay options the test passes besides ``match``, as JSON-like values; checked
    now (``ConfigError``), as the replay would check them."""
    options: dict[str, Any] = {}
    if tiers is not None:
        options["tiers"] = list(tiers)
    if match_ignore:
        options["match_ignore"] = {key: list(paths) for key, paths in match_ignore.items()}
    if on_miss != "error":
        options["on_miss"] = on_miss
    if allow_live_tools:
        options["allow_live_tools"] = list(allow_live_tools)
    if live_llms:
        options["live_llms"] = list(live_llms)
    ReplayOptions.build(match=match, **options)
    return options


def _import_root(entrypoint: str) -> Path:
    """The directory the entrypoint's top-level package or module is imported from.

    The entrypoint must resolve now (``ConfigError`` otherwise: a test that cannot import
    its agent is of no use); the generated test puts this directory on ``sys.path``, so it
    runs from any working directory, as suites do with ``pythonpath``.
    """
    resolve_entrypoint(entrypoint)
    module_name = entrypoint.partition(":")[0]
    top = sys.modules[module_name.partition(".")[0]]
    location = getattr(top, "__file__", None)
    if location is None:  # a namespace package
        locations = list(getattr(top, "__path__", []))
        if not locations:
            raise ConfigError(f"cannot tell where the entrypoint module {module_name!r} lives")
        return Path(locations[0]).resolve().parent
    path = Path(location).resolve()
    return path.parent.parent if path.name == "__init__.py" else path.parent


def render_module(
    *,
    bundle: str,
    entrypoint: str,
    import_root: str = ".",
    expectations: Expectations | None,
    test_name: str,
    recorded: str,
    recorded_failed: bool,
    match: MatchMode = MatchMode.STRICT,
    replay_options: Mapping[str, Any] | None = None,
) -> str:
    """The text of the test module."""
    if expectations is None and recorded_failed:
        expectations = Expectations(status="completed")
    # Recorded text (names, messages, paths) goes into the module only as escaped string
    # literals, never into its docstring or comments: a bundle may hold any characters.
    lines = [
        '"""Regression test for an agent run recorded with sftrace (see RECORDED).',
        "",
        "Exported by `sftrace export`. The replay is offline: every tool and LLM call the",
        "agent makes is answered from the bundle, in order, and the test fails if the agent",
        "reaches a call the recording cannot answer.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import sys",
        "from pathlib import Path",
        "",
    ]
    if expectations is None:
        lines.append("from sftrace.testing import assert_same_as_recorded")
    else:
        lines.append("from sftrace.testing import assert_expectations")
    lines += [
        "",
        f"BUNDLE = Path(__file__).parent / {_string(bundle)}",
        f"ENTRYPOINT = {_string(entrypoint)}",
        f"RECORDED = {_string(f'the recorded run {recorded}')}",
        "# Where the agent is imported from, so the test runs from any directory.",
        f"AGENT_PATH = str((Path(__file__).parent / {_string(import_root)}).resolve())",
        "if AGENT_PATH not in sys.path:",
        "    sys.path.insert(0, AGENT_PATH)",
    ]
    arguments: list[tuple[str, str]] = []
    if expectations is not None:
        document = expectations.to_dict()
        if "output" in document:
            lines += ["", f"EXPECTED_OUTPUT = {literal(document.pop('output'), 0)}"]
            arguments.append(("output", "EXPECTED_OUTPUT"))
        arguments += [(key, literal(value, 8)) for key, value in document.items()]
    lines += [
        "",
        "",
        f"def {test_name}(sftrace_replay):",
        *_replay_call(match, replay_options or {}),
    ]
    if expectations is None:
        lines.append("    assert_same_as_recorded(result)")
    else:
        lines.append("    assert_expectations(")
        lines.append("        result,")
        lines.extend(f"        {key}={value}," for key, value in arguments)
        lines.append("    )")
    return "\n".join(lines) + "\n"


def _replay_call(match: MatchMode, options: Mapping[str, Any]) -> list[str]:
    """The test's ``sftrace_replay(...)`` line(s), with the options that are not defaults."""
    arguments = [("agent_path", "AGENT_PATH")]
    if match is not MatchMode.STRICT:
        arguments.append(("match", _string(match.value)))
    arguments += [(key, literal(value, 8)) for key, value in options.items()]
    one_line = ", ".join(f"{key}={value}" for key, value in arguments)
    call = f"    result = sftrace_replay(BUNDLE, ENTRYPOINT{', ' if one_line else ''}{one_line})"
    if len(call) <= _WIDTH and "\n" not in call:
        return [call]
    lines = ["    result = sftrace_replay(", "        BUNDLE,", "        ENTRYPOINT,"]
    lines += [f"        {key}={value}," for key, value in arguments]
    return [*lines, "    )"]


def literal(value: Any, indent: int) -> str:
    """A Python literal for a JSON value, on one line when it fits, else one item a line."""
    flat = _flat(value)
    if len(flat) + indent <= _WIDTH or not isinstance(value, dict | list) or not value:
        return flat
    inner = " " * (indent + 4)
    if isinstance(value, dict):
        items = [
            f"{inner}{_string(str(key))}: {literal(item, indent + 4)},"
            for key, item in value.items()
        ]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{inner}{literal(item, indent + 4)}," for item in value]
    return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"


def _flat(value: Any) -> str:
    if value is None:
        return "None"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(str(k))}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flat(item) for item in value) + "]"
    raise ConfigError(f"cannot write {type(value).__qualname__} {value!r} as a JSON literal")


def _string(text: str) -> str:
    """A Python string literal for any text: JSON's form (a valid Python literal) when it
    is all printable, else ``repr`` (which escapes every non-printable character)."""
    try:
        json_literal = orjson.dumps(text).decode()
    except TypeError:
        return repr(text)
    # JSON leaves DEL, line separators and other non-printable characters as they are.
    return json_literal if json_literal.isprintable() else repr(text)


def _relative(bundle: Path, target: Path) -> str:
    try:
        return Path(os.path.relpath(bundle.resolve(), target.resolve().parent)).as_posix()
    except ValueError:  # another drive
        return bundle.resolve().as_posix()


def _identifier(path: Path) -> str:
    stem = path.name.removesuffix(".sftrace")
    name = re.sub(r"\W+", "_", stem).strip("_").lower() or "recorded_run"
    return name


def _test_name(target: Path, bundle: Path) -> str:
    stem = re.sub(r"\W+", "_", target.stem).strip("_").lower()
    name = stem if stem.startswith("test_") else f"test_{_identifier(bundle)}"
    if not name.isidentifier() or keyword.iskeyword(name):
        name = "test_recorded_run"
    return name
