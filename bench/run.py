"""One command for every figure of docs/performance.md: onthedot and its peers side by side on
this machine's PostgreSQL, NATS and Redis, each figure the median of several repetitions with
its spread (min-max). Prints one table (Markdown) and writes a PNG chart.

    python -m bench                      # every section at full size (about 15 minutes)
    python -m bench --quick              # small sizes, two repetitions: a smoke test
    python -m bench --sections ingest,burst --configs sqlite --reps 5

Sections: ingest, burst, dispatch, scan, rss, crash, http, scaling (see each module's docstring). A
configuration the server refuses (e.g. PostgreSQL without a queue URL, before there is a
PostgreSQL table queue) or an endpoint it lacks (the batch endpoint) is reported as n/a with
the reason, and the rest goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import Row

SECTIONS = ("ingest", "burst", "dispatch", "scan", "rss", "crash", "http", "scaling")
DEFAULT_LEAD_SECONDS = 10.0
MIN_LEAD_SECONDS, MAX_LEAD_SECONDS = 4.0, 40.0
LEAD_MARGIN = 1.5  # the due second leaves room for ingest at 2/3 of the measured rate


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes and 2 repetitions (explicit flags still win)")
    p.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset")
    p.add_argument("--reps", type=int, help="repetitions per figure (default 3)")
    p.add_argument("--configs", default="sqlite,pg+nats,pg",
                   help="onthedot configurations: sqlite, pg+nats, pg (PostgreSQL alone)")
    p.add_argument("--no-peers", action="store_true", help="onthedot only")
    p.add_argument("--processes", default="", help="ONTHEDOT_PROCESSES of every onthedot "
                   "serve (default: the server's own: the cores, at most 2 on SQLite)")
    g = p.add_argument_group("ingest")
    g.add_argument("--concurrency", default="1,16,64", help="callers, comma-separated")
    g.add_argument("--requests", type=int, help="single creates per figure and rep (1000)")
    g.add_argument("--batch-size", type=int, default=500)
    g.add_argument("--batch-jobs", type=int, help="jobs per batch figure and rep (20000)")
    g.add_argument("--batch-callers", type=int, default=4)
    g = p.add_argument_group("burst lateness")
    g.add_argument("--burst-runs", type=int, help="runs due at one instant (2000)")
    g.add_argument("--burst-configs", help="default: --configs")
    g.add_argument("--burst-actions", default="webhook,message")
    g.add_argument("--burst-wait", type=float, default=90.0,
                   help="seconds after the due instant before the rest counts as missed")
    g = p.add_argument_group("10,000 due in one second")
    g.add_argument("--dispatch-runs", type=int, help="(10000)")
    g.add_argument("--dispatch-configs", default="sqlite,pg+nats")
    g.add_argument("--dispatch-reps", type=int, help="(1: one takes about a minute)")
    g = p.add_argument_group("scan cost")
    g.add_argument("--scan-sizes", help="stored future runs, PostgreSQL (10000,1000000); add "
                   "10000000 for the 10 M figure (its load takes several minutes)")
    g.add_argument("--scan-sqlite-sizes", help="the same on SQLite, filled from Python "
                   "(10000; 1 M takes minutes)")
    g.add_argument("--scan-due", type=int, default=100)
    g = p.add_argument_group("peak RSS")
    g.add_argument("--rss-runs", type=int, help="future runs stored (1000000)")
    g.add_argument("--rss-seconds", type=float, help="each process watched this long (15)")
    g.add_argument("--rss-reps", type=int, help="(1)")
    g = p.add_argument_group("crash -> re-execution")
    g.add_argument("--crash-visibility", type=float, default=3.0)
    g.add_argument("--crash-config", default="pg+nats")
    g = p.add_argument_group("HTTP client (bench/http_client.py)")
    g.add_argument("--http-inflight", default="64,256,1024", help="POSTs in flight")
    g.add_argument("--http-seconds", type=float, help="each figure's timed window (5; quick 2)")
    g.add_argument("--http-clients", default="aiohttp (worker),httpx (one pool),aiohttp")
    g = p.add_argument_group("scaling (bench/scaling.py, the model of docs/scaling.md)")
    g.add_argument("--scaling-processes", default="1,2,4", help="ONTHEDOT_PROCESSES values")
    g.add_argument("--scaling-config", default="pg+nats", choices=("pg+nats", "pg"))
    g.add_argument("--scaling-requests", type=int, help="single creates per count (2000)")
    g.add_argument("--scaling-runs", type=int, help="message runs due at once per count (2000)")
    g = p.add_argument_group("output")
    g.add_argument("--chart", default="docs/performance.png", help="PNG path ('' for none)")
    g.add_argument("--json", default="", help="also write every value to this JSON file")
    g.add_argument("--logs", default="", help="keep the onthedot children's logs in this "
                   "folder (default: a temporary one, removed at the end)")
    args = p.parse_args(argv)
    quick = args.quick
    defaults: dict[str, Any] = {
        "reps": 2 if quick else 3, "requests": 300 if quick else 1000,
        "batch_jobs": 2000 if quick else 20000, "burst_runs": 300 if quick else 2000,
        "dispatch_runs": 1000 if quick else 10000, "dispatch_reps": 1,
        "scan_sizes": "10000,100000" if quick else "10000,1000000",
        "scan_sqlite_sizes": "10000",
        "rss_runs": 100_000 if quick else 1_000_000, "rss_seconds": 5.0 if quick else 15.0,
        "rss_reps": 1, "burst_configs": args.configs, "http_seconds": 2.0 if quick else 5.0,
        "scaling_requests": 500 if quick else 2000, "scaling_runs": 500 if quick else 2000,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    unknown = set(_names(args.sections)) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}; expected some of {', '.join(SECTIONS)}")
    return args


@dataclass
class Machine:
    cores: int
    cpu: str
    memory_gib: float
    python: str
    commit: str

    @classmethod
    def read(cls) -> Machine:
        cpu = next((line.split(":", 1)[1].strip() for line in
                    Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        mem_kib = next(int(line.split()[1]) for line in
                       Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal"))
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
        return cls(cores=os.cpu_count() or 0, cpu=cpu, memory_gib=mem_kib / 2**20,
                   python=platform.python_version(), commit=commit or "?")

    pg_commit_ms: float | None = None
    load_before: float = 0.0  # 1-minute load average when the run began and ended: other
    load_after: float = 0.0  # work on the machine shows here
    processes: str = ""  # ONTHEDOT_PROCESSES of the servers, "" = their default

    def line(self) -> str:
        commit = ("" if self.pg_commit_ms is None else
                  f", PostgreSQL durable commit {self.pg_commit_ms:.1f} ms (p50)")
        return (f"{self.cores} cores ({self.cpu}), {self.memory_gib:.0f} GiB, Python "
                f"{self.python}{commit}, load average {self.load_before:.1f} before and "
                f"{self.load_after:.1f} after, commit {self.commit}, onthedot serve "
                f"ONTHEDOT_PROCESSES={self.processes or 'default'}")


def pg_commit_ms(samples: int = 100) -> float | None:
    """Median time of one durable single-row commit: the floor under every PostgreSQL write
    (WAL flush to this machine's disk)."""
    import psycopg

    from bench.procs import PG_DSN

    try:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (x int)")
            times = []
            for _ in range(samples):
                began = time.perf_counter()
                conn.execute("INSERT INTO bench_commit_probe VALUES (1)")
                times.append((time.perf_counter() - began) * 1000)
            conn.execute("DROP TABLE bench_commit_probe")
    except psycopg.Error:
        return None
    return sorted(times)[samples // 2]


def _lead(rows: list[Row], config: str, runs: int) -> float:
    """Seconds ahead to put the burst's due instant: room to create ``runs`` jobs at 2/3 of the
    rate this configuration just showed (its best ingest figure)."""
    rates = [r.figure.median for r in rows if r.section == "ingest" and r.figure is not None
             and r.system.endswith(_label(config))]
    if not rates:
        return DEFAULT_LEAD_SECONDS + runs / 200
    lead = 2.0 + LEAD_MARGIN * runs / max(rates)
    return min(MAX_LEAD_SECONDS, max(MIN_LEAD_SECONDS, lead))


def _label(config: str) -> str:
    from bench.procs import CONFIG_LABELS

    return CONFIG_LABELS.get(config, config)


async def _async_sections(args: argparse.Namespace, sections: list[str], folder: Path,
                          logs: Path) -> list[Row]:
    from bench import burst, crash, ingest, peers, rss, scan, takeover

    rows: list[Row] = []
    configs, conc = _names(args.configs), _ints(args.concurrency)
    if "ingest" in sections:
        _say("ingest: onthedot")
        plan = ingest.IngestPlan(configs, conc, args.requests, args.batch_jobs, args.batch_size,
                                 args.batch_callers, args.reps)
        rows += await ingest.onthedot_ingest(plan, folder, logs)
        if not args.no_peers:
            _say("ingest: Procrastinate")
            rows += await peers.procrastinate_ingest(conc, args.requests, args.batch_jobs,
                                                     args.batch_size, args.reps)
            _say("ingest: Celery")
            rows += await asyncio.to_thread(peers.celery_ingest, conc, args.requests, args.reps)
    if "burst" in sections:
        _say("burst: onthedot")
        names = _names(args.burst_configs)
        leads = {name: _lead(rows, name, args.burst_runs) for name in names}
        rows += await burst.onthedot_burst(names, _names(args.burst_actions), args.burst_runs,
                                           args.reps, leads, args.burst_wait, folder, logs)
        if not args.no_peers:
            peer_lead = MIN_LEAD_SECONDS + args.burst_runs / 500
            _say("burst: Celery")
            rows += await peers.celery_burst(args.burst_runs, args.reps, peer_lead,
                                             args.burst_wait, logs)
            _say("burst: Procrastinate")
            rows += await peers.procrastinate_burst(args.burst_runs, args.reps, peer_lead,
                                                    args.burst_wait, logs)
    if "scan" in sections:
        _say("scan: PostgreSQL")
        rows += await scan.postgres_scan(_ints(args.scan_sizes), args.scan_due, args.reps)
        if args.scan_sqlite_sizes:
            _say("scan: SQLite")
            rows += await scan.sqlite_scan(_ints(args.scan_sqlite_sizes), args.scan_due,
                                           args.reps)
    if "rss" in sections:
        _say("peak RSS")
        rows += await rss.rss_rows(args.rss_runs, args.rss_seconds, args.rss_reps, folder, logs)
    if "crash" in sections:
        _say("crash -> re-execution")
        rows += await crash.crash_rows(args.crash_config, args.crash_visibility, args.reps,
                                       folder, logs)
        _say("watcher takeover")
        rows += await takeover.takeover_rows(args.crash_config, args.reps, folder, logs)
    if "http" in sections:
        from bench.http_client import http_rows

        _say("HTTP client: 64 / 256 / 1,024 POSTs in flight")
        rows += await http_rows(_ints(args.http_inflight), args.http_seconds, args.reps, logs,
                                _names(args.http_clients))
    return rows


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sections = _names(args.sections)
    if args.processes:  # every onthedot child inherits our environment (procs.child_env)
        os.environ["ONTHEDOT_PROCESSES"] = args.processes
    machine = Machine.read()
    machine.processes = os.environ.get("ONTHEDOT_PROCESSES", "")
    machine.pg_commit_ms = pg_commit_ms()
    machine.load_before = os.getloadavg()[0]
    started = time.monotonic()
    rows: list[Row] = []
    scaling = ""
    with tempfile.TemporaryDirectory(prefix="onthedot-bench-") as tmp:
        folder = Path(tmp)
        logs = Path(args.logs) if args.logs else folder / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        rows += asyncio.run(_async_sections(args, sections, folder, logs))
        if "dispatch" in sections:  # not inside that loop: it runs event loops of its own
            from bench.dispatch import dispatch_rows

            _say("10,000 due in one second")
            rows += dispatch_rows(_names(args.dispatch_configs), args.dispatch_runs,
                                  args.dispatch_reps)
        if "scaling" in sections:  # its own table: measured beside the model's prediction
            from bench.scaling import scaling_report

            _say("scaling: 1, 2 and 4 processes")
            scaling = asyncio.run(scaling_report(
                args.scaling_config, _ints(args.scaling_processes), args.scaling_requests,
                args.scaling_runs, folder, logs))
    rows.sort(key=lambda r: SECTIONS.index(r.section))
    machine.load_after = os.getloadavg()[0]
    minutes = (time.monotonic() - started) / 60
    print()
    print(f"Machine: {machine.line()}. Took {minutes:.1f} min; "
          f"{args.reps} repetitions per figure unless the detail says otherwise.")
    print()
    print(render_table(rows))
    if scaling:
        print(f"\n{scaling}")
    if args.chart:
        from bench.chart import write_chart

        write_chart(rows, Path(args.chart), machine.line())
        print(f"\nchart: {args.chart}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": machine.__dict__, "minutes": minutes, "args": vars(args),
            "rows": [r.to_json() for r in rows]}, indent=1))


