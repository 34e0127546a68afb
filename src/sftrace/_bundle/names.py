"""Names of runs and of the files that hold them.

Every name that becomes part of a path goes through :func:`safe_file_stem`, so a name
taken from a bundle (an agent name, a run id) can never point outside its directory.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets

from sftrace._bundle.format import BUNDLE_SUFFIX, PARTIAL_SUFFIX

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def new_run_id() -> str:
    """A sortable, unique run id: UTC time to the second, then 8 random hex digits."""
    now = _dt.datetime.now(_dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def safe_file_stem(name: str) -> str:
    """``name`` with everything but letters, digits, ``.``, ``_`` and ``-`` replaced, and
    no leading or trailing dot: it can only name a file inside its directory."""
    return _UNSAFE_NAME.sub("_", name).strip("._") or "agent"


def bundle_name(agent_name: str, run_id: str) -> str:
    """``<agent>-<run_id>.sftrace``, both parts made safe."""
    return f"{safe_file_stem(agent_name)}-{safe_file_stem(run_id)}{BUNDLE_SUFFIX}"


def unique_bundle_name(name: str, run_id: str) -> str:
    """``name`` with the run id before its ``.sftrace`` suffix (``r.sftrace`` ->
    ``r.<run_id>.sftrace``): where a run is kept when its own name is taken."""
    stem = name[: -len(BUNDLE_SUFFIX)] if name.endswith(BUNDLE_SUFFIX) else name
    return f"{stem}.{safe_file_stem(run_id)}{BUNDLE_SUFFIX}"


def parse_utc(text: object) -> _dt.datetime | None:
    """A time as ``manifest.utc_iso`` writes it, or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def is_plain_name(name: object) -> bool:
    """True for a name that stays inside its directory and hides nothing: one path
    component, not ``.`` or ``..``, no NUL, not hidden, not an unfinished recording's."""
    return (
        isinstance(name, str)
        and bool(name)
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and not name.startswith(".")
        and not name.endswith(PARTIAL_SUFFIX)
    )
