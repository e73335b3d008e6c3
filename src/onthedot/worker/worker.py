"""The worker: executes runs received from the queue, at least once, fenced by a token.

Per delivery::

    claim run (store CAS -> RUNNING, attempt + 1, new token)
      |-- claim refused: finished/cancelled -> ack (duplicate delivery, never re-run)
      |                  held by a live worker -> leave it (visible again after the timeout)
      v
    heartbeat every visibility_timeout / 3 (queue extend + store lease) while the action runs
      v
    success ---------> finish SUCCEEDED + RunEvent (one transaction) -> ack
    failure, attempts left -> RETRYING -> nack(backoff with jitter)
    failure, last attempt or not retryable (egress refused)
                      ---> finish FAILED + RunEvent, dead-lettered -> dead-letter message

A worker that crashes stops heartbeating: the message becomes visible again and the store lease
lapses, so another worker claims the run with a new token; the crashed attempt's late writes
carry the old token and change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import secrets
from datetime import timedelta
from typing import Any

import httpx

from onthedot.actions import ActionContext, ActionRegistry, EgressGuard, guarded_client
from onthedot.config import Settings
from onthedot.domain.clock import Clock
from onthedot.domain.errors import ActionError, OnTheDotError
from onthedot.domain.models import Job, JobRun, RetryPolicy, RunStatus
from onthedot.metrics import Metrics
from onthedot.queue.base import Delivery, Queue
from onthedot.store.base import RunClaim, RunFinish, RunRetry, Store

log = logging.getLogger("onthedot.worker")

HEARTBEAT_FRACTION = 1 / 3  # of the visibility timeout
RECEIVE_BATCH = 32


def backoff_seconds(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Exponential in the attempt number, capped, with jitter in [50 %, 100 %] of the step so
    many runs failing together do not retry in lockstep."""
    step = min(policy.max_backoff_seconds, policy.backoff_seconds * 2 ** max(0, attempt - 1))
    return float(step * (0.5 + 0.5 * (rng or random).random()))


