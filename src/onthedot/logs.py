"""Log lines an operator can read and a log shipper can parse.

Every outcome of a run (succeeded, failed for good and dead-lettered, retried, handed back
after a crash, skipped as missed) is ONE line at INFO or WARNING that names the job, the run,
the attempt and the error. The ids travel twice: in the message, for a person reading text, and
as record attributes (``extra=run_fields(...)``), which the JSON format emits as their own keys.

``ONTHEDOT_LOG_FORMAT=json`` writes one JSON object per line::

    {"time": "2026-12-01T00:00:00.123Z", "level": "INFO", "logger": "onthedot.worker",
     "message": "run ... succeeded", "job_id": "...", "run_id": "...", "attempt": 1}
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from onthedot.domain.models import JobRun

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Record attributes that describe a run; emitted as JSON keys when a line carries them
# (``cause``: why a run is executed again, as in onthedot_runs_recovered_total{cause}).
RUN_FIELDS = ("job_id", "run_id", "attempt", "error", "cause")


def run_fields(run: JobRun, error: str | None = None, attempt: int | None = None) -> dict[str, Any]:
    """``extra=`` of a line about one run (``attempt`` when it is not the run's own)."""
    fields: dict[str, Any] = {"job_id": run.job_id, "run_id": run.run_id,
                              "attempt": run.attempt if attempt is None else attempt}
    if error:
        fields["error"] = error
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the run
    fields a record carries, and the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in RUN_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra of an odd type must not lose the line
        return json.dumps(line, ensure_ascii=False, default=str)


class RepeatFilter(logging.Filter):
    """Lets one copy of an identical line through per ``interval_seconds``; the next copy after
    the interval carries the count of those suppressed. A loop that logs the same failure many
    times a second (asyncio's "accept() out of system resource" when file descriptors run out)
    otherwise fills the disk. Identical means same logger, level and formatted message, so the
    lines about different runs are never merged."""

    MAX_KEYS = 4096  # distinct recent lines remembered; older ones are forgotten first

    def __init__(self, interval_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval_seconds
        self._clock = clock
        self._lock = threading.Lock()  # handlers may be called from several threads
        # (logger, level, message) -> [time last written, copies suppressed since]
        self._seen: dict[tuple[str, int, str], list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interval <= 0:
            return True
        key = (record.name, record.levelno, record.getMessage())
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval:
                seen[1] += 1
                return False
            suppressed = 0 if seen is None else int(seen[1])
            self._seen.pop(key, None)
            self._seen[key] = [now, 0]
            if len(self._seen) > self.MAX_KEYS:
                del self._seen[next(iter(self._seen))]
        if suppressed:
            record.msg = f"{record.getMessage()} ({suppressed} identical lines suppressed)"
            record.args = None
        return True


def configure(level: str, fmt: str = "text", quiet: str = "",
              repeat_seconds: float = 0.0) -> None:
    """Set up the root logger of a server process: one handler on stderr in the chosen format.
    The loggers named in ``quiet`` stay at WARNING (httpcore alone writes several DEBUG lines
    per HTTP call, which buries the lines about runs). Like ``logging.basicConfig``, it leaves
    a root logger that someone else set up (a test runner, an embedding program) alone.
    ``repeat_seconds`` > 0 writes an identical line at most once per that many seconds
    (``RepeatFilter``)."""
    for name in (n.strip() for n in quiet.split(",")):
        if name:
            logging.getLogger(name).setLevel(logging.WARNING)
    root = logging.getLogger()
    if any(not getattr(h, _OURS, False) for h in root.handlers):
        return
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _OURS, True)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    if repeat_seconds > 0:
        handler.addFilter(RepeatFilter(repeat_seconds))
    root.addHandler(handler)
    root.setLevel(level.upper())


_OURS = "_onthedot_handler"  # marks the handler configure() installed, so a second call replaces it
