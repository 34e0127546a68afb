"""regress layer of sftrace (private)."""
