"""onthedot: scheduled tasks that fire on time, are never lost, and are safe to retry."""

__version__ = "0.1.0"
