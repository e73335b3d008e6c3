"""The ``inbox`` channel: the run's output as an item of the user's inbox.

Exactly once by construction: the item travels with the run's result. The worker hands it to
``Store.run_finish``, which writes it (unique per run) and its DELIVERED row in the transaction
that records SUCCEEDED: only the attempt holding the run writes it, and an item exists exactly
when the run's success does. Users read it with ``GET /v1/inbox``, the MCP tool ``list_inbox``
and ``onthedot inbox``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from onthedot.delivery.render import subject_of
from onthedot.domain.delivery import InboxItem
from onthedot.domain.ids import new_ulid
from onthedot.domain.models import Job, JobRun


def inbox_item(job: Job, run: JobRun, output: Any, text: str, now: datetime) -> InboxItem:
    """The run's item, to be recorded with its result."""
    return InboxItem(item_id=new_ulid(now), user_id=job.user_id, job_id=job.job_id,
                     run_id=run.run_id, title=subject_of(job), text=text, output=output,
                     scheduled_at=run.scheduled_at, created_at=now)