class Worker:
    def __init__(self, store: Store, queue: Queue, clock: Clock, settings: Settings,
                 actions: ActionRegistry, metrics: Metrics, concurrency: int | None = None,
                 http: httpx.AsyncClient | None = None) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.settings = settings
        self.actions = actions
        self.metrics = metrics
        self.concurrency = concurrency or settings.workers
        self._http = http
        self._inflight: set[asyncio.Task[None]] = set()

    @property
    def visibility(self) -> float:
        return self.settings.visibility_timeout

    async def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = guarded_client(EgressGuard.from_settings(self.settings))
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # --- loop ----------------------------------------------------------------------------
    async def run_once(self, max_messages: int = RECEIVE_BATCH) -> int:
        """Receive what is visible now and handle it to completion (for tests and tools)."""
        deliveries = await self.queue.receive(max_messages, self.visibility, 0.0)
        await asyncio.gather(*(self.handle(d) for d in deliveries))
        return len(deliveries)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            free = self.concurrency - len(self._inflight)
            if free <= 0:
                await asyncio.wait(self._inflight, return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                deliveries = await self.queue.receive(min(free, RECEIVE_BATCH), self.visibility,
                                                      self.settings.tick_seconds)
            except Exception:
                log.exception("receive failed; trying again")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.settings.tick_seconds)
                continue
            for delivery in deliveries:
                task = asyncio.create_task(self.handle(delivery))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)

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
            return
        token = secrets.token_hex(16)
        run = await self.store.run_claim(RunClaim(run_id=run_id, token=token,
                                                  now=self.clock.now(),
                                                  lease_seconds=self.visibility))
        if run is None:
            await self._refused(delivery, run_id)
            return
        job = await self.store.job_get_any(run.job_id)
        if job is None:
            await self._finish_failed(run, token, delivery, "the job no longer exists")
            return
        if run.attempt > job.retry_policy.max_attempts:
            # Earlier attempts died without recording anything (crashed workers); stop here.
            await self._finish_failed(run, token, delivery,
                                      f"gave up after {run.attempt - 1} unfinished attempts")
            return
        self.metrics.attempts.inc()
        try:
            ok, output, error, retryable = await self._execute(job, run, token, delivery)
        except asyncio.CancelledError:
            await self._release(run, token, delivery)
            raise
        if ok:
            await self._succeed(run, token, delivery, output)
        elif retryable and run.attempt < job.retry_policy.max_attempts:
            await self._retry(job, run, token, delivery, error)
        else:
            await self._finish_failed(run, token, delivery, error)

    async def _refused(self, delivery: Delivery, run_id: str) -> None:
        current = await self.store.run_get(run_id)
        if current is not None and current.status is RunStatus.RUNNING:
            return  # a live worker holds it; our copy comes back after the timeout if it dies
        if current is not None and current.status is RunStatus.PENDING:
            return  # published ahead of its claim (should not happen); let it come back
        await self.queue.ack(delivery)  # finished, cancelled or unknown: never run it again

    async def _execute(self, job: Job, run: JobRun, token: str,
                       delivery: Delivery) -> tuple[bool, Any, str, bool]:
        action = self.actions.get(str(job.action.get("type")))
        ctx = ActionContext(job=job, run=run, idempotency_key=run.run_id,
                            timeout_seconds=job.timeout_seconds, http=await self.http())
        heartbeat = asyncio.create_task(self._heartbeat(run.run_id, token, delivery))
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
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _release(self, run: JobRun, token: str, delivery: Delivery) -> None:
        """Shutting down mid-action: hand the run back so another worker starts it now, not
        after the visibility timeout. If this fails, the timeout still recovers the run."""
        try:
            if await self.store.run_release(run.run_id, token, self.clock.now()):
                await self.queue.nack(delivery, 0)
        except Exception:
            log.warning("could not release run %s; it returns after its lease", run.run_id,
                        exc_info=True)

    async def _heartbeat(self, run_id: str, token: str, delivery: Delivery) -> None:
        while True:
            await asyncio.sleep(self.visibility * HEARTBEAT_FRACTION)
            try:
                until = self.clock.now() + timedelta(seconds=self.visibility)
                extended = await self.queue.extend(delivery, self.visibility)
                if not extended or not await self.store.run_extend_lease(run_id, token, until):
                    # Too late: the message or the run went to another attempt, whose
                    # token now fences whatever this one writes.
                    log.warning("run %s: lease lost to another attempt", run_id)
                    return
            except Exception:
                log.warning("heartbeat of run %s failed; retrying", run_id, exc_info=True)

    async def _succeed(self, run: JobRun, token: str, delivery: Delivery, output: Any) -> None:
        event = await self.store.run_finish(RunFinish(
            run_id=run.run_id, token=token, status=RunStatus.SUCCEEDED,
            finished_at=self.clock.now(), output=output))
        if event is None:
            log.warning("run %s: late result of a fenced attempt discarded", run.run_id)
        else:
            self.metrics.runs_finished.labels(status="SUCCEEDED").inc()
        await self.queue.ack(delivery)

    async def _retry(self, job: Job, run: JobRun, token: str, delivery: Delivery,
                     error: str) -> None:
        delay = backoff_seconds(job.retry_policy, run.attempt)
        if await self.store.run_retry(RunRetry(run_id=run.run_id, token=token, error=error,
                                               now=self.clock.now())):
            log.info("run %s attempt %d failed (%s); retry in %.1fs", run.run_id, run.attempt,
                     error, delay)
            await self.queue.nack(delivery, delay)

    async def _finish_failed(self, run: JobRun, token: str, delivery: Delivery,
                             error: str) -> None:
        event = await self.store.run_finish(RunFinish(
            run_id=run.run_id, token=token, status=RunStatus.FAILED,
            finished_at=self.clock.now(), error=error, dead_lettered=True))
        if event is None:
            await self.queue.ack(delivery)
            return
        self.metrics.runs_finished.labels(status="FAILED").inc()
        await self.queue.dead_letter(delivery, error)


def _run_id(delivery: Delivery) -> str | None:
    try:
        body = json.loads(delivery.body)
        run_id = body["run_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return run_id if isinstance(run_id, str) and run_id == delivery.message_id else None
