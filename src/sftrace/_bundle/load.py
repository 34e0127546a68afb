"""``load_bundle``: a finished bundle, or (when allowed) an interrupted recording."""

from __future__ import annotations

import os

from sftrace._bundle.files import bundle_root
from sftrace._bundle.partial import find_partial, read_partial, unfinished_recordings
from sftrace._bundle.reader import Bundle, load_finished_bundle
from sftrace._errors import BundleError


def load_bundle(
    path: str | os.PathLike[str],
    *,
    verify_integrity: bool = False,
    allow_partial: bool = False,
    eager: bool = False,
) -> Bundle:
    """Load and validate the bundle at ``path``.

    ``verify_integrity``: also check every file against ``checksums.sha256`` (this
    shows a change since the bundle was written; it is not a signature).
    ``allow_partial``: ``path`` may also be an unfinished recording left by a process
    that died (its hidden ``.partial`` directory, or the bundle path it was recording
    to); it is recovered in memory as ``sftrace recover`` would (status
    ``interrupted``, notes saying what was lost), and nothing is written.
    ``eager``: also parse every call's input and output now, so a malformed one is
    refused here. By default each is parsed when it is first read (``Call.input``,
    ``Call.output``), and a malformed one raises ``BundleError`` then, naming the file,
    line and span; ``sftrace validate`` always checks them.

    Loading never executes anything from the bundle, never follows a symbolic link
    inside it, and refuses files and lines over the size limits. Raises ``BundleError``
    naming the file (and line) and the problem.
    """
    root = bundle_root(path)
    if allow_partial:
        partial = find_partial(root)
        if partial is not None:
            return read_partial(partial).bundle()
    if not root.exists() and unfinished_recordings(root):
        raise BundleError(
            f"bundle not found: {str(root)!r} does not exist, but a recording to it never "
            f"finished (its process died or is still running): `sftrace recover "
            f"{root}` turns what it left into a bundle",
            path=str(root),
        )
    return load_finished_bundle(root, verify_integrity=verify_integrity, eager=eager)
