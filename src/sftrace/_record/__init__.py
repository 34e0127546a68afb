"""record layer of sftrace (private)."""
