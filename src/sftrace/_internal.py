"""Internal-error handling: never break the host in production, be strict under tests.

An internal failure of sftrace (a full disk, an exporter error, a bug) goes through
:func:`internal_error`. In production it is logged once per cause and swallowed, so the
agent behaves exactly as it would without sftrace. Under pytest, or with
``SFTRACE_STRICT=1``, it is raised so it gets found.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from sftrace._errors import SftraceError

logger = logging.getLogger("sftrace")

_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()


_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def flag_value(raw: str) -> bool | None:
    """The truth an environment variable's value spells (``1``/``true``/``yes``/``on`` or
    ``0``/``false``/``no``/``off``, any case, spaces around ignored); None for any other."""
    flag = raw.strip().lower()
    if flag in _TRUE_WORDS:
        return True
    if flag in _FALSE_WORDS:
        return False
    return None


def strict_mode() -> bool:
    """True when internal errors should raise: ``SFTRACE_STRICT`` set, or under pytest."""
    raw = os.environ.get("SFTRACE_STRICT", "")
    flag = flag_value(raw)
    if flag is not None:
        return flag
    if raw.strip():
        _warn_unknown_strict(raw)
    return "pytest" in sys.modules


_unknown_strict: set[str] = set()


def _warn_unknown_strict(raw: str) -> None:
    """Say once per value that ``SFTRACE_STRICT`` holds neither a true nor a false word."""
    with _seen_lock:
        if raw in _unknown_strict:
            return
        _unknown_strict.add(raw)
    logger.warning(
        "sftrace: SFTRACE_STRICT=%r is neither true (1, true, yes, on) nor false (0, false, "
        "no, off); it is ignored (strict only under pytest)",
        raw,
    )


def internal_error(what: str, exc: BaseException) -> None:
    """Report an internal failure: raise it in strict mode, else log it once per cause."""
    if strict_mode():
        raise exc
    log_once(what, exc)


def warn_once(what: str, message: str, exc: BaseException | None = None) -> None:
    """Log ``message``, one line, once per ``what``: for what sftrace could not do and
    worked around (``exc``, the cause, has its traceback logged at DEBUG level)."""
    key = (what, "")
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    logger.warning("sftrace: %s", message)
    if exc is not None:
        logger.debug("sftrace: %s", what, exc_info=exc)


def log_once(what: str, exc: BaseException) -> None:
    """Log ``exc`` for ``what`` once per (what, exception type) pair.

    An :class:`~sftrace.SftraceError` says what failed and how to fix it: one line (its
    traceback only at DEBUG level). Anything else is a fault of sftrace or of its
    surroundings, logged with its traceback.
    """
    key = (what, type(exc).__qualname__)
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    explained = isinstance(exc, SftraceError)
    logger.warning(
        "sftrace: %s failed: %s: %s",
        what,
        type(exc).__name__,
        exc,
        exc_info=None if explained else exc,
    )
    if explained:
        logger.debug("sftrace: %s failed", what, exc_info=exc)
