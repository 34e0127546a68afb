"""Names of runs and of the files that hold them.

Every name that becomes part of a path goes through :func:`safe_file_stem`, so a name
taken from a bundle (an agent name, a run id) can never point outside its directory.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def new_run_id() -> str:
    """A sortable, unique run id: UTC time to the second, then 8 random hex digits."""
    now = _dt.datetime.now(_dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def safe_file_stem(name: str) -> str:
    return _UNSAFE_NAME.sub("_", name).strip("._") or "agent"
