"""The worker: executes runs received from the queue, at least once, fenced by a token.

Per delivery::

    claim run (store CAS -> RUNNING, attempt + 1, new token; answers the job too)
      |-- claim refused: finished/cancelled/retrying -> ack (a duplicate; never re-run here)
      |                  held by a live worker -> nack until its lease ends (takeover on time)
      v
    a recurring job with overlap policy allow_all: its next run is saved now (worker.overlap),
    so it starts at its time even while this one runs; every other next run is the recurring
    watcher's, from this run's terminal event
      v
    heartbeat every visibility_timeout / 3 (store lease, then queue visibility) while the action
    runs and while its result is recorded: one store write per beat for all the runs this
    process holds (worker/heartbeat.py)
      v
    success ---------> deliver the output to the job's channels (never fails the run; see
                       onthedot.delivery), then finish SUCCEEDED + RunEvent (one transaction)
                       -> ack
    failure, attempts left -> RETRYING with retry_at (in the store) -> ack; the rescuer hands the
                              run back at retry_at; but CANCELLED, not retried, when the
                              job was paused (a scheduled run) or deleted meanwhile: the
                              store's job guard decides, in the retry's own transaction
    failure, last attempt or not retryable (egress refused)
                      ---> finish FAILED + RunEvent, dead-lettered -> dead-letter message

A worker that crashes stops heartbeating: its store lease ends, then the message becomes visible
again (the heartbeat renews the lease first, so the lease always ends first) and another worker
claims the run with a new token, within the visibility timeout of the last heartbeat; the crashed
attempt's late writes carry the old token and change nothing. Recording a result retries
transient store errors, so a short database outage does not make the action run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import httpx

from onthedot.actions import ActionContext, ActionRegistry, EgressGuard, guarded_client
from onthedot.config import Settings
from onthedot.delivery import Deliverer
from onthedot.domain.clock import Clock
from onthedot.domain.delivery import InboxItem
from onthedot.domain.errors import ActionError, BackendError, OnTheDotError
from onthedot.domain.history import AttemptStatus
from onthedot.domain.jsonvalue import storable, storable_text
from onthedot.domain.models import MAX_BACKOFF_SECONDS, Job, JobRun, RetryPolicy, RunStatus
from onthedot.logs import run_fields
from onthedot.metrics import Metrics
from onthedot.queue.base import Delivery, Queue
from onthedot.store.base import RunClaim, RunFinish, RunRetry, Store
from onthedot.worker.heartbeat import Heartbeats
from onthedot.worker.overlap import schedule_next, schedules_at_start

log = logging.getLogger("onthedot.worker")

T = TypeVar("T")

MAX_DOUBLINGS = 64  # 2**64 times any positive first delay is past MAX_BACKOFF_SECONDS
RECEIVE_BATCH = 64  # messages asked for per receive; a burst fills hundreds of slots in a few
TAKEOVER_MARGIN_SECONDS = 0.05  # a refused duplicate comes back this long after the lease ends
RECORD_RETRY_SECONDS = 300.0  # how long a result is retried against a failing store
RECORD_RETRY_FIRST_SECONDS = 0.1  # first pause between two tries; doubles up to the next
RECORD_RETRY_MAX_SECONDS = 5.0
TAKEOVER_ATTEMPTS_READ = 1000  # attempts of a run read to tell a takeover (100 at most count)


def backoff_seconds(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Exponential in the attempt number, capped, with jitter in [50 %, 100 %] of the step so
    many runs failing together do not retry in lockstep.

    The service bounds what it stores, but a row written before those bounds (or by hand) may
    hold anything: the result is always a finite delay from 0 to MAX_BACKOFF_SECONDS.
    """
    cap = _bounded(policy.max_backoff_seconds, MAX_BACKOFF_SECONDS)
    first = min(_bounded(policy.backoff_seconds, RetryPolicy.backoff_seconds), cap)
    doublings = min(max(0, attempt - 1), MAX_DOUBLINGS)
    step = min(cap, first * 2.0 ** doublings)
    return float(step * (0.5 + 0.5 * (rng or random).random()))


def _bounded(seconds: float, fallback: float) -> float:
    if not math.isfinite(seconds):
        return fallback
    return min(max(seconds, 0.0), MAX_BACKOFF_SECONDS)


