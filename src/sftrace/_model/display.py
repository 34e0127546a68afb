"""How runs display in notebooks: a hook the view layer fills.

``Bundle``, ``ReplayResult`` and ``Report`` define ``_repr_html_`` through
:func:`repr_html`; the HTML itself comes from the view layer (``sftrace._view``), which
sits above them. The package's ``__init__`` registers a renderer that imports the view
on first use, so lower layers never import it and ``import sftrace`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_renderer: Callable[[Any], str] | None = None


def register_html_renderer(renderer: Callable[[Any], str]) -> None:
    """Set the function that turns a run, a replay or a report into notebook HTML."""
    global _renderer
    _renderer = renderer


def repr_html(value: Any) -> str | None:
    """The notebook HTML of ``value``, or None (plain ``repr``) when no view is registered."""
    renderer = _renderer
    return None if renderer is None else renderer(value)
