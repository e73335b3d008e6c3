"""Stateless workers: claim a run, execute its action with heartbeats, record, then ack."""

from onthedot.worker.worker import Worker

__all__ = ["Worker"]
