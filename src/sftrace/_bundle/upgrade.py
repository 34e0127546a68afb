"""Older bundle format versions: a manifest's ``format_version`` checked against the
versions this reader knows (``SUPPORTED_VERSIONS``), and an older manifest upgraded in
memory, one version at a time, into the newest shape (see docs/bundle-format.md).
A future version registers its step in ``UPGRADES``. Also what older recordings meant
by a field read since in another way: a run failure recorded as an exception group
holding one exception (``group_member``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sftrace._bundle.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    SUPPORTED_VERSIONS,
    not_a_bundle_message,
)
from sftrace._errors import BundleError

__all__ = ["GROUP_TYPES", "UPGRADES", "group_member", "upgraded_manifest"]


def _version_1_to_2(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 2 changed what call lines leave out (``_model/stored.py``), not the
    manifest; a version 1 line is a valid version 2 line (it holds what version 2
    leaves out, which readers take as it is)."""
    return {**raw, "format_version": 2}


# format_version -> function upgrading a manifest to the next version.
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _version_1_to_2}


def upgraded_manifest(raw: Any, display: str) -> dict[str, Any]:
    """``raw`` checked to be a manifest of a version this reader knows, in the newest shape."""
    if not isinstance(raw, dict):
        raise BundleError(
            f"{display}: expected a JSON object, got {type(raw).__name__}", path=display
        )
    if raw.get("format") != FORMAT_NAME:
        raise BundleError(not_a_bundle_message(display, raw.get("format")), path=display)
    version = raw.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(
            f"{display}: format_version must be an integer, got {version!r}", path=display
        )
    if version not in SUPPORTED_VERSIONS:
        newest = max(SUPPORTED_VERSIONS)
        hint = (
            "upgrade sftrace to read it"
            if version > newest
            else "this version was never released; the bundle is damaged"
        )
        raise BundleError(
            f"{display}: unsupported bundle format version {version}; this sftrace reads "
            f"versions {sorted(SUPPORTED_VERSIONS)}: {hint}",
            path=display,
        )
    while version < FORMAT_VERSION:
        raw = UPGRADES[version](raw)
        version = raw["format_version"]
    upgraded: dict[str, Any] = raw
    return upgraded


# --- a run failure recorded as an exception group holding one exception ----------------

GROUP_TYPES = frozenset({"ExceptionGroup", "BaseExceptionGroup", "exceptiongroup.ExceptionGroup"})
_MEMBER = re.compile(r"^\s*\+(?:-\+)?-+ (\S+) -+$")
_BLOCK_END = re.compile(r"^\s*\+-+$")
_PREFIX = re.compile(r"^\s*\| ?")
_TRACEBACK = "Traceback (most recent call last):"


def group_member(error_type: str | None, stacktrace: str | None) -> tuple[str, str] | None:
    """The type and first message line of the one exception inside a run failure recorded
    as an exception group, read from the run's recorded stack trace; None when the failure
    is not such a group or the stack trace doesn't show exactly one exception per group.

    Bundles recorded before the run's failure was read through single-exception groups
    (``run_failure`` in ``_record/run.py``) name the group (``ExceptionGroup: unhandled
    errors in a TaskGroup (1 sub-exception)``); a replay names the exception inside, so
    the recorded side is read the same way. The stack trace is Python's
    ``traceback.format_exception`` text: each group's members are blocks opened by
    ``+-+---- N ----``; the innermost block ends with the member's ``Type: message``.
    """
    if error_type not in GROUP_TYPES or not stacktrace:
        return None
    lines = stacktrace.splitlines()
    markers = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _MEMBER.match(line))]
    if not markers or any(number != "1" for _, number in markers):
        return None
    block: list[str] = []
    for line in lines[markers[-1][0] + 1 :]:
        if _BLOCK_END.match(line):
            break
        block.append(_PREFIX.sub("", line, count=1))
    starts = [i + 1 for i, line in enumerate(block) if line == _TRACEBACK]
    candidates = block[starts[-1] :] if starts else block
    shown = next((text for text in candidates if text and not text[0].isspace()), None)
    if shown is None:
        return None
    name, _, message = shown.partition(": ")
    if not name.replace(".", "").replace("_", "").isalnum():
        return None
    return name, message
