"""model layer of sftrace (private)."""
