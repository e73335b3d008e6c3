"""Several processes behind one command: ``serve``, ``api`` and ``worker`` with
``ONTHEDOT_PROCESSES`` above 1.

The process the operator started becomes a supervisor. It has already bound the API port and
prepared the database (the caller does that, so a bad setting is still one line and exit 2);
here it starts the children with the ``spawn`` start method (a fresh interpreter each: no fork
of a process that holds threads, an event loop or database connections), hands each the
listening socket (multiprocessing passes its descriptor to the new process), and watches them.

A child slot moves like this::

    STARTING --reports ready--> RUNNING --exits--> (backoff) STARTING
    STARTING --exits--> a start failure; the MAX_START_FAILURES-th in a row ends the supervisor
    any      --SIGTERM/SIGINT to the supervisor--> STOPPING --exits--> gone

SIGTERM or SIGINT is forwarded once, as SIGTERM, to every child, which stops gracefully as a
single ``serve`` does (its roles get ``shutdown_grace``); a child still alive long after that
is killed. A child dies with its supervisor: on Linux the kernel sends it SIGKILL when the
supervisor ends (``PR_SET_PDEATHSIG``), so ``kill -9`` of the supervisor is ``kill -9`` of all.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from onthedot.domain.errors import OnTheDotError

log = logging.getLogger("onthedot")

MAX_START_FAILURES = 3  # a child that dies before it is ready this many times in a row: give up
FIRST_BACKOFF_SECONDS = 0.5  # before restarting a child; doubles with each quick death
MAX_BACKOFF_SECONDS = 10.0
STABLE_SECONDS = 30.0  # a child that ran this long before dying restarts after the first backoff
KILL_MARGIN_SECONDS = 10.0  # past the children's own shutdown (HTTP drain + roles' grace)
PR_SET_PDEATHSIG = 1  # linux/prctl.h

# A child's work: called in the child with its index (0..N-1) and a function to call once it
# serves; it returns the child's exit code.
ChildMain = Callable[[int, Callable[[], None]], int]


class SupervisorError(OnTheDotError):
    """The children could not be kept running (they die before they are ready)."""


@dataclass
class _Slot:
    index: int
    process: BaseProcess | None = None
    ready_pipe: Connection | None = None
    started_at: float = 0.0
    ready: bool = False
    quick_deaths: int = 0  # deaths in a row, each soon after its start
    start_failures: int = 0  # deaths in a row before ready
    restart_at: float | None = None


@dataclass
class Supervisor:
    """Start ``count`` children running ``main(*args, index, notify_ready)``, restart those
    that die, stop them all on SIGTERM/SIGINT. ``args`` are pickled to each child (a socket
    among them arrives as the same listening socket)."""

    count: int
    main: Callable[..., int]
    args: Sequence[Any]
    stop_seconds: float  # how long a child may take to stop gracefully
    name: str = "supervisor"
    _slots: list[_Slot] = field(default_factory=list)
    _stopping: bool = False
    _killed: bool = False
    _kill_at: float | None = None  # when children still running after a stop are killed
    _signals: list[int] = field(default_factory=list)

    def run(self) -> int:
        """Until every child has stopped after a signal: 0 (1 when one had to be killed at
        the end of its time to stop). Raises SupervisorError when a child keeps dying before
        it is ready (the others are stopped first)."""
        context = multiprocessing.get_context("spawn")
        wake_read, wake_write = socket.socketpair()
        wake_read.setblocking(False)
        wake_write.setblocking(False)
        previous_wakeup = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._slots = [_Slot(i) for i in range(self.count)]
            for slot in self._slots:
                self._start(context, slot)
            return self._watch(context, wake_read)
        finally:
            for slot in self._slots:
                self._kill(slot)
            signal.set_wakeup_fd(previous_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            wake_read.close()
            wake_write.close()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._signals.append(signum)

    # --- the loop ------------------------------------------------------------------------
    def _watch(self, context: Any, wake: socket.socket) -> int:
        while True:
            self._take_signals()
            live = [s for s in self._slots if s.process is not None]
            if self._stopping and not live:
                log.info("%s: every process stopped", self.name)
                return 1 if self._killed else 0
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                for slot in live:
                    log.warning("%s: process %d (pid %s) did not stop in time; killing it",
                                self.name, slot.index, slot.process.pid if slot.process else "?")
                    self._kill(slot)
                    self._killed = True
                continue
            ready = wait(self._waitables(wake), timeout=self._timeout())
            if wake in ready:
                with contextlib.suppress(BlockingIOError):
                    wake.recv(4096)
            # Before the exits: children that a signal to the whole group (Ctrl-C, systemd's
            # control-group stop) ended at the same time are stopping, not dying.
            self._take_signals()
            for slot in list(self._slots):
                self._on_events(slot, ready)
            now = time.monotonic()
            for slot in self._slots:
                if slot.process is None and slot.restart_at is not None and not self._stopping \
                        and now >= slot.restart_at:
                    self._start(context, slot)

    def _take_signals(self) -> None:
        if self._signals and not self._stopping:
            self._stop_all()
            self._kill_at = time.monotonic() + self.stop_seconds + KILL_MARGIN_SECONDS

    def _waitables(self, wake: socket.socket) -> list[Any]:
        items: list[Any] = [wake]
        for slot in self._slots:
            if slot.process is not None:
                items.append(slot.process.sentinel)
                if slot.ready_pipe is not None and not slot.ready:
                    items.append(slot.ready_pipe)
        return items

    def _timeout(self) -> float:
        moments = [s.restart_at for s in self._slots if s.process is None and s.restart_at]
        if self._kill_at is not None:
            moments.append(self._kill_at)
        if not moments:
            return 1.0
        return max(0.0, min(moments) - time.monotonic())

    def _on_events(self, slot: _Slot, ready: list[Any]) -> None:
        process = slot.process
        if process is None:
            return
        if slot.ready_pipe is not None and slot.ready_pipe in ready and not slot.ready:
            with contextlib.suppress(EOFError, OSError):
                slot.ready_pipe.recv_bytes()
                slot.ready = True
                slot.start_failures = 0
                log.info("%s: process %d (pid %d) is ready", self.name, slot.index, process.pid)
                if all(s.ready for s in self._slots):
                    pids = ", ".join(str(s.process.pid) for s in self._slots if s.process)
                    log.info("%s: all %d processes are ready (pids %s)", self.name, self.count,
                             pids)
        if process.sentinel in ready:
            process.join()
            self._on_exit(slot, process.exitcode)

    def _on_exit(self, slot: _Slot, code: int | None) -> None:
        process = slot.process
        pid = process.pid if process else None
        self._forget(slot)
        if self._stopping:
            log.info("%s: process %d (pid %s) stopped with code %s", self.name, slot.index,
                     pid, code)
            return
        lived = time.monotonic() - slot.started_at
        if not slot.ready:
            slot.start_failures += 1
            if slot.start_failures >= MAX_START_FAILURES:
                self._stop_all()
                self._wait_all()
                raise SupervisorError(
                    f"process {slot.index} exited with code {code} before it was ready, "
                    f"{slot.start_failures} times in a row; its log says why")
        slot.quick_deaths = 0 if lived >= STABLE_SECONDS else slot.quick_deaths + 1
        backoff = min(MAX_BACKOFF_SECONDS,
                      FIRST_BACKOFF_SECONDS * 2 ** max(0, slot.quick_deaths - 1))
        slot.restart_at = time.monotonic() + backoff
        log.warning("%s: process %d (pid %s) exited unexpectedly with code %s after %.1fs; "
                    "starting a new one in %.1fs", self.name, slot.index, pid, code, lived,
                    backoff)

    # --- children --------------------------------------------------------------------------
    def _start(self, context: Any, slot: _Slot) -> None:
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=_child, name=f"{self.name}-{slot.index}",
                                  args=(self.main, tuple(self.args), slot.index, writer,
                                        os.getpid()))
        process.start()
        writer.close()  # the child holds its copy; EOF here when it dies
        slot.process, slot.ready_pipe, slot.ready = process, reader, False
        slot.started_at, slot.restart_at = time.monotonic(), None
        log.info("%s: started process %d (pid %d)", self.name, slot.index, process.pid)

    def _stop_all(self) -> None:
        self._stopping = True
        for slot in self._slots:
            slot.restart_at = None
            if slot.process is not None and slot.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.process.pid, signal.SIGTERM)

    def _wait_all(self) -> None:
        deadline = time.monotonic() + self.stop_seconds + KILL_MARGIN_SECONDS
        for slot in self._slots:
            if slot.process is not None:
                slot.process.join(max(0.0, deadline - time.monotonic()))
                self._kill(slot)

    def _kill(self, slot: _Slot) -> None:
        process = slot.process
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join()
        self._forget(slot)

    def _forget(self, slot: _Slot) -> None:
        if slot.ready_pipe is not None:
            slot.ready_pipe.close()
        if slot.process is not None:
            slot.process.close()
        slot.process = slot.ready_pipe = None


def _child(main: Callable[..., int], args: tuple[Any, ...], index: int, ready: Connection,
           parent_pid: int) -> None:
    """The first code of a child: die with the supervisor, then run ``main``."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # the supervisor ended before the line above
        sys.exit(1)

    def notify_ready() -> None:
        with contextlib.suppress(OSError):
            ready.send_bytes(b"ready")
            ready.close()

    sys.exit(main(*args, index, notify_ready))


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def core_count() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)

