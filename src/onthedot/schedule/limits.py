"""How much work one schedule may cost, and where that work runs.

A schedule is user input that turns into CPU time: python-dateutil and cronsim look for the next
occurrence by walking the calendar. Three things keep that bounded:

* **caps** on the size of a schedule, checked while it is read (:data:`MAX_RULES` RRULE lines,
  :data:`MAX_DATES` RDATE and EXDATE values each, COUNTs adding up to :data:`MAX_COUNT_TOTAL`,
  :data:`MAX_TIMES_OF_DAY` times of day in a DAILY or longer rule);
* a **search horizon** (``onthedot.schedule.expand``): no lookup walks further than 50 years
  (or 60 INTERVAL periods) past the previous occurrence, so every lookup of every schedule,
  stored ones included, is bounded by construction;
* a **time budget** for checking a new schedule: validation checks a deadline as it walks and
  answers ``schedule_too_complex`` when :data:`VALIDATION_SECONDS` of work were not enough.

:func:`run_bounded` decides where the work runs. It first runs it inline under a tiny budget
(:data:`INLINE_SECONDS`): an ordinary cron expression or RRULE is done long before that, so
the hot create path pays no thread hop. Anything that needs more is run again, from scratch, in
a small dedicated thread pool under the full budget, and the event loop keeps serving other
requests meanwhile. Lookups of stored schedules (the recurring watcher) run without a deadline:
an accepted schedule must keep firing, and the horizon already bounds each lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from onthedot.domain.errors import ScheduleError

T = TypeVar("T")

MAX_RULES = 10  # RRULE lines in one schedule
MAX_DATES = 1000  # RDATE values, and separately EXDATE values, in one schedule
MAX_COUNT_TOTAL = 100_000  # COUNT values of all rules together: COUNT is expanded when compiled
MAX_TIMES_OF_DAY = 1440  # BYHOUR x BYMINUTE x BYSECOND of a DAILY or longer rule: one a minute
VALIDATION_SECONDS = 0.5  # time (monotonic clock) one schedule's validation may take
INLINE_SECONDS = 0.005  # CPU time tried on the caller's thread (the event loop) before the pool
SCHEDULE_THREADS = 1  # heavy validations run one at a time: at most one core, never the loop
_CHECK_EVERY = 8  # budget checks between two reads of the clock

SCHEDULE_FIELD = "job_params.schedule"
LIMITS_EXPECTED = (
    f"a simpler schedule: at most {MAX_RULES} RRULE lines, {MAX_DATES} RDATE values, "
    f"{MAX_DATES} EXDATE values, COUNTs adding up to {MAX_COUNT_TOTAL} and {MAX_TIMES_OF_DAY} "
    "times of day per DAILY or longer rule, that can be checked within "
    f"{VALIDATION_SECONDS:g} s (fewer rules, fewer BYxxx combinations, a shorter COUNT)"
)


def too_complex(message: str) -> ScheduleError:
    return ScheduleError(
        message, code="schedule_too_complex", field=SCHEDULE_FIELD, expected=LIMITS_EXPECTED
    )


class NeedsThread(Exception):
    """The inline attempt ran out of its small budget: run the work again in a thread."""


class Budget:
    """A deadline that long computations check at every step; ``None`` means no deadline.

    The inline attempt (``escalate``) counts the CPU time of its own thread: waiting for the
    GIL while a heavy check runs in the schedule thread must not push an ordinary schedule over
    its few milliseconds and into the queue behind the heavy ones. The full budget is a deadline
    on the monotonic clock, so an answer comes in time even on a loaded machine.
    """

    __slots__ = ("_clock", "_escalate", "_steps", "deadline")

    def __init__(self, seconds: float | None, *, escalate: bool = False) -> None:
        self._clock = time.thread_time if escalate else time.monotonic
        self.deadline = None if seconds is None else self._clock() + seconds
        self._escalate = escalate
        self._steps = 0

    def check(self) -> None:
        """Raise when the deadline has passed (checked on every few calls: reading the clock
        costs about as much as one step)."""
        if self.deadline is None:
            return
        self._steps += 1
        if self._steps % _CHECK_EVERY == 0 and self._clock() > self.deadline:
            if self._escalate:
                raise NeedsThread
            raise too_complex(
                f"checking this schedule takes more than {VALIDATION_SECONDS:g} s of work"
            )


_UNLIMITED = Budget(None)
_active: ContextVar[Budget | None] = ContextVar("onthedot_schedule_budget", default=None)


def active_budget() -> Budget | None:
    """The budget of the computation running in this context, if one was opened."""
    return _active.get()


def current_budget() -> Budget:
    """The budget to check: the active one, or no deadline (lookups of stored schedules)."""
    return _active.get() or _UNLIMITED


@contextlib.contextmanager
def budget(seconds: float | None, *, escalate: bool = False) -> Iterator[Budget]:
    """Make a budget of ``seconds`` the active one for the code inside the block."""
    opened = Budget(seconds, escalate=escalate)
    token = _active.set(opened)
    try:
        yield opened
    finally:
        _active.reset(token)


def call_bounded(fn: Callable[[], T], seconds: float | None = VALIDATION_SECONDS) -> T:
    """``fn()`` under a budget of ``seconds`` (synchronously, on the caller's thread)."""
    with budget(seconds):
        return fn()


async def run_bounded(fn: Callable[[], T], *, seconds: float | None = VALIDATION_SECONDS) -> T:
    """``fn()`` under a budget of ``seconds``, without holding up the event loop for long.

    ``fn`` must be a pure computation (it may run twice): first inline under
    :data:`INLINE_SECONDS`, then, if that was not enough, in the schedule thread pool.
    """
    try:
        with budget(INLINE_SECONDS, escalate=True):
            return fn()
    except NeedsThread:
        pass
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), call_bounded, fn, seconds)


_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    # Created on first use (most processes never meet a schedule that needs it) and shared by
    # every event loop of the process, so the limit of SCHEDULE_THREADS holds process-wide.
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=SCHEDULE_THREADS,
                                            thread_name_prefix="onthedot-schedule"))
        return _pool[0]
