"""``ReplayOptions``: what a replay was asked to do, checked once, passed as one value.

The public entry points (``replay``, ``replay_run``, ``areplay_run``, the CLI, suites)
keep explicit keyword-only parameters for users; each builds one ``ReplayOptions`` with
:meth:`ReplayOptions.build`, which holds every check, and hands that value on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sftrace._errors import ConfigError
from sftrace._model.calls import Call
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._record.manual import check_agent_version

ManualHandler = Callable[[Call], Any]


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """The checked options of one replay (see ``sftrace.replay`` for their meaning)."""

    mode: ReplayMode = ReplayMode.FROZEN
    match: MatchMode = MatchMode.STRICT
    live_llms: tuple[str, ...] = ()
    allow_live_tools: tuple[str, ...] = ()
    manual: ManualHandler | None = None
    save: Path | None = None
    overwrite: bool = False
    agent_version: str | None = None

    @classmethod
    def build(
        cls,
        *,
        mode: ReplayMode | str = ReplayMode.FROZEN,
        match: MatchMode | str = MatchMode.STRICT,
        live_llms: Iterable[str] | None = None,
        allow_live_tools: Iterable[str] | None = None,
        manual: ManualHandler | None = None,
        save: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
        agent_version: str | None = None,
    ) -> ReplayOptions:
        """Check the options as users pass them; raise ``ConfigError`` naming the bad one."""
        parsed_mode = ReplayMode.parse(mode, parameter="mode")
        parsed_match = MatchMode.parse(match, parameter="match")
        llms = _live_llms(live_llms)
        tools = _names(allow_live_tools)
        if llms and parsed_mode is not ReplayMode.HYBRID:
            raise ConfigError(
                f"live_llms={list(llms)!r} needs mode='hybrid' (got mode="
                f"{parsed_mode.value!r}); in 'live' mode every LLM call runs live already"
            )
        if tools and parsed_mode is not ReplayMode.LIVE:
            raise ConfigError(
                f"allow_live_tools={list(tools)!r} needs mode='live' (got "
                f"mode={parsed_mode.value!r})"
            )
        if manual is not None and not callable(manual):
            raise ConfigError(f"manual must be a callable taking the recorded Call, got {manual!r}")
        return cls(
            mode=parsed_mode,
            match=parsed_match,
            live_llms=llms,
            allow_live_tools=tools,
            manual=manual,
            save=Path(save) if save is not None else None,
            overwrite=overwrite,
            agent_version=check_agent_version(agent_version),
        )


def _names(names: Iterable[str] | None) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        return (names,)
    return tuple(names)


def _live_llms(live_llms: Iterable[str] | None) -> tuple[str, ...]:
    checked = _names(live_llms)
    for item in checked:
        provider, sep, model = str(item).partition("/")
        if not sep or not provider or not model:
            raise ConfigError(
                f"live_llms entries must be 'provider/model' (e.g. 'openai/gpt-4o'), got {item!r}"
            )
    return checked


__all__ = ["ManualHandler", "ReplayOptions"]
