"""bundle layer of sftrace (private)."""
