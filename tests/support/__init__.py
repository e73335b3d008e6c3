"""Real peers for tests: an HTTP webhook receiver on loopback, process helpers, waiting."""
