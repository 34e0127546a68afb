"""export layer of sftrace (private)."""
