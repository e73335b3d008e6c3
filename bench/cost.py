"""What a drain costs per run: database statements, transactions (commits) and CPU time of the
onthedot process(es), divided by the runs drained. The instruments of the run-lifecycle
redesign (docs/performance.md, "Instruments for the run-lifecycle redesign (issue 19)").

* statements and transactions: the process's own counts (src/onthedot/db/counting.py), read
  from ``onthedot_db_statements_total`` / ``onthedot_db_transactions_total`` on /metrics for a
  child process, or from ``onthedot.metrics.db_totals()`` in-process. A scrape itself reads the
  store (the gauges of shared state), so the statements and CPU time of each scrape (or
  in-process completion poll) taken during the drain are measured beforehand on the idle
  server and taken off;
* CPU: user + system time of the process and its children (psutil), or ``time.process_time()``
  in-process (every thread, the SQLite connection's included).

The window opens just before the due second (nothing is due earlier, so nothing of the drain
is missed) and closes when the bench sees every run done and its event applied by the
recurring watcher (which ends each one-time job after its run finished); it polls every 0.2 s,
so up to that much idle time is in the window.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.stats import Figure

STATEMENTS = "onthedot_db_statements_total{"
TRANSACTIONS = "onthedot_db_transactions_total{"


@dataclass(frozen=True)
class Counts:
    """A reading of the counters: statements, transactions, CPU seconds."""

    statements: float
    transactions: float
    cpu_seconds: float

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.statements - other.statements,
                      self.transactions - other.transactions,
                      self.cpu_seconds - other.cpu_seconds)


@dataclass(frozen=True)
class Cost:
    """One drain: totals over the window, and the runs it drained."""

    runs: int
    statements: float
    transactions: float
    cpu_seconds: float

    @classmethod
    def of(cls, runs: int, spent: Counts, probes: int, probe: Counts) -> Cost:
        """``spent`` over the window, less ``probes`` measuring calls that each cost
        ``probe``."""
        return cls(runs, spent.statements - probes * probe.statements,
                   spent.transactions - probes * probe.transactions,
                   max(0.0, spent.cpu_seconds - probes * probe.cpu_seconds))

    @property
    def per_run(self) -> tuple[float, float, float]:
        """(statements, transactions, CPU µs) per run."""
        n = max(1, self.runs)
        return self.statements / n, self.transactions / n, self.cpu_seconds * 1e6 / n


def db_counts(metrics_text: str) -> tuple[float, float]:
    """(statements, transactions) from a process's Prometheus text, every dialect and role."""
    statements = transactions = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(STATEMENTS):
            statements += float(line.rsplit(" ", 1)[1])
        elif line.startswith(TRANSACTIONS):
            transactions += float(line.rsplit(" ", 1)[1])
    return statements, transactions


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every living child of it."""
    import psutil

    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            times = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def cost_extras(costs: list[Cost]) -> dict[str, Figure]:
    """The three figures, one value per repetition, for a row's detail column."""
    if not costs:
        return {}
    per_run = [c.per_run for c in costs]
    return {"statements/run": Figure([p[0] for p in per_run]),
            "commits/run": Figure([p[1] for p in per_run]),
            "CPU µs/run": Figure([p[2] for p in per_run])}
