"""Where the parser runs: off the event loop, one sentence at a time per process.

Reading a sentence is pure CPU work, bounded by its length (``MAX_TEXT_CHARS``: a few tens of
milliseconds at the longest on one core). Done on the event loop, a few such requests at once
held up every other request of the server, ``/healthz`` included. They run instead in one
dedicated thread: the loop keeps serving (Python hands the interpreter lock back to it every few
milliseconds), and parsing never takes more than one core whatever the number of callers. How
often one user may ask is the per-user parse rate (``onthedot.quotas``), checked before the work
is queued.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
PARSE_THREADS = 1  # sentences are read one at a time per process: at most one core

_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


async def off_loop(fn: Callable[[], T]) -> T:
    """``fn()`` (pure parsing work, its errors included) in the parser thread."""
    loop = asyncio.get_running_loop()
    # The caller's context goes along: the schedule budget of a nested compile is a ContextVar.
    call = functools.partial(contextvars.copy_context().run, fn)
    return await loop.run_in_executor(_executor(), call)


def _executor() -> ThreadPoolExecutor:
    # Shared by every event loop of the process, so the limit holds process-wide.
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=PARSE_THREADS,
                                            thread_name_prefix="onthedot-parse"))
        return _pool[0]
