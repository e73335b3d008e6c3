"""Suite-wide defaults. The per-user quotas (ONTHEDOT_MAX_ACTIVE_JOBS, default 100, and
ONTHEDOT_CREATE_RATE_PER_MINUTE, default 600) are off here: many tests create hundreds or
thousands of jobs for one user to test other things. The quota tests set them explicitly
(tests/api/test_quotas.py, tests/conformance/test_tokens.py). Set before any Settings is built,
and inherited by the server processes the tests start."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("ONTHEDOT_MAX_ACTIVE_JOBS", "0")
os.environ.setdefault("ONTHEDOT_CREATE_RATE_PER_MINUTE", "0")


# Under pytest-xdist (the README's test command runs two test processes, `--dist loadgroup`),
# the tests that start fleets of processes or hold many database connections share one group:
# they run one after another in one test process, while the other runs the rest. Two of them
# at once would exceed PostgreSQL's 100 connections and fight over the two cores.
HEAVY_GROUP = "heavy"
HEAVY_PATHS = ("tests/failure/", "tests/engine/test_lifecycle_races.py",
               "tests/engine/test_races.py", "tests/engine/test_processes.py",
               "tests/cli/test_compose_roles.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith(HEAVY_PATHS):
            item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP))
