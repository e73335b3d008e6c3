"""A supervisor's child that dies at start, in a module light enough that each spawned
interpreter imports it quickly (tests/cli/test_serve_processes.py)."""

from __future__ import annotations

EXIT_AT_START = 2


def exit_at_start(_index: int, _notify_ready: object) -> int:
    """What a real child does when, say, its database went away after the supervisor's checks."""
    return EXIT_AT_START
