"""Suite-wide defaults. The per-user quotas (ONTHEDOT_MAX_ACTIVE_JOBS, default 100, and
ONTHEDOT_CREATE_RATE_PER_MINUTE, default 600) are off here: many tests create hundreds or
thousands of jobs for one user to test other things. The quota tests set them explicitly
(tests/api/test_quotas.py, tests/conformance/test_tokens.py). Set before any Settings is built,
and inherited by the server processes the tests start."""

from __future__ import annotations

import os

os.environ.setdefault("ONTHEDOT_MAX_ACTIVE_JOBS", "0")
os.environ.setdefault("ONTHEDOT_CREATE_RATE_PER_MINUTE", "0")
