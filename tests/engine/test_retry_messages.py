"""A retry published before the previous attempt's message is acked (issue 18 §1.4).

With ``backoff_seconds: 0`` the rescuer may hand the run back (RETRYING -> ENQUEUED, a new
message with the same run id, often the same body) between the worker's recording of the failed
attempt and its ack of that attempt's message. The table queues merged the two publications and
the ack deleted both, so the run waited ENQUEUED without a message until the rescuer's republish
(60 s later). The interleaving is forced: the worker's ack first lets the rescuer run once.
"""

from __future__ import annotations

from typing import Any, cast

from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.queue.base import Delivery, Queue
from onthedot.watcher import Rescuer
from tests.support.webhook import WebhookReceiver

from .conftest import Engine


class RescueBeforeAck:
    """The engine's own queue; an ack first lets the rescuer hand back the due retries, as a
    rescuer in another process may at that instant."""

    def __init__(self, queue: Queue, rescuer: Rescuer) -> None:
        self._queue = queue
        self._rescuer = rescuer
        self.handed_back = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    async def ack(self, delivery: Delivery) -> bool:
        self.handed_back += await self._rescuer.hand_back_retries()
        return await self._queue.ack(delivery)


async def test_an_immediate_retry_survives_the_ack_of_the_failed_attempt(
        shape: Engine, webhook: WebhookReceiver) -> None:
    engine = shape
    webhook.status_for = lambda _r, nth: 500 if nth == 1 else 200
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=0))
    racing = RescueBeforeAck(engine.rt.queue, engine.rescuer)
    engine.worker.queue = cast(Queue, racing)

    await engine.dispatcher.refresh_shards()
    assert await engine.dispatcher.run_once() == 1
    assert await engine.worker.run_once() == 1  # attempt 1 fails; the retry is sent, then ack
    assert racing.handed_back == 1
    assert webhook.count() == 1

    # No time passes: the retry's own message must still be there for the next worker round
    # (before the fix it was deleted with the first and came back only after republish_after).
    for _ in range(5):
        if await engine.worker.run_once():
            break
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.SUCCEEDED, run
    assert run.attempt == 2
    assert webhook.count() == 2
    assert await engine.rt.queue.depth() == 0
