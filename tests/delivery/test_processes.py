"""A real worker process killed between the mail server taking the mail and the worker
recording it: the documented window of docs/delivery.md, end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from onthedot.config import Settings
from onthedot.domain.delivery import DeliveryStatus
from onthedot.domain.models import JobParams, RunStatus
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from onthedot.store.base import InboxQuery
from tests.delivery.conftest import SENDER
from tests.support.procs import RoleProcess, start_roles
from tests.support.smtp import Mailbox
from tests.support.waiting import async_wait_until, wait_until

pytestmark = pytest.mark.slow

VISIBILITY = 2.0  # seconds: a killed worker's run is taken over quickly


@pytest.fixture
async def client_rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/shared.db",
                                     smtp_url="smtp://127.0.0.1:1", smtp_from=SENDER))
    yield rt
    await rt.close()


@pytest.fixture
def procs() -> Iterator[list[RoleProcess]]:
    started: list[RoleProcess] = []
    yield started
    for p in started:
        if p.alive():
            p.kill()


async def test_a_worker_killed_mid_send_is_replaced_and_the_mail_repeats_its_message_id(
        tmp_path: Path, client_rt: Runtime, procs: list[RoleProcess],
        mailbox: Mailbox) -> None:
    mailbox.hold = True  # the server keeps the first mail and does not answer yet
    view, _ = await client_rt.service.create_job("alice", JobSpec(
        action={"type": "message", "text": "台股收高"}, params=JobParams(type="immediate"),
        notify=[{"channel": "inbox"}, {"channel": "email", "to": "me@example.com"}]))
    settings = {"database_url": f"sqlite:///{tmp_path}/shared.db",
                "visibility_timeout": VISIBILITY, "tick_seconds": 0.2,
                "smtp_url": mailbox.url, "smtp_from": SENDER}

    first = start_roles("watcher,worker", tmp_path, "first", **settings)
    procs.append(first)
    wait_until(mailbox.arrived.is_set, 20, "the first worker's mail")
    first.kill()
    mailbox.release()
    procs.append(start_roles("watcher,worker,rescuer", tmp_path, "second", **settings))

    async def finished() -> bool:
        runs = (await client_rt.service.list_runs("alice", view.job.job_id)).items
        return bool(runs) and runs[0].status is RunStatus.SUCCEEDED

    await async_wait_until(finished, 30, "the run to succeed on the second worker")
    [run] = (await client_rt.service.list_runs("alice", view.job.job_id)).items
    assert run.attempt == 2
    ids = mailbox.message_ids()
    assert len(ids) == 2  # at least once on the wire ...
    assert ids[0] == ids[1]  # ... and the repeat says so
    mail = {d.channel: d for d in run.deliveries}["email"]
    assert (mail.status, mail.attempts) == (DeliveryStatus.DELIVERED, 2)
    items = await client_rt.store.inbox_list(InboxQuery(user_id="alice", limit=10))
    assert [i.run_id for i in items] == [run.run_id]  # the inbox: exactly once
