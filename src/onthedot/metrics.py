"""Prometheus metrics of one process, in their own registry (several runtimes can share a
test process without clashing)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENESS_BUCKETS_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.jobs_created = Counter("onthedot_jobs_created", "Jobs created",
                                    registry=self.registry)
        self.runs_finished = Counter("onthedot_runs_finished", "Runs that reached a terminal "
                                     "status in this process", ["status"], registry=self.registry)
        self.runs_by_status = Gauge("onthedot_runs", "Open runs by status (at scrape time; "
                                    "counted up to a cap, so a value at the cap means at least)",
                                    ["status"], registry=self.registry)
        self.dispatch_lateness = Histogram(
            "onthedot_dispatch_lateness_seconds", "Enqueue time minus scheduled time",
            buckets=LATENESS_BUCKETS_SECONDS, registry=self.registry)
        self.queue_depth = Gauge("onthedot_queue_depth", "Messages waiting or in flight "
                                 "(at scrape time)", registry=self.registry)
        self.dead_letters = Gauge("onthedot_dead_letters", "Dead-lettered runs (at scrape time; "
                                  "counted up to a cap)", registry=self.registry)
        self.attempts = Counter("onthedot_run_attempts", "Action attempts started",
                                registry=self.registry)
        self.rescued = Counter("onthedot_runs_rescued", "Runs the rescuer handed back, by what "
                               "stranded them", ["kind"], registry=self.registry)
        self.event_lag = Gauge("onthedot_run_event_lag_seconds", "Age of the oldest run event "
                               "the recurring watcher has not applied (at scrape time); it "
                               "grows while a long transaction hides newer events",
                               registry=self.registry)
        self.deliveries = Counter("onthedot_deliveries", "Sends of run outputs to their "
                                  "channels, by channel and outcome (delivered, failed)",
                                  ["channel", "status"], registry=self.registry)