def _digits(name: str) -> int:
    if name.endswith(" s") or name in ("p50", "p99"):
        return 2
    if name in ("statements/run", "commits/run"):  # bench/cost.py
        return 1
    return 0


def _detail(row: Row) -> str:
    parts = [f"{name} {fig.text(_digits(name))}" for name, fig in row.extra.items()]
    if row.note:
        parts.append(row.note)
    return "; ".join(parts)


def _collapse(rows: list[Row]) -> list[Row]:
    """A system that could not run at all gets one n/a row, not one per case."""
    out: list[Row] = []
    for row in rows:
        prev = out[-1] if out else None
        if (prev is not None and row.figure is None and prev.figure is None
                and (prev.section, prev.system, prev.note) == (row.section, row.system,
                                                               row.note)):
            prev.case = "all cases"
            continue
        out.append(row)
    return out


def render_table(rows: list[Row]) -> str:
    """The results as one Markdown table: value = median (min-max) of the repetitions."""
    lines = ["| figure | system | case | value | generator ceiling | detail |",
             "|---|---|---|---:|---:|---|"]
    titles = {"ingest": "ingest jobs/s", "burst": "burst lateness p99 s",
              "dispatch": "all done after due, s", "scan": "due scan, 32 shards, ms",
              "rss": "peak RSS MiB", "crash": "kill -> re-executed / taken over, s",
              "http": "HTTP client requests/s"}
    for row in _collapse([copy.copy(r) for r in rows]):
        ceiling = row.ceiling.text() if row.ceiling is not None else ""
        lines.append(f"| {titles.get(row.section, row.section)} | {row.system} | {row.case} | "
                     f"{row.value_text()} | {ceiling} | {_detail(row)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
