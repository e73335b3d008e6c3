"""Benchmarks. They create tens of thousands of jobs for one user as fast as they can, which is
what the per-user quotas (ONTHEDOT_MAX_ACTIVE_JOBS, ONTHEDOT_CREATE_RATE_PER_MINUTE) exist to
stop: they are off here unless set, and every process a benchmark starts inherits that."""

import os

os.environ.setdefault("ONTHEDOT_MAX_ACTIVE_JOBS", "0")
os.environ.setdefault("ONTHEDOT_CREATE_RATE_PER_MINUTE", "0")
