"""How much work one schedule may cost, and where that work runs.

A schedule is user input that turns into CPU time: python-dateutil and cronsim look for the next
occurrence by walking the calendar. Three things keep that bounded:

* **caps** on the size of a schedule, checked while it is read (:data:`MAX_RULES` RRULE lines,
  :data:`MAX_DATES` RDATE and EXDATE values each, COUNTs adding up to :data:`MAX_COUNT_TOTAL`,
  :data:`MAX_TIMES_OF_DAY` times of day in a DAILY or longer rule);
* a **search horizon** (``onthedot.schedule.expand``): no lookup walks further than 50 years
  (or 60 INTERVAL periods) past the previous occurrence, so every lookup of every schedule,
  stored ones included, is bounded by construction;
* a **step budget** for checking a new schedule: every loop of the walk (one candidate day,
  time or occurrence) is a step, and validation answers ``schedule_too_complex`` when
  :data:`VALIDATION_STEPS` steps were not enough. A count of steps, not a clock: the same
  schedule gets the same answer on an idle machine and on a loaded one (a deadline once refused
  under load what it accepted when idle). A step costs a few microseconds, so the budget is
  about a quarter to half a second of one core;
* a **length cap** on the text (:data:`MAX_SCHEDULE_CHARS`), and readers whose regular
  expressions are linear in it, so reading the text costs little next to the walk.

:func:`run_bounded` decides where the work runs. It first runs it inline under a tiny budget
(:data:`INLINE_STEPS`): an ordinary cron expression or RRULE is done long before that, so
the hot create path pays no thread hop. Anything that needs more is run again, from scratch, in
a small dedicated thread pool under the full budget, and the event loop keeps serving other
requests meanwhile. Lookups of stored schedules (the recurring watcher) run without a budget:
an accepted schedule must keep firing, and the horizon already bounds each lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from onthedot.domain.errors import ScheduleError

T = TypeVar("T")

MAX_RULES = 10  # RRULE lines in one schedule
MAX_DATES = 1000  # RDATE values, and separately EXDATE values, in one schedule
MAX_COUNT_TOTAL = 100_000  # COUNT values of all rules together: COUNT is expanded when compiled
MAX_TIMES_OF_DAY = 1440  # BYHOUR x BYMINUTE x BYSECOND of a DAILY or longer rule: one a minute
MAX_SCHEDULE_CHARS = 65_536  # characters of a schedule's text (room for the date caps above)
VALIDATION_STEPS = 150_000  # steps one schedule's validation may take (COUNTs need 100,000)
INLINE_STEPS = 2_000  # steps tried on the caller's thread (the event loop) before the pool
INLINE_CHARS = 1_024  # a longer schedule text goes to the pool at once (reading it takes time)
SCHEDULE_THREADS = 1  # heavy validations run one at a time: at most one core, never the loop

SCHEDULE_FIELD = "job_params.schedule"
LIMITS_EXPECTED = (
    f"a simpler schedule: at most {MAX_RULES} RRULE lines, {MAX_DATES} RDATE values, "
    f"{MAX_DATES} EXDATE values, COUNTs adding up to {MAX_COUNT_TOTAL} and {MAX_TIMES_OF_DAY} "
    f"times of day per DAILY or longer rule, {MAX_SCHEDULE_CHARS} characters, that can be "
    f"checked within {VALIDATION_STEPS} steps (fewer rules, fewer BYxxx combinations, a "
    "shorter COUNT)"
)


def too_complex(message: str) -> ScheduleError:
    return ScheduleError(
        message, code="schedule_too_complex", field=SCHEDULE_FIELD, expected=LIMITS_EXPECTED
    )


class NeedsThread(Exception):
    """The inline attempt ran out of its small budget: run the work again in a thread."""


class Budget:
    """A number of steps that long computations count down at every step; ``None`` means no
    limit.

    The inline attempt (``escalate``) has a small budget; running out of it does not refuse
    the schedule but sends the work to the schedule thread (:class:`NeedsThread`).
    """

    __slots__ = ("_escalate", "limit", "steps")

    def __init__(self, steps: int | None, *, escalate: bool = False) -> None:
        self.limit = steps
        self.steps = 0
        self._escalate = escalate

    def check(self, steps: int = 1) -> None:
        """Count ``steps`` steps (a costlier piece of work counts as several, so a step stays
        about the same amount of CPU); raise when the budget is spent."""
        if self.limit is None:
            return
        self.steps += steps
        if self.steps > self.limit:
            if self._escalate:
                raise NeedsThread
            raise too_complex(
                f"checking this schedule takes more than {self.limit} steps of work"
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
def budget(steps: int | None, *, escalate: bool = False) -> Iterator[Budget]:
    """Make a budget of ``steps`` the active one for the code inside the block."""
    opened = Budget(steps, escalate=escalate)
    token = _active.set(opened)
    try:
        yield opened
    finally:
        _active.reset(token)


def call_bounded(fn: Callable[[], T], steps: int | None = VALIDATION_STEPS) -> T:
    """``fn()`` under a budget of ``steps`` (synchronously, on the caller's thread)."""
    with budget(steps):
        return fn()


async def run_bounded(fn: Callable[[], T], *, steps: int | None = VALIDATION_STEPS,
                      inline: bool = True,
                      before_thread: Callable[[], Awaitable[None]] | None = None) -> T:
    """``fn()`` under a budget of ``steps``, without holding up the event loop for long.

    ``fn`` must be a pure computation (it may run twice): first inline under
    :data:`INLINE_STEPS` (unless ``inline`` is False), then, if that was not enough, in the
    schedule thread pool. ``before_thread`` is awaited before the costly attempt only (a
    quota check that may refuse the request first), so cheap work never pays for it.
    """
    if inline:
        try:
            with budget(INLINE_STEPS, escalate=True):
                return fn()
        except NeedsThread:
            pass
    if before_thread is not None:
        await before_thread()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), call_bounded, fn, steps)


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
