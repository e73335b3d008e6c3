"""Store conformance for delivery (migrations 0004 and 0009): the notify list of a job, (run,
channel) claims that hand a delivery to one attempt at a time and never twice once delivered or
failed for good, the retry sweep's claims of due deliveries of succeeded runs (one sweep per
delivery, however many at once), the inbox (one item per run, unread first, keyset pages,
marking read), signing secrets and retention. Every backend, the same assertions."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from onthedot.domain.delivery import (
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    DeliveryStatus,
    InboxCursor,
    InboxItem,
    WebhookSecret,
)
from onthedot.domain.ids import new_ulid
from onthedot.domain.models import Job, JobRun, RunStatus
from onthedot.store.base import InboxQuery, JobSave, Prune, RunClaim, RunFinish, Store

from .conftest import StoreEnv
from .test_store import half_past, run_in, with_job

EMAIL = "email:me@example.com"
STALE = timedelta(minutes=10)  # a claim counts as lost this long after it was made


def claim_of(run: JobRun, token: str, now: datetime, *, key: str = EMAIL,
             max_attempts: int = 10) -> DeliveryClaim:
    return DeliveryClaim(run_id=run.run_id, channel_key=key, channel=key.partition(":")[0],
                         target=key.partition(":")[2], claim_token=token, now=now,
                         max_attempts=max_attempts, stale_at=now + STALE)


def done_of(run: JobRun, token: str, now: datetime, status: DeliveryStatus,
            error: str | None = None, key: str = EMAIL,
            next_attempt_at: datetime | None = None) -> DeliveryDone:
    return DeliveryDone(run_id=run.run_id, channel_key=key, claim_token=token, status=status,
                        now=now, error=error, next_attempt_at=next_attempt_at)


def sweep_of(now: datetime, token: str = "sweep-1", limit: int = 50) -> DeliveryRetryClaim:
    return DeliveryRetryClaim(claim_token=token, now=now, stale_at=now + STALE, limit=limit)


def item_of(job: Job, run: JobRun, now: datetime, text: str = "台股收高",
            **overrides: Any) -> InboxItem:
    fields: dict[str, Any] = {
        "item_id": new_ulid(now), "user_id": job.user_id, "job_id": job.job_id,
        "run_id": run.run_id, "title": job.name, "text": text,
        "output": {"summary": text}, "scheduled_at": run.scheduled_at, "created_at": now}
    fields.update(overrides)
    return InboxItem(**fields)


async def running_run(store: Store, job: Job, at: datetime, token: str = "attempt-1") -> JobRun:
    """A run held by the attempt ``token`` (its lease ends 30 s after ``at``)."""
    return await run_in(store, job, RunStatus.RUNNING, scheduled_at=at, lease_token=token)


async def taken_over(store: Store, run: JobRun, token: str, at: datetime) -> None:
    """Another attempt claims the run after its lease ended (its holder died)."""
    assert await store.run_claim(RunClaim(run_id=run.run_id, token=token, now=at,
                                          lease_seconds=30)) is not None


# --- the job's channels --------------------------------------------------------------------


async def test_notify_is_stored_with_the_job_and_changed_by_a_save(store: Store) -> None:
    channels = [{"channel": "inbox"}, {"channel": "email", "to": "me@example.com"},
                {"channel": "webhook", "url": "https://hooks.example.test/x", "format": "slack"}]
    job = await with_job(store, notify=channels)
    stored = await store.job_get(job.user_id, job.job_id)
    assert stored is not None
    assert stored.notify == channels

    saved = await store.job_save(JobSave(job=replace(stored, notify=[])))
    assert saved is not None
    again = await store.job_get(job.user_id, job.job_id)
    assert again is not None
    assert again.notify == []


async def test_a_job_without_notify_goes_to_the_inbox(store: Store) -> None:
    job = await with_job(store)
    stored = await store.job_get(job.user_id, job.job_id)
    assert stored is not None
    assert stored.notify == [{"channel": "inbox"}]


async def test_an_unreadable_notify_list_falls_back_to_the_inbox(
        store_env: StoreEnv, store: Store) -> None:
    job = await with_job(store)
    damaged = '[{"no": "channel"}]' if store_env.kind == "sqlite" else '"not a list"'
    param = ":v" if store_env.kind == "sqlite" else "%(v)s::jsonb"
    await store_env.sql(f"UPDATE jobs SET notify = {param}", {"v": damaged})
    stored = await store.job_get(job.user_id, job.job_id)
    assert stored is not None
    assert stored.notify == [{"channel": "inbox"}]


# --- claims ----------------------------------------------------------------------------------


async def test_a_delivered_channel_is_never_claimed_again(store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)

    first = await store.delivery_claim(claim_of(run, "attempt-1", now))
    assert first is not None
    assert (first.status, first.attempts, first.channel, first.target) == (
        DeliveryStatus.SENDING, 1, "email", "me@example.com")
    assert await store.delivery_done(done_of(run, "attempt-1", now, DeliveryStatus.DELIVERED))

    assert await store.delivery_claim(claim_of(run, "attempt-1", now)) is None
    later = now + timedelta(seconds=40)
    await taken_over(store, run, "attempt-2", later)
    assert await store.delivery_claim(claim_of(run, "attempt-2", later)) is None
    [delivery] = await store.deliveries_of([run.run_id])
    assert (delivery.status, delivery.attempts, delivery.sent_at, delivery.error) == (
        DeliveryStatus.DELIVERED, 1, now, None)


async def test_a_sending_claim_is_taken_over_only_by_another_attempt(store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)
    assert await store.delivery_claim(claim_of(run, "attempt-1", now)) is not None

    # The attempt that holds it is sending right now: not a second time from it.
    assert await store.delivery_claim(claim_of(run, "attempt-1", now)) is None
    # The first attempt lost the run (its worker died mid-send): the next one takes over.
    later = now + timedelta(seconds=40)
    await taken_over(store, run, "attempt-2", later)
    taken = await store.delivery_claim(claim_of(run, "attempt-2", later))
    assert taken is not None
    assert (taken.attempts, taken.claim_token, taken.updated_at) == (2, "attempt-2", later)
    # The first attempt's late outcome no longer lands.
    assert not await store.delivery_done(done_of(run, "attempt-1", later,
                                                 DeliveryStatus.DELIVERED))
    assert await store.delivery_done(done_of(run, "attempt-2", later, DeliveryStatus.DELIVERED))


async def test_a_retrying_delivery_is_claimed_again_until_out_of_attempts(
        store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)
    for attempt in (1, 2, 3):
        claimed = await store.delivery_claim(claim_of(run, "attempt-1", now, max_attempts=3))
        assert claimed is not None
        assert (claimed.attempts, claimed.next_attempt_at) == (attempt, now + STALE)
        assert await store.delivery_done(done_of(
            run, "attempt-1", now, DeliveryStatus.RETRYING, f"451 try later ({attempt})",
            next_attempt_at=now + timedelta(minutes=1)))
    later = now + timedelta(seconds=40)
    await taken_over(store, run, "attempt-2", later)
    assert await store.delivery_claim(claim_of(run, "attempt-2", later, max_attempts=3)) is None
    [delivery] = await store.deliveries_of([run.run_id])
    assert (delivery.status, delivery.attempts, delivery.error, delivery.sent_at,
            delivery.next_attempt_at, delivery.retries) == (
        DeliveryStatus.RETRYING, 3, "451 try later (3)", None, now + timedelta(minutes=1), 0)


async def test_a_delivery_failed_for_good_is_never_claimed_again(store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)
    assert await store.delivery_claim(claim_of(run, "attempt-1", now))
    assert await store.delivery_done(done_of(run, "attempt-1", now, DeliveryStatus.FAILED,
                                             "550 no such user"))
    assert await store.delivery_claim(claim_of(run, "attempt-1", now)) is None
    later = now + timedelta(seconds=40)
    await taken_over(store, run, "attempt-2", later)
    assert await store.delivery_claim(claim_of(run, "attempt-2", later)) is None
    [delivery] = await store.deliveries_of([run.run_id])
    assert (delivery.status, delivery.attempts, delivery.error, delivery.next_attempt_at) == (
        DeliveryStatus.FAILED, 1, "550 no such user", None)


async def test_only_the_attempt_holding_the_run_claims(store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)
    # A zombie of an earlier attempt, or a run that is not running, claims nothing.
    assert await store.delivery_claim(claim_of(run, "zombie", now)) is None
    done = await running_run(store, await with_job(store), now, token="attempt-1")
    await run_finish(store, done, "attempt-1", now)
    assert await store.delivery_claim(claim_of(done, "attempt-1", now)) is None
    assert await store.deliveries_of([run.run_id, done.run_id]) == []


async def test_concurrent_claims_of_one_channel_have_one_winner(store_env: StoreEnv,
                                                                store: Store) -> None:
    now = half_past()
    run = await running_run(store, await with_job(store), now)
    others = [store_env.open() for _ in range(4)]
    got = await asyncio.gather(*(s.delivery_claim(claim_of(run, "attempt-1", now))
                                 for s in others))
    assert sum(c is not None for c in got) == 1


async def run_finish(store: Store, run: JobRun, token: str, at: datetime) -> None:
    assert await store.run_finish(RunFinish(run_id=run.run_id, token=token,
                                            status=RunStatus.SUCCEEDED, finished_at=at))


async def test_deliveries_of_lists_each_run_by_channel(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    one = await running_run(store, job, now)
    two = await running_run(store, job, now + timedelta(minutes=1))
    for run in (one, two):
        for key in ("webhook:https://hooks.example.test/x", EMAIL):
            assert await store.delivery_claim(claim_of(run, "attempt-1", now, key=key))

    got = await store.deliveries_of([two.run_id, "no-such-run"])
    assert [(d.run_id, d.channel_key) for d in got] == [
        (two.run_id, EMAIL), (two.run_id, "webhook:https://hooks.example.test/x")]
    assert await store.deliveries_of([]) == []


# --- the retry sweep --------------------------------------------------------------------------


async def left(store: Store, job: Job, at: datetime, status: DeliveryStatus, *,
               next_attempt_at: datetime | None = None,
               run_status: RunStatus = RunStatus.SUCCEEDED, key: str = EMAIL) -> JobRun:
    """A run whose attempt left the channel ``status`` (SENDING: claimed, outcome unrecorded)
    and then ended ``run_status`` (or is still RUNNING)."""
    run = await running_run(store, job, at)
    claimed = await store.delivery_claim(claim_of(run, "attempt-1", at, key=key))
    assert claimed is not None
    if status is not DeliveryStatus.SENDING:
        sent = at if status is DeliveryStatus.DELIVERED else None
        assert await store.delivery_done(done_of(
            run, "attempt-1", sent or at, status, None if sent else "503", key=key,
            next_attempt_at=next_attempt_at))
    if run_status is RunStatus.SUCCEEDED:
        await run_finish(store, run, "attempt-1", at)
    return run


async def test_the_retry_sweep_claims_due_deliveries_of_succeeded_runs_only(
        store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    at = now - timedelta(hours=1)
    minute = timedelta(minutes=1)
    due = await left(store, job, at, DeliveryStatus.RETRYING, next_attempt_at=now - minute)
    stale = await left(store, job, at + minute, DeliveryStatus.SENDING)  # stale at +11 min
    not_yet = await left(store, job, at + 2 * minute, DeliveryStatus.RETRYING,
                         next_attempt_at=now + minute)
    running = await left(store, job, at + 3 * minute, DeliveryStatus.RETRYING,
                         next_attempt_at=now - minute, run_status=RunStatus.RUNNING)
    delivered = await left(store, job, at + 4 * minute, DeliveryStatus.DELIVERED)
    failed = await left(store, job, at + 5 * minute, DeliveryStatus.FAILED)

    claimed = await store.deliveries_retry_claim(sweep_of(now))

    assert {d.run_id for d in claimed} == {stale.run_id, due.run_id}
    for d in claimed:
        assert (d.status, d.claim_token, d.next_attempt_at, d.updated_at, d.retries) == (
            DeliveryStatus.SENDING, "sweep-1", now + STALE, now, 1)
    assert {d.run_id: d.attempts for d in claimed} == {stale.run_id: 2, due.run_id: 2}
    assert await store.deliveries_retry_claim(sweep_of(now, "sweep-2")) == []
    # The attempt's claim is gone: only the sweep's outcome lands.
    assert not await store.delivery_done(done_of(due, "attempt-1", now,
                                                 DeliveryStatus.DELIVERED))
    assert await store.delivery_done(done_of(due, "sweep-1", now, DeliveryStatus.DELIVERED))
    untouched = await store.deliveries_of([not_yet.run_id, running.run_id, delivered.run_id,
                                           failed.run_id])
    assert {d.run_id: (d.status, d.attempts, d.retries) for d in untouched} == {
        not_yet.run_id: (DeliveryStatus.RETRYING, 1, 0),
        running.run_id: (DeliveryStatus.RETRYING, 1, 0),
        delivered.run_id: (DeliveryStatus.DELIVERED, 1, 0),
        failed.run_id: (DeliveryStatus.FAILED, 1, 0)}
    # The sweep changes no run.
    got = await store.run_get(due.run_id)
    assert got is not None
    assert got.status is RunStatus.SUCCEEDED


async def test_a_retry_outcome_schedules_the_next_one(store: Store) -> None:
    now = half_past()
    run = await left(store, await with_job(store), now - timedelta(hours=1),
                     DeliveryStatus.RETRYING, next_attempt_at=now)
    [claimed] = await store.deliveries_retry_claim(sweep_of(now))
    later = now + timedelta(minutes=5)
    assert await store.delivery_done(done_of(run, "sweep-1", now, DeliveryStatus.RETRYING,
                                             "503 again", next_attempt_at=later))
    assert await store.deliveries_retry_claim(sweep_of(later - timedelta(seconds=1))) == []
    [again] = await store.deliveries_retry_claim(sweep_of(later, "sweep-2"))
    assert (again.attempts, again.retries, again.error) == (claimed.attempts + 1, 2,
                                                            "503 again")


async def test_two_sweeps_at_once_never_claim_the_same_delivery(
        store_env: StoreEnv, store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    runs = [await left(store, job, now - timedelta(hours=1, minutes=i),
                       DeliveryStatus.RETRYING, next_attempt_at=now - timedelta(seconds=i))
            for i in range(12)]
    sweepers = [store_env.open() for _ in range(4)]
    got = await asyncio.gather(*(s.deliveries_retry_claim(sweep_of(now, f"sweep-{i}", limit=5))
                                 for i, s in enumerate(sweepers)))
    claimed = [(d.run_id, d.claim_token) for batch in got for d in batch]
    assert len({run_id for run_id, _ in claimed}) == len(claimed)  # nobody twice
    # Every claim landed on the row with its sweep's token.
    stored = {d.run_id: d for d in await store.deliveries_of([r.run_id for r in runs])}
    assert all(stored[run_id].claim_token == token for run_id, token in claimed)
    # What one sweep skipped (locked by another) is still there for the next.
    rest = await store.deliveries_retry_claim(sweep_of(now, "sweep-last"))
    assert len(claimed) + len(rest) == len(runs)


# --- inbox ----------------------------------------------------------------------------------


async def to_inbox(store: Store, job: Job, at: datetime, text: str = "台股收高",
                   token: str = "attempt-1") -> tuple[JobRun, InboxItem]:
    """A run that succeeded with an inbox item, recorded with its result."""
    run = await running_run(store, job, at, token)
    item = item_of(job, run, at, text)
    assert await store.run_finish(RunFinish(run_id=run.run_id, token=token,
                                            status=RunStatus.SUCCEEDED, finished_at=at,
                                            output=item.output, inbox=item))
    return run, item


async def test_the_inbox_item_is_written_with_the_runs_success_once(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    run, _item = await to_inbox(store, job, now)
    # A fenced attempt's late success writes neither the result nor another item.
    late = item_of(job, run, now + timedelta(seconds=5), "again")
    assert await store.run_finish(RunFinish(run_id=run.run_id, token="zombie",
                                            status=RunStatus.SUCCEEDED, finished_at=now,
                                            inbox=late)) is None
    zombie_run = await running_run(store, job, now + timedelta(minutes=1))
    assert await store.run_finish(RunFinish(
        run_id=zombie_run.run_id, token="zombie", status=RunStatus.SUCCEEDED, finished_at=now,
        inbox=item_of(job, zombie_run, now, "zombie"))) is None

    items = await store.inbox_list(InboxQuery(user_id=job.user_id, limit=10))
    assert [(i.run_id, i.text, i.output, i.read_at) for i in items] == [
        (run.run_id, "台股收高", {"summary": "台股收高"}, None)]
    [delivery] = await store.deliveries_of([run.run_id])
    assert (delivery.channel_key, delivery.status, delivery.sent_at) == (
        "inbox", DeliveryStatus.DELIVERED, now)


async def test_inbox_lists_unread_first_then_newest_in_keyset_pages(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    other = await with_job(store, user_id="user-2")
    items = []
    for i in range(5):
        _run, item = await to_inbox(store, job, now + timedelta(minutes=i), f"news {i}")
        items.append(item)
    await to_inbox(store, other, now)
    for read in (items[3], items[1]):
        assert await store.inbox_mark_read(job.user_id, read.item_id, now) is not None

    pages: list[list[str]] = []
    after: InboxCursor | None = None
    while True:
        page = await store.inbox_list(InboxQuery(user_id=job.user_id, limit=2, after=after))
        if not page:
            break
        pages.append([i.text for i in page])
        last = page[-1]
        after = InboxCursor(read=last.read_at is not None, item_id=last.item_id)

    assert pages == [["news 4", "news 2"], ["news 0", "news 3"], ["news 1"]]
    unread = await store.inbox_list(InboxQuery(user_id=job.user_id, limit=10,
                                               unread_only=True))
    assert [i.text for i in unread] == ["news 4", "news 2", "news 0"]


async def test_marking_read_is_scoped_by_user_and_keeps_the_first_time(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    _run, item = await to_inbox(store, job, now)

    assert await store.inbox_mark_read("user-2", item.item_id, now) is None
    first = await store.inbox_mark_read(job.user_id, item.item_id, now + timedelta(minutes=1))
    again = await store.inbox_mark_read(job.user_id, item.item_id, now + timedelta(minutes=2))
    assert first is not None
    assert again is not None
    assert first.read_at == again.read_at == now + timedelta(minutes=1)
    assert await store.inbox_mark_read(job.user_id, "no-such-item", now) is None


# --- secrets and retention ----------------------------------------------------------------


async def test_webhook_secrets_newest_first_per_user(store: Store) -> None:
    now = half_past()
    for i, user in enumerate(["alice", "bob", "alice"]):
        at = now + timedelta(minutes=i)
        await store.webhook_secret_add(WebhookSecret(secret_id=new_ulid(at), user_id=user,
                                                     secret=f"whsec_{i}", created_at=at))
    got = await store.webhook_secrets_recent("alice", 2)
    assert [(s.secret, s.created_at) for s in got] == [
        ("whsec_2", now + timedelta(minutes=2)), ("whsec_0", now)]
    assert await store.webhook_secrets_recent("carol", 2) == []


async def test_prune_deletes_delivery_history_past_retention(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=3))
    old, _ = await to_inbox(store, job, now - timedelta(days=2))
    new, _ = await to_inbox(store, job, now)

    pruned = await store.prune(Prune(before=now - timedelta(days=1)))

    assert (pruned.deliveries, pruned.inbox) == (1, 1)
    left = await store.inbox_list(InboxQuery(user_id=job.user_id, limit=10))
    assert [i.run_id for i in left] == [new.run_id]
    assert {d.run_id for d in await store.deliveries_of([old.run_id, new.run_id])} == {
        new.run_id}
