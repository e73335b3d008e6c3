"""The Deliverer: sends a succeeded run's output to each of its job's channels, at least once
per (run, channel), and retries the failed ones on a schedule.

The worker calls ``deliver`` after the action succeeded and BEFORE it records the run's success:
a crash in between leaves the run unrecorded, so it is executed again, and this time the
channels already delivered are skipped. Recording success first would lose the delivery instead.

Per e-mail or webhook channel, each send is (the outbox order: record before, send, record
after)::

    claim (run, channel) in the store ---- refused: DELIVERED or FAILED already, being sent
      |                                    by the live attempt of the run, or out of sends
      v
    send (SMTP / HTTP POST)   <-- a crash here, or before the next line, leaves SENDING: the
      |                           next execution of the run, or the retry sweep once the claim
      |                           is stale, sends again with the same Message-ID /
      v                           Idempotency-Key (docs/delivery.md)
    record DELIVERED the moment the receiver accepted (before SMTP's QUIT, before a webhook's
    answer body is read); or RETRYING with next_attempt_at when the error is worth retrying and
    the schedule (RETRY_SCHEDULE_SECONDS) is not used up; else FAILED for good

While the run is executed, a channel is sent up to TRIES_PER_EXECUTION times, with a doubling
pause, while the error is worth retrying. What is still RETRYING afterwards is the retry sweep's
(``retry_due``, run by the rescuer): it claims the due deliveries of SUCCEEDED runs, rebuilds
each message from the run's stored output and the job's channel, sends it once and records the
outcome. It never touches the run itself.

The inbox channel is not sent here: ``deliver`` returns the run's inbox item and the worker
records it with the run's success, in one transaction (inbox.py). Nothing here raises into the
worker: a failed channel is recorded on the run's deliveries and the run still succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from onthedot.actions.signing import WebhookSigner
from onthedot.config import Settings
from onthedot.delivery.channels import channel_key, channel_target, delivery_id
from onthedot.delivery.email import EmailChannel, SmtpConfig, build_message
from onthedot.delivery.inbox import inbox_item
from onthedot.delivery.render import json_payload, output_text, slack_payload, wants_delivery
from onthedot.delivery.webhook import HttpClient, WebhookChannel
from onthedot.domain.clock import Clock
from onthedot.domain.delivery import (
    Delivery,
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    DeliveryStatus,
    InboxItem,
    retry_delay,
)
from onthedot.domain.errors import BackendError, DeliveryError
from onthedot.domain.jsonvalue import storable_text
from onthedot.domain.models import Job, JobRun
from onthedot.metrics import Metrics
from onthedot.store.base import DeliveryStore

log = logging.getLogger("onthedot.delivery")

T = TypeVar("T")
TRIES_PER_EXECUTION = 3  # sends of one channel while the run is executed once
MAX_SENDS = 10  # sends of one channel over every execution of the run (retries come on top)
RETRY_PAUSE_SECONDS = 1.0  # before the second try; doubles
# A SENDING claim older than this lost its sender (every send gives up after 30 s per step):
# once the run succeeded, the retry sweep takes it over and sends again.
SENDING_STALE_SECONDS = 600.0
RETRY_BATCH = 50  # deliveries one retry sweep claims and sends (concurrently)
# A delivery record is retried against a failing store as long as the worker retries the run's
# result (worker.RECORD_RETRY_SECONDS): giving up earlier would lose the delivery of a run that
# is then recorded as succeeded.
STORE_RETRY_SECONDS = 300.0
STORE_RETRY_FIRST_SECONDS = 0.1  # first pause; doubles up to the next
STORE_RETRY_MAX_SECONDS = 5.0

# One send: the block runs once the receiver accepted (an SMTP server's answer to DATA, a
# webhook's 2xx status line), before the session ends, so the acceptance is recorded at once.
Send = Callable[[], AbstractAsyncContextManager[None]]
JOB_GONE = "the job no longer exists; the delivery is not retried"
CHANNEL_GONE = "the job no longer lists this channel; the delivery is not retried"


class DelivererStore(DeliveryStore, Protocol):
    """What the deliverer uses of the store: the delivery records, and for a retry the run's
    stored output and its job's channels."""

    async def runs_get_many(self, run_ids: Sequence[str]) -> dict[str, JobRun]: ...

    async def jobs_get_any_many(self, job_ids: Sequence[str]) -> dict[str, Job]: ...


