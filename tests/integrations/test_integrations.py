"""What the integrations share: no SDK import by default, and request field paths."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from sftrace import ConfigError
from sftrace.integrations._common import Options, request_json


def test_importing_sftrace_and_its_integrations_package_imports_no_sdk() -> None:
    """The SDKs are loaded only by the integration module the user imports."""
    code = (
        "import sys, sftrace, sftrace.integrations\n"
        "sdks = {'openai', 'anthropic', 'langchain_core', 'langgraph', 'httpx', 'httpx2',\n"
        "        'mcp', 'agents'}\n"
        "print(sorted(sdks & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


REQUEST: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi", "name": "ada"}, {"role": "tool"}],
    "metadata": {"trace_id": "t-1", "team": "support"},
}


@pytest.mark.parametrize(
    ("ignore", "expected"),
    [
        ((), REQUEST),
        (("metadata.trace_id",), {**REQUEST, "metadata": {"team": "support"}}),
        (("metadata",), {"model": "m", "messages": REQUEST["messages"]}),
        (
            ("messages.*.name",),
            {**REQUEST, "messages": [{"role": "user", "content": "hi"}, {"role": "tool"}]},
        ),
        (("messages.1",), {**REQUEST, "messages": [REQUEST["messages"][0], None]}),
        (("metadata.*",), {**REQUEST, "metadata": {}}),
        (("absent.path", "messages.7.name"), REQUEST),
    ],
)
def test_ignore_fields_remove_exactly_their_paths(ignore: tuple[str, ...], expected: Any) -> None:
    """Dotted paths with '*' and list indexes remove what they name, nothing else; a
    named list item becomes null, so the later items keep their indexes."""
    options = Options(replay_policy="frozen", ignore_fields=ignore)
    assert json.loads(request_json(REQUEST, options, what="request")) == expected
    assert REQUEST["metadata"]["trace_id"] == "t-1"  # the caller's request is not mutated


def test_transport_options_and_defaults_are_not_part_of_the_request() -> None:
    """extra_headers, extra_query, timeout, stream=False and extra_body=None are left out."""

    class NotGiven:  # the SDKs' sentinel type, recognised by its name
        pass

    request = {
        "model": "m",
        "extra_headers": {"Authorization": "Bearer secret"},
        "extra_query": {"api-version": "1"},
        "timeout": 3.0,
        "stream": False,
        "extra_body": None,
        "temperature": NotGiven(),
    }
    options = Options(replay_policy="frozen", ignore_fields=())
    assert request_json(request, options, what="request") == '{"model":"m"}'


@pytest.mark.parametrize("path", ["", "a..b", ".a", 3])
def test_malformed_ignore_fields_are_config_errors(path: Any) -> None:
    """A path that names nothing is refused with an example of a valid one."""
    with pytest.raises(ConfigError, match="dotted paths"):
        Options(replay_policy="frozen", ignore_fields=[path])
