"""Installs the test network guard in every Python subprocess the suite starts.

tests/conftest.py puts this directory on ``PYTHONPATH``; see loopback_guard.py.
"""

import loopback_guard

loopback_guard.install(log_to_file=True)
