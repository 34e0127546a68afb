"""Older bundle format versions: a manifest's ``format_version`` checked against the
versions this reader knows (``SUPPORTED_VERSIONS``), and an older manifest upgraded in
memory, one version at a time, into the newest shape (see docs/bundle-format.md).
A future version registers its step in ``UPGRADES``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sftrace._bundle.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    SUPPORTED_VERSIONS,
    not_a_bundle_message,
)
from sftrace._errors import BundleError

__all__ = ["UPGRADES", "upgraded_manifest"]


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
