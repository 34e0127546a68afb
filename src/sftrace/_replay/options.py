"""``ReplayOptions``: what a replay was asked to do, checked once, passed as one value.

The public entry points (``replay``, ``replay_run``, ``areplay_run``, the CLI, suites)
keep explicit keyword-only parameters for users; each builds one ``ReplayOptions`` with
:meth:`ReplayOptions.build`, which holds every check, and hands that value on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from sftrace._errors import ConfigError
from sftrace._model.calls import Call
from sftrace._model.jsonpath import JsonPath, parse_paths
from sftrace._model.policy import MatchMode, ReplayMode
from sftrace._record.manual import check_agent_version

ManualHandler = Callable[[Call], Any]
MatchTier = Literal["exact", "normalized", "relaxed"]
OnMiss = Literal["error", "live"]
ON_MISS: Final[tuple[OnMiss, ...]] = ("error", "live")
# The tiers in the order a call is tried against them.
TIERS: Final[tuple[MatchTier, ...]] = ("exact", "normalized", "relaxed")
DEFAULT_TIERS: Final[tuple[MatchTier, ...]] = ("exact", "normalized")


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
    tiers: tuple[MatchTier, ...] = DEFAULT_TIERS
    # tool name, "llm", "provider/model" or "*" -> the input paths the relaxed tier ignores
    match_ignore: Mapping[str, tuple[JsonPath, ...]] = field(default_factory=dict)
    # "live": a call that matches no recorded call runs for real (when allowed) instead
    # of diverging; "error": it diverges.
    on_miss: OnMiss = "error"
    # What a saved run's manifest ``derived_from`` records besides the recorded run's
    # id, e.g. ``{"how": "minimize"}``. None: the controller's ``provenance()`` says
    # (``on_miss``, ``replay``, a fork's step). Set by ``minimize``, not by users.
    derived_from: Mapping[str, Any] | None = None

    def may_run_live(self, kind: str, name: str, provider: str | None) -> bool:
        """Whether a call the recording cannot answer may run for real (``on_miss``):
        LLM calls unless ``live_llms`` names others, tools named in ``allow_live_tools``."""
        if kind == "llm":
            return not self.live_llms or f"{provider}/{name}" in self.live_llms
        return "*" in self.allow_live_tools or name in self.allow_live_tools

    def ignored_paths(self, kind: str, name: str, provider: str | None) -> tuple[JsonPath, ...]:
        """The input paths the relaxed tier ignores for a call of this kind and name."""
        keys = ["*"]
        if kind == "llm":
            keys += ["llm", f"{provider}/{name}"]
        else:
            keys.append(name)
        return tuple(path for key in keys for path in self.match_ignore.get(key, ()))

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
        tiers: Iterable[str] | None = None,
        match_ignore: Mapping[str, Iterable[str]] | None = None,
        on_miss: str = "error",
    ) -> ReplayOptions:
        """Check the options as users pass them; raise ``ConfigError`` naming the bad one."""
        parsed_mode = ReplayMode.parse(mode, parameter="mode")
        parsed_match = MatchMode.parse(match, parameter="match")
        llms = _live_llms(live_llms)
        tools = _names(allow_live_tools)
        if on_miss not in ON_MISS:
            raise ConfigError(
                f"invalid on_miss={on_miss!r}: expected 'error' (a call the recording cannot "
                f"answer diverges) or 'live' (it runs for real, when live mode would allow it)"
            )
        live_miss = on_miss == "live"
        if llms and parsed_mode is not ReplayMode.HYBRID and not live_miss:
            raise ConfigError(
                f"live_llms={list(llms)!r} needs mode='hybrid' (got mode="
                f"{parsed_mode.value!r}) or on_miss='live'; in 'live' mode every LLM call "
                f"runs live already"
            )
        if tools and parsed_mode is not ReplayMode.LIVE and not live_miss:
            raise ConfigError(
                f"allow_live_tools={list(tools)!r} needs mode='live' or on_miss='live' (got "
                f"mode={parsed_mode.value!r})"
            )
        if manual is not None and not callable(manual):
            raise ConfigError(f"manual must be a callable taking the recorded Call, got {manual!r}")
        ignore = _match_ignore(match_ignore)
        return cls(
            mode=parsed_mode,
            match=parsed_match,
            live_llms=llms,
            allow_live_tools=tools,
            manual=manual,
            save=Path(save) if save is not None else None,
            overwrite=overwrite,
            agent_version=check_agent_version(agent_version),
            tiers=_tiers(tiers, relaxed=bool(ignore)),
            match_ignore=ignore,
            on_miss="live" if live_miss else "error",
        )


def _names(names: Iterable[str] | None) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        return (names,)
    return tuple(names)


def _tiers(tiers: Iterable[str] | None, *, relaxed: bool) -> tuple[MatchTier, ...]:
    """The tiers in matching order; ``relaxed`` is added by default when paths are ignored."""
    if tiers is None:
        return (*DEFAULT_TIERS, "relaxed") if relaxed else DEFAULT_TIERS
    given = _names(tiers)
    for tier in given:
        if tier not in TIERS:
            raise ConfigError(
                f"unknown match tier {tier!r} in tiers={list(given)!r}; expected some of "
                f"{list(TIERS)!r}, for example tiers=('exact',) to match inputs byte for byte"
            )
    if "exact" not in given:
        raise ConfigError(
            f"tiers={list(given)!r} must include 'exact' (an identical input always matches)"
        )
    if "relaxed" in given and not relaxed:
        raise ConfigError(
            f"tiers={list(given)!r} include 'relaxed' but match_ignore is empty; name the "
            f"input paths to ignore, e.g. match_ignore={{'llm': ['$.messages[0].content']}}"
        )
    if relaxed and "relaxed" not in given:
        raise ConfigError(
            f"match_ignore is given but tiers={list(given)!r} leave out 'relaxed'; add "
            f"'relaxed' to tiers or drop match_ignore"
        )
    return tuple(tier for tier in TIERS if tier in given)


def _match_ignore(
    match_ignore: Mapping[str, Iterable[str]] | None,
) -> Mapping[str, tuple[JsonPath, ...]]:
    if match_ignore is None:
        return {}
    if not isinstance(match_ignore, Mapping):
        raise ConfigError(
            f"match_ignore must map a tool name, 'llm', 'provider/model' or '*' to a list of "
            f"JSON paths, got {match_ignore!r}"
        )
    checked: dict[str, tuple[JsonPath, ...]] = {}
    for key, paths in match_ignore.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(
                f"match_ignore keys must be a tool name, 'llm', 'provider/model' or '*', "
                f"got {key!r}"
            )
        # "$" ignores the whole input: calls of that kind and name then match in order.
        parsed = parse_paths(paths, what=f"match_ignore[{key!r}] path", allow_root=True)
        if parsed:
            checked[key] = parsed
    return checked


def _live_llms(live_llms: Iterable[str] | None) -> tuple[str, ...]:
    checked = _names(live_llms)
    for item in checked:
        provider, sep, model = str(item).partition("/")
        if not sep or not provider or not model:
            raise ConfigError(
                f"live_llms entries must be 'provider/model' (e.g. 'openai/gpt-4o'), got {item!r}"
            )
    return checked


__all__ = ["DEFAULT_TIERS", "TIERS", "ManualHandler", "MatchTier", "OnMiss", "ReplayOptions"]
