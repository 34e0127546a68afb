"""The HTML report of runs, replays and comparisons (``sftrace view``, ``render_html``)."""