class Deliverer:
    def __init__(self, store: DelivererStore, clock: Clock, settings: Settings,
                 http: HttpClient, *,
                 metrics: Metrics | None = None,
                 retry_pause_seconds: float = RETRY_PAUSE_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.retry_pause_seconds = retry_pause_seconds
        self.smtp = SmtpConfig.from_settings(settings)
        self.email = EmailChannel(self.smtp)
        self.webhook = WebhookChannel(http, WebhookSigner(store, clock))

    async def deliver(self, job: Job, run: JobRun, output: Any) -> InboxItem | None:
        """Deliver to every e-mail and webhook channel of ``job`` (concurrently); return the
        inbox item for the worker to record with the result, if the job has an inbox. Never
        raises but to cancel."""
        if not job.notify or not wants_delivery(output):
            return None
        # The attempt's fencing token: only the attempt holding the run claims its channels.
        token = run.lease_token or ""
        text = output_text(output)
        await asyncio.gather(*(self._channel(job, run, output, text, channel, token)
                               for channel in job.notify if channel.get("channel") != "inbox"))
        if any(channel.get("channel") == "inbox" for channel in job.notify):
            return inbox_item(job, run, output, text, self.clock.now())
        return None

    async def _channel(self, job: Job, run: JobRun, output: Any, text: str,
                       channel: dict[str, Any], token: str) -> None:
        kind = channel.get("channel")
        try:
            send = self._sender(job, run, output, text, channel)
            if send is None:
                log.warning("job %s: unknown notify channel %r skipped", job.job_id, kind)
                return
            await self._tries(run, channel, token, send)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug or a store that stayed down: never the run's failure
            log.exception("delivering run %s to %s failed", run.run_id, channel_key(channel))

    def _sender(self, job: Job, run: JobRun, output: Any, text: str,
                channel: dict[str, Any]) -> Send | None:
        key = channel_key(channel)
        if channel.get("channel") == "email":
            sender = self.smtp.sender if self.smtp is not None else ""
            message = build_message(job=job, run=run, to=str(channel["to"]), text=text,
                                    sender=sender, channel_key=key, now=self.clock.now())
            return lambda: self.email.sending(message)
        if channel.get("channel") == "webhook":
            payload = (slack_payload(job, text) if channel.get("format") == "slack"
                       else json_payload(job, run, output, text))
            return lambda: self.webhook.sending(str(channel["url"]), payload,
                                                user_id=job.user_id,
                                                idempotency_key=delivery_id(run.run_id, key))
        return None

    async def _tries(self, run: JobRun, channel: dict[str, Any], token: str,
                     send: Send) -> None:
        for tried in range(TRIES_PER_EXECUTION):
            claimed = await self._stored(run, lambda: self.store.delivery_claim(DeliveryClaim(
                run_id=run.run_id, channel_key=channel_key(channel),
                channel=str(channel["channel"]), target=channel_target(channel),
                claim_token=token, now=self.clock.now(), max_attempts=MAX_SENDS,
                stale_at=self._stale_at())))
            if claimed is None:
                return  # delivered or failed already, sent by the live attempt, out of sends
            last = tried + 1 == TRIES_PER_EXECUTION
            pause = self.retry_pause_seconds * 2 ** tried
            status = await self._send_and_record(claimed, send, None if last else pause)
            if status is not DeliveryStatus.RETRYING or last:
                return  # what is still RETRYING is the retry sweep's
            await asyncio.sleep(pause)

    # --- the retry sweep ------------------------------------------------------------------
    async def retry_due(self, limit: int = RETRY_BATCH) -> int:
        """Claim up to ``limit`` due deliveries of succeeded runs, send each once, record the
        outcomes; returns how many were claimed. Raises only if the claim fails."""
        now = self.clock.now()
        claimed = await self.store.deliveries_retry_claim(DeliveryRetryClaim(
            claim_token=f"retry-{secrets.token_hex(8)}", now=now, stale_at=self._stale_at(),
            limit=limit))
        if not claimed:
            return 0
        runs = await self.store.runs_get_many(sorted({d.run_id for d in claimed}))
        jobs = await self.store.jobs_get_any_many(sorted({r.job_id for r in runs.values()}))
        await asyncio.gather(*(self._retry(d, runs.get(d.run_id), jobs) for d in claimed))
        return len(claimed)

    async def _retry(self, claimed: Delivery, run: JobRun | None,
                     jobs: dict[str, Job]) -> None:
        try:
            job = None if run is None else jobs.get(run.job_id)
            if run is None or job is None:
                await self._done(claimed, DeliveryStatus.FAILED, JOB_GONE)
                return
            channel = next((c for c in job.notify if channel_key(c) == claimed.channel_key),
                           None)
            send = None if channel is None else self._sender(
                job, run, run.output, output_text(run.output), channel)
            if send is None:
                await self._done(claimed, DeliveryStatus.FAILED, CHANNEL_GONE)
                return
            log.info("run %s: retrying the delivery to %s (retry %d)", run.run_id,
                     claimed.target, claimed.retries)
            await self._send_and_record(claimed, send)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug or a store that stayed down: the next sweeps go on
            log.exception("retrying the delivery of run %s to %s failed", claimed.run_id,
                          claimed.channel_key)

    # --- one send -------------------------------------------------------------------------
    def _stale_at(self) -> datetime:
        return self.clock.now() + timedelta(seconds=SENDING_STALE_SECONDS)

    async def _send_and_record(self, claimed: Delivery, send: Send,
                               soon: float | None = None) -> DeliveryStatus:
        """Send once under ``claimed`` and record DELIVERED, RETRYING (the error is worth
        retrying and the schedule goes on: due in ``soon`` seconds when this execution tries
        again itself, else at the schedule's next step) or FAILED for good; returns what was
        recorded."""
        error = await self._send_once(send, claimed)
        if error is None:
            return DeliveryStatus.DELIVERED
        delay = retry_delay(claimed.retries) if error.retryable else None
        if delay is None:
            await self._done(claimed, DeliveryStatus.FAILED, error.message)
            log.warning("run %s: delivery to %s failed for good (send %d): %s",
                        claimed.run_id, claimed.target, claimed.attempts, error.message)
            return DeliveryStatus.FAILED
        next_at = self.clock.now() + timedelta(seconds=delay if soon is None else soon)
        await self._done(claimed, DeliveryStatus.RETRYING, error.message, next_at)
        log.warning("run %s: delivery to %s failed (send %d); the next send at %s: %s",
                    claimed.run_id, claimed.target, claimed.attempts, next_at.isoformat(),
                    error.message)
        return DeliveryStatus.RETRYING

    async def _send_once(self, send: Send, claimed: Delivery) -> DeliveryError | None:
        """Send, and record DELIVERED the moment the receiver accepted: the window in which a
        crash repeats the send (docs/delivery.md) is that one write. None once recorded; the
        error when the send failed (nothing recorded yet)."""
        accepted = False
        try:
            async with send():
                accepted = True
                await self._done(claimed, DeliveryStatus.DELIVERED, None)
        except DeliveryError as exc:
            if accepted:
                raise
            return exc
        except Exception as exc:
            if accepted:
                raise  # the send went out; its record failed (the store stayed down)
            log.exception("sending run %s to %s raised", claimed.run_id, claimed.target)
            return DeliveryError(f"{type(exc).__name__}: {exc}", retryable=False)
        return None

    async def _done(self, claimed: Delivery, status: DeliveryStatus, error: str | None,
                    next_attempt_at: datetime | None = None) -> None:
        # An error may quote what a remote server answered: made storable (domain/jsonvalue).
        done = DeliveryDone(run_id=claimed.run_id, channel_key=claimed.channel_key,
                            claim_token=claimed.claim_token or "", status=status,
                            now=self.clock.now(),
                            error=None if error is None else storable_text(error),
                            next_attempt_at=next_attempt_at)
        if await self._stored(claimed, lambda: self.store.delivery_done(done)):
            self.metrics.deliveries.labels(channel=claimed.channel, status=status.value).inc()

    @staticmethod
    async def _stored(of: JobRun | Delivery, call: Callable[[], Awaitable[T]]) -> T:
        """A store call, retried while the store is unavailable (the heartbeat keeps the run
        meanwhile): a send that went out must be recorded, or the next execution of the run
        would send it again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STORE_RETRY_SECONDS
        pause = STORE_RETRY_FIRST_SECONDS
        while True:
            try:
                return await call()
            except BackendError as exc:
                if loop.time() + pause > deadline:
                    raise
                log.warning("recording the delivery of run %s failed (%s); retrying in %.1fs",
                            of.run_id, exc.message, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, STORE_RETRY_MAX_SECONDS)
