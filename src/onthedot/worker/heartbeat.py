"""One heartbeat per worker process: every run it holds renewed by one store write per beat.

::

    hold(run, token, delivery) ─► HELD ──every visibility_timeout / 3──► beat
                                   │        1. store: runs_extend_leases(every held run) (one write)
                                   │        2. queue: extend each held run's message (concurrently)
                                   ├─ left out of the store's answer, or its message refused:
                                   │    LOST: warned once, no longer renewed; the attempt goes on
                                   │    and whatever it writes is fenced by the newer token
                                   ├─ recording(): its result is being written; a beat that then
                                   │    finds the run gone (finished by this very attempt) is
                                   │    not a loss and says nothing
                                   └─ release() when the attempt is over

The store lease is renewed before the message's invisibility, so the lease always ends first
and whoever receives the message next can claim the run at once. While the store does not
answer (within a quarter of the visibility timeout), the messages are still renewed: the
attempts are alive, and their results are written once the store is back (the token fences
them if that is too late).

A run held since just after a beat is first renewed one interval later, as a run with a beat
task of its own was: its lease has two thirds of the visibility timeout left then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from onthedot.domain.clock import Clock
from onthedot.domain.errors import BackendError
from onthedot.queue.base import Delivery, Queue
from onthedot.store.base import RunStore

log = logging.getLogger("onthedot.worker")

HEARTBEAT_FRACTION = 1 / 3  # of the visibility timeout: the interval between two beats
STORE_BEAT_FRACTION = 1 / 4  # of the visibility timeout: longest wait for the store's renewal
# Of the visibility timeout: a message received this long before its run was claimed is renewed
# at once rather than at the next beat (the message's invisibility counts from its receipt).
LATE_CLAIM_FRACTION = 1 / 6


@dataclass
class Held:
    run_id: str
    token: str
    delivery: Delivery
    recording: bool = False  # the attempt's result is being written
    lost: bool = False
    early: bool = False  # claimed late: renewed before the next regular beat


class Heartbeats:
    """The runs one worker holds, renewed together."""

    def __init__(self, store: RunStore, queue: Queue, clock: Clock, visibility: float) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.visibility = visibility
        self._held: dict[str, Held] = {}  # by run id
        self._loop: asyncio.Task[None] | None = None
        self._early = asyncio.Event()  # some held run was claimed late: beat it now

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, run_id: str, token: str, delivery: Delivery,
             received_at: float | None = None) -> Held:
        """Renew this attempt's lease and message from the next beat on; ``received_at`` (the
        event loop's time when the message was received) makes a late claim's first renewal
        come at once: a beat one interval after the claim could come after the message's
        invisibility, counted from its receipt, had run out."""
        older = self._held.get(run_id)
        if older is not None and not older.lost:
            # This process claimed the run again with a new token: the older attempt's
            # lease had ended, so it is fenced now.
            self._lose(older)
        held = Held(run_id, token, delivery)
        self._held[run_id] = held
        waited = None if received_at is None else asyncio.get_running_loop().time() - received_at
        if waited is not None and waited >= self.visibility * LATE_CLAIM_FRACTION:
            held.early = True
            self._early.set()
        if self._loop is None or self._loop.done():
            self._loop = asyncio.create_task(self._run(), name="onthedot-heartbeat")
        return held

    def recording(self, run_id: str, token: str) -> None:
        """The attempt holding ``run_id`` with ``token`` is writing its result (or handing the
        run back): it is still renewed meanwhile, but a run found gone is no longer a loss."""
        held = self._held.get(run_id)
        if held is not None and held.token == token:
            held.recording = True

    def release(self, held: Held) -> None:
        if self._held.get(held.run_id) is held:
            del self._held[held.run_id]
        if not self._held and self._loop is not None:
            # Nothing left to renew: stop now rather than after the next interval's sleep.
            loop, self._loop = self._loop, None
            loop.cancel()

    async def aclose(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.visibility * HEARTBEAT_FRACTION
        next_beat = loop.time() + interval  # counted from each beat's start: a slow beat
        while self._held:                   # does not push every later one back
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._early.wait(), max(0.0, next_beat - loop.time()))
            regular = loop.time() >= next_beat
            if regular:
                next_beat = loop.time() + interval
            self._early.clear()
            try:
                await self.beat_once(early_only=not regular)
            except Exception:  # a bug must not stop every run's renewal for good
                log.exception("heartbeat failed; trying again at the next beat")

    async def beat_once(self, early_only: bool = False) -> None:
        """Renew every held run (``early_only``: those claimed late, not yet renewed): the
        store's leases in one write, then each message."""
        beating = [h for h in self._held.values() if not h.lost and (h.early or not early_only)]
        for h in beating:
            h.early = False
        if not beating:
            return
        until = self.clock.now() + timedelta(seconds=self.visibility)
        still: set[str] | None = None
        try:
            # Bounded: a store that does not answer (a pool waiting for a connection) must not
            # hold up the messages' renewal past their visibility timeout.
            async with asyncio.timeout(self.visibility * STORE_BEAT_FRACTION):
                still = await self.store.runs_extend_leases(
                    [(h.run_id, h.token) for h in beating], until)
        except (BackendError, TimeoutError) as exc:
            log.warning("heartbeat of %d runs: store unavailable (%s); keeping their messages",
                        len(beating), getattr(exc, "message", "no answer in time"))
        if still is not None:
            for h in beating:
                if h.run_id not in still:
                    self._lose(h)
            beating = [h for h in beating if not h.lost]
        await asyncio.gather(*(self._extend(h) for h in beating))

    async def _extend(self, held: Held) -> None:
        try:
            if not await self.queue.extend(held.delivery, self.visibility):
                self._lose(held)
        except Exception:
            log.warning("heartbeat of run %s: queue extend failed; retrying", held.run_id,
                        exc_info=True)

    def _lose(self, held: Held) -> None:
        if held.lost:
            return
        held.lost = True
        if self._held.get(held.run_id) is held:
            del self._held[held.run_id]
        if held.recording:
            # Its result was being written when the beat looked: most likely this attempt
            # finished the run itself. If it was fenced instead, the result's write says so.
            log.debug("run %s: no longer renewed while its result is recorded", held.run_id)
            return
        # Too late: the message or the run went to another attempt, whose token now fences
        # whatever this one writes.
        log.warning("run %s: lease lost to another attempt", held.run_id)