class Worker:
    def __init__(self, store: Store, queue: Queue, clock: Clock, settings: Settings,
                 actions: ActionRegistry, metrics: Metrics, concurrency: int | None = None,
                 http: httpx.AsyncClient | None = None,
                 deliverer: Deliverer | None = None) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.settings = settings
        self.actions = actions
        self.metrics = metrics
        self.concurrency = concurrency or settings.workers
        self._http = http
        self._inflight: set[asyncio.Task[None]] = set()
        self.deliverer = deliverer or Deliverer(store, clock, settings, self.http,
                                                metrics=metrics)
        # One lease renewal per beat for every run this process holds (worker/heartbeat.py).
        self._heartbeats = Heartbeats(store, queue, clock, self.visibility)

    @property
    def visibility(self) -> float:
        return self.settings.visibility_timeout

    async def http(self) -> httpx.AsyncClient:
        """The client for the runs' calls: the one given, or one guarded client whose pool
        holds a connection per run in flight. Its connections are aiohttp's, whose pool costs
        the same whatever its size (docs/performance.md, "HTTP client"); httpx's own pool
        walked every connection on each request, which is why there were once several."""
        if self._http is None:
            guard = EgressGuard.from_settings(self.settings)
            size = max(1, self.concurrency)
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            self._http = guarded_client(guard, limits=limits)
        return self._http

    async def aclose(self) -> None:
        await self._heartbeats.aclose()
        client, self._http = self._http, None
        if client is not None:
            await client.aclose()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # --- loop ----------------------------------------------------------------------------
    async def run_once(self, max_messages: int = RECEIVE_BATCH, wait_seconds: float = 0.0
                       ) -> int:
        """Receive what is visible now (or within ``wait_seconds``) and handle it to
        completion (for tests and tools)."""
        deliveries = await self.queue.receive(max_messages, self.visibility, wait_seconds)
        await asyncio.gather(*(self.handle(d) for d in deliveries))
        return len(deliveries)

    async def run(self, stop: asyncio.Event) -> None:
        # Built before any run is held: building it holds the event loop (a TLS context), and
        # in the middle of the first burst that held up the heartbeats of the
        # runs just claimed past their messages' visibility timeout.
        await self.http()
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                free = self.concurrency - len(self._inflight)
                if free <= 0:
                    # Every slot busy: wait for one to free up, or for the stop signal, which
                    # must not wait behind a slow action.
                    await asyncio.wait({*self._inflight, stopped},
                                       return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    deliveries = await self.queue.receive(
                        min(free, RECEIVE_BATCH), self.visibility, self.settings.tick_seconds)
                except Exception:
                    log.exception("receive failed; trying again")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.settings.tick_seconds)
                    continue
                for delivery in deliveries:
                    task = asyncio.create_task(self.handle(delivery))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
        finally:
            stopped.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopped

    async def drain(self, grace_seconds: float) -> None:
        """Let in-flight runs finish within the grace period; cancel the rest, handing their
        runs back to the queue (not counted as attempts) for another worker to start."""
        if self._inflight:
            _done, pending = await asyncio.wait(self._inflight, timeout=grace_seconds)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self.aclose()

    # --- one delivery --------------------------------------------------------------------
    async def handle(self, delivery: Delivery) -> None:
        try:
            await self._handle(delivery)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The message stays unacked and comes back after the visibility timeout.
            log.exception("handling %s failed", delivery.message_id)

    async def _handle(self, delivery: Delivery) -> None:
        run_id = _run_id(delivery)
        if run_id is None:
            await self.queue.dead_letter(delivery, "unreadable message")
            log.warning("message %s names no run; dead-lettered unread", delivery.message_id,
                        extra={"error": "unreadable message"})
            return
        token = secrets.token_hex(16)
        received_at = asyncio.get_running_loop().time()  # its message's invisibility runs
        # The claim answers the run's job too, read in the claim's own statement.
        claimed = await self.store.run_claim_job(RunClaim(run_id=run_id, token=token,
                                                          now=self.clock.now(),
                                                          lease_seconds=self.visibility))
        if claimed is None:
            await self._refused(delivery, run_id)
            return
        run = claimed.run
        held = self._heartbeats.hold(run.run_id, token, delivery, received_at)
        try:
            if held.early:
                # Claimed late: the message's invisibility, counted from its receipt, may be
                # nearly over. Renewed now, before the action's first work (which may hold the
                # event loop a while, e.g. building HTTP clients), not when the loop gets to it.
                await self._heartbeats.beat_once(early_only=True)
            await self._note_takeover(run)
            await self._attempt(run, claimed.job, token, delivery)
        except asyncio.CancelledError:
            await self._release(run, token, delivery)
            raise
        finally:
            self._heartbeats.release(held)

    async def _attempt(self, run: JobRun, job: Job | None, token: str,
                       delivery: Delivery) -> None:
        if job is None:
            await self._finish_failed(run, token, delivery, "the job no longer exists")
            return
        if run.attempt > job.retry_policy.max_attempts:
            # Earlier attempts died without recording anything (crashed workers); stop here.
            await self._finish_failed(run, token, delivery,
                                      f"gave up after {run.attempt - 1} unfinished attempts")
            return
        if schedules_at_start(job, run):  # overlap policy allow_all: see worker.overlap
            await schedule_next(self.store, job, run, self.clock.now(), self.settings.shards)
        self.metrics.attempts.inc()
        if run.attempt == 1:
            # First attempts only: a retry starts late on purpose (its backoff).
            self.metrics.run_lateness.observe(
                max(0.0, (self.clock.now() - run.scheduled_at).total_seconds()))
        ok, output, error, retryable = await self._execute(job, run)
        # From outside (an answer, a feed): nothing in it may make recording the result fail.
        output, error = storable(output), storable_text(error)
        if ok:
            inbox = await self.deliverer.deliver(job, run, output)  # see its docstring
            await self._succeed(run, token, delivery, output, inbox)
        elif retryable and run.attempt < job.retry_policy.max_attempts:
            await self._retry(job, run, token, delivery, error)
        else:
            await self._finish_failed(run, token, delivery, error)

    async def _note_takeover(self, run: JobRun) -> None:
        """One WARNING line and ``runs_recovered{cause=lease_expired}`` when this claim replaced
        an attempt whose worker died or froze. Only this claim knows it: it ended that attempt
        as lost, in its own transaction, at its own time (``started_at``). An attempt the
        rescuer ended (worker_and_message_lost) was ended at the run's ``enqueued_at``, and
        the rescuer counted it. Only runs past their first attempt are read again."""
        if run.attempt < 2 or run.started_at is None:
            return
        try:
            attempts = await self.store.run_attempts(run.run_id, TAKEOVER_ATTEMPTS_READ)
        except Exception as exc:  # a missing line must not cost the run
            log.warning("run %s: could not read its attempts (%s)", run.run_id, exc)
            return
        replaced = [a for a in attempts if a.status is AttemptStatus.LOST
                    and a.finished_at == run.started_at
                    and (run.enqueued_at is None or run.enqueued_at < run.started_at)]
        if replaced:
            self.metrics.runs_recovered.labels(cause="lease_expired").inc()
            log.warning("run %s of job %s: attempt %d lost its worker (its lease expired); "
                        "attempt %d runs the action again", run.run_id, run.job_id,
                        replaced[-1].attempt, run.attempt,
                        extra={**run_fields(run), "cause": "lease_expired"})

    async def _refused(self, delivery: Delivery, run_id: str) -> None:
        current = await self.store.run_get(run_id)
        if current is not None and current.status is RunStatus.RUNNING:
            # A live worker holds it, or held it until a moment ago: look again right after its
            # lease ends, so a dead holder is replaced within the visibility timeout, not two.
            remaining = 0.0
            if current.lease_expires_at is not None:
                remaining = (current.lease_expires_at - self.clock.now()).total_seconds()
            await self.queue.nack(delivery, max(0.0, remaining) + TAKEOVER_MARGIN_SECONDS)
            return
        if current is not None and current.status in (RunStatus.PENDING, RunStatus.ENQUEUED):
            # Published ahead of its claim, or another delivery claimed and released it
            # meanwhile: let it come back.
            await self.queue.nack(delivery, TAKEOVER_MARGIN_SECONDS)
            return
        # Finished, cancelled, unknown, or RETRYING (the rescuer publishes it again when it is
        # due): never run it from this message.
        await self.queue.ack(delivery)

    async def _execute(self, job: Job, run: JobRun) -> tuple[bool, Any, str, bool]:
        """One attempt: (succeeded, output, error, whether a failure may be retried)."""
        try:
            # A stored action can be unreadable (store/codec.py): that is a failed attempt.
            action = self.actions.get(str(job.action.get("type")))
        except OnTheDotError as exc:
            return False, None, exc.message, True
        previous = (await self.store.run_last_succeeded(job.job_id, run.scheduled_at)
                    if action.uses_previous else None)
        ctx = ActionContext(job=job, run=run, idempotency_key=run.run_id,
                            timeout_seconds=job.timeout_seconds, http=await self.http(),
                            previous=previous, feed_states=self.store)
        try:
            async with asyncio.timeout(job.timeout_seconds):
                output = await action.execute(job.action, ctx)
            return True, output, "", False
        except TimeoutError:
            return False, None, f"timed out after {job.timeout_seconds:g}s", True
        except OnTheDotError as exc:
            return False, None, exc.message, not isinstance(exc, ActionError) or exc.retryable
        except Exception as exc:
            log.exception("action %s of run %s raised", job.action.get("type"), run.run_id)
            return False, None, f"{type(exc).__name__}: {exc}", True

    async def _release(self, run: JobRun, token: str, delivery: Delivery) -> None:
        """Shutting down mid-action: hand the run back so another worker starts it now, not
        after the visibility timeout. If this fails, the timeout still recovers the run."""
        self._heartbeats.recording(run.run_id, token)
        try:
            moved = await self.store.run_release(run.run_id, token, self.clock.now())
            if moved is RunStatus.ENQUEUED:
                # Counted once released: the action was cut off part-way and starts again.
                self.metrics.runs_recovered.labels(cause="worker_shutdown").inc()
                await self.queue.nack(delivery, 0)
                log.warning("run %s of job %s: attempt %d interrupted by shutdown; handed back "
                            "to the queue, the action runs again", run.run_id, run.job_id,
                            run.attempt, extra={**run_fields(run), "cause": "worker_shutdown"})
            elif moved is RunStatus.CANCELLED:
                await self.queue.ack(delivery)
                log.info("run %s of job %s: attempt %d interrupted by shutdown; not handed "
                         "back, its job was paused or deleted", run.run_id, run.job_id,
                         run.attempt, extra=run_fields(run))
        except Exception:
            log.warning("could not release run %s; it returns after its lease", run.run_id,
                        exc_info=True)

    async def _record(self, what: str, write: Callable[[], Awaitable[T]]) -> T:
        """Write a result, retrying while the store is unavailable: giving up would leave the
        message unacked and run the whole action again. The heartbeat keeps the run ours
        meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECORD_RETRY_SECONDS
        pause = RECORD_RETRY_FIRST_SECONDS
        while True:
            try:
                return await write()
            except BackendError as exc:
                if loop.time() + pause > deadline:
                    raise
                log.warning("recording %s failed (%s); retrying in %.1fs", what, exc.message,
                            pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECORD_RETRY_MAX_SECONDS)

    async def _succeed(self, run: JobRun, token: str, delivery: Delivery, output: Any,
                       inbox: InboxItem | None = None) -> None:
        finish = RunFinish(run_id=run.run_id, token=token, status=RunStatus.SUCCEEDED,
                           finished_at=self.clock.now(), output=output, inbox=inbox)
        self._heartbeats.recording(run.run_id, token)
        event = await self._record(f"the result of run {run.run_id}",
                                   lambda: self.store.run_finish(finish))
        if event is None:
            log.warning("run %s of job %s: result of attempt %d discarded, another attempt "
                        "holds the run", run.run_id, run.job_id, run.attempt,
                        extra=run_fields(run))
        else:
            self.metrics.runs_finished.labels(status="SUCCEEDED").inc()
            log.info("run %s of job %s succeeded on attempt %d", run.run_id, run.job_id,
                     run.attempt, extra=run_fields(run))
        await self.queue.ack(delivery)

    async def _retry(self, job: Job, run: JobRun, token: str, delivery: Delivery,
                     error: str) -> None:
        delay = backoff_seconds(job.retry_policy, run.attempt)
        now = self.clock.now()
        retry = RunRetry(run_id=run.run_id, token=token, error=error, now=now,
                         retry_at=now + timedelta(seconds=delay))
        self._heartbeats.recording(run.run_id, token)
        moved = await self._record(f"the retry of run {run.run_id}",
                                   lambda: self.store.run_retry(retry))
        if moved is RunStatus.RETRYING:
            log.info("run %s of job %s: attempt %d failed (%s); retry in %.1fs", run.run_id,
                     run.job_id, run.attempt, error, delay, extra=run_fields(run, error))
        elif moved is RunStatus.CANCELLED:
            # The job was paused or deleted while the attempt ran (store/job_guard.py).
            log.info("run %s of job %s: attempt %d failed (%s); not retried, the job was "
                     "paused or deleted", run.run_id, run.job_id, run.attempt, error,
                     extra=run_fields(run, error))
        # The store holds the retry; the queue only ever holds runs that are due.
        await self.queue.ack(delivery)

    async def _finish_failed(self, run: JobRun, token: str, delivery: Delivery,
                             error: str) -> None:
        finish = RunFinish(run_id=run.run_id, token=token, status=RunStatus.FAILED,
                           finished_at=self.clock.now(), error=error, dead_lettered=True)
        self._heartbeats.recording(run.run_id, token)
        event = await self._record(f"the failure of run {run.run_id}",
                                   lambda: self.store.run_finish(finish))
        if event is None:
            log.warning("run %s of job %s: failure of attempt %d discarded, another attempt "
                        "holds the run", run.run_id, run.job_id, run.attempt,
                        extra=run_fields(run, error))
            await self.queue.ack(delivery)
            return
        self.metrics.runs_finished.labels(status="FAILED").inc()
        log.warning("run %s of job %s failed for good after attempt %d: %s; dead-lettered",
                    run.run_id, run.job_id, run.attempt, error, extra=run_fields(run, error))
        await self.queue.dead_letter(delivery, error)


def _run_id(delivery: Delivery) -> str | None:
    try:
        body = json.loads(delivery.body)
        run_id = body["run_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return run_id if isinstance(run_id, str) and run_id == delivery.message_id else None
