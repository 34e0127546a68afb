"""replay layer of sftrace (private)."""
