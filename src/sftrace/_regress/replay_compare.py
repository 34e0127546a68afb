"""``replay_and_compare``: replay a bundle and judge the replay, in one call."""

from __future__ import annotations

import inspect
import os
from typing import Any

from sftrace._bundle.reader import Bundle
from sftrace._errors import ConfigError
from sftrace._regress.compare import ComparisonPolicy, Report, compare
from sftrace._regress.expectations import Expectations
from sftrace._replay.run import Entrypoint, ReplayResult, replay_run

# The options replay_run takes besides the bundle and the entrypoint.
_REPLAY_OPTIONS = tuple(
    name
    for name, parameter in inspect.signature(replay_run).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
)


def replay_and_compare(
    bundle: Bundle | str | os.PathLike[str],
    entrypoint: str | Entrypoint,
    *,
    policy: ComparisonPolicy | None = None,
    expect: Expectations | None = None,
    **replay_options: Any,
) -> tuple[ReplayResult, Report]:
    """Replay ``bundle`` against ``entrypoint`` and compare the replay with the recording.

    ::

        result, report = replay_and_compare("refund.sftrace", "refund_agent:handle")
        assert report.passed, report.format()

    The same as ``replay_run(bundle, entrypoint, **replay_options)`` followed by
    ``compare(bundle, result, policy, expect=expect)``, reading the bundle once.
    ``replay_options`` are those of :func:`replay_run` (``mode``, ``match``,
    ``agent_version``...); another name raises ``ConfigError``.
    """
    unknown = sorted(set(replay_options) - set(_REPLAY_OPTIONS))
    if unknown:
        raise ConfigError(
            f"replay_and_compare: unknown replay option(s) {unknown}; the options are "
            f"{list(_REPLAY_OPTIONS)}"
        )
    result = replay_run(bundle, entrypoint, **replay_options)
    return result, compare(result.bundle, result, policy, expect=expect)


__all__ = ["replay_and_compare"]
