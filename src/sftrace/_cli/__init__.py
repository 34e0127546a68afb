"""cli layer of sftrace (private)."""
