"""Records of the delivery step: where a run's output went, the user's inbox, signing secrets.

A delivery is one (run, channel) pair. Its state machine (every arrow a compare-and-set in the
store, see ``Store.delivery_claim``)::

    (no row) --claim--> SENDING --sent--> DELIVERED   (final: never sent again)
                          |  ^
                          |  +-- claim by a later attempt of the run (the one that claimed it
                          |  |   lost the run: crashed or fenced) -> sent again, same message id
                          |  +-- retry claim, once the run SUCCEEDED and next_attempt_at passed
                          |      (the sender died mid-send) -> sent again, same message id
                          +--failed, worth retrying--> RETRYING --claim (next try of the
                          |                              execution, a later attempt, or the
                          |                              retry claim when due)--> SENDING
                          +--failed for good--> FAILED   (final: not worth retrying, or the
                                                          retry schedule is used up)

A claim by an execution of the run is fenced like every other write of a run: only the attempt
that holds it (RUNNING with its lease token) may claim. Once the run SUCCEEDED, only the retry
sweep claims (``Store.deliveries_retry_claim``), each claim a compare-and-set with its own
token, so two sweepers never send the same delivery at once.

The inbox channel writes its inbox item and its DELIVERED row in one transaction, so it never
passes through SENDING.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class DeliveryStatus(enum.StrEnum):
    SENDING = "sending"  # claimed; the send may or may not have left
    DELIVERED = "delivered"
    RETRYING = "retrying"  # a send failed with an error worth retrying; tried at next_attempt_at
    FAILED = "failed"  # for good: not worth retrying, or out of retries


# Pauses before the scheduled retries of a delivery whose sends while the run was executed
# failed: the k-th retry comes RETRY_SCHEDULE_SECONDS[k - 1] after the send before it failed.
# After the last one fails, the delivery is FAILED for good.
RETRY_SCHEDULE_SECONDS = (60.0, 300.0, 1800.0, 7200.0, 21600.0)  # 1 min, 5 min, 30 min, 2 h, 6 h


def retry_delay(retries: int) -> float | None:
    """Seconds to the next scheduled retry of a delivery retried ``retries`` times so far, or
    None when the schedule is used up."""
    return RETRY_SCHEDULE_SECONDS[retries] if retries < len(RETRY_SCHEDULE_SECONDS) else None


@dataclass(frozen=True)
class Delivery:
    run_id: str
    channel_key: str  # identifies the channel within the run: "inbox", "email:a@b.c", ...
    channel: str  # inbox | email | webhook
    target: str  # what a user recognises: the address, the URL, "inbox"
    status: DeliveryStatus
    attempts: int
    updated_at: datetime
    sent_at: datetime | None = None
    error: str | None = None
    claim_token: str | None = None  # the run attempt (lease token) or retry sweep that last
    # claimed it. RETRYING: next_attempt_at is when the next try is due. SENDING: when the claim
    # counts as lost (its sender died mid-send), so the retry sweep may take it over once the
    # run succeeded.
    next_attempt_at: datetime | None = None
    retries: int = 0  # scheduled retries so far (RETRY_SCHEDULE_SECONDS)


@dataclass(frozen=True)
class DeliveryClaim:
    """Take (run, channel) for sending, as the attempt that holds the run (``claim_token`` is
    the run's lease token: a fenced attempt claims nothing): a new row, or a RETRYING one, or a
    SENDING one claimed by an earlier attempt (it lost the run mid-send); never a DELIVERED or
    FAILED one, nor one past ``max_attempts`` sends."""

    run_id: str
    channel_key: str
    channel: str
    target: str
    claim_token: str
    now: datetime
    max_attempts: int
    stale_at: datetime  # the claim counts as lost after this (its sender died mid-send)


@dataclass(frozen=True)
class DeliveryRetryClaim:
    """Take up to ``limit`` deliveries of SUCCEEDED runs that are due: RETRYING ones whose
    next_attempt_at has passed, and SENDING ones whose claim went stale. Each becomes SENDING
    with ``claim_token``, attempts + 1 and retries + 1, stale at ``stale_at``."""

    claim_token: str
    now: datetime
    stale_at: datetime
    limit: int


@dataclass(frozen=True)
class DeliveryDone:
    """The outcome of a claimed send: DELIVERED, RETRYING (at ``next_attempt_at``) or FAILED,
    only while ``claim_token`` holds."""

    run_id: str
    channel_key: str
    claim_token: str
    status: DeliveryStatus
    now: datetime
    error: str | None = None
    next_attempt_at: datetime | None = None


@dataclass(frozen=True)
class InboxItem:
    item_id: str  # ULID: sorts by delivery time
    user_id: str
    job_id: str
    run_id: str  # unique: one item per run
    title: str  # the job's name
    text: str  # the output as text
    output: Any
    scheduled_at: datetime
    created_at: datetime
    read_at: datetime | None = None


@dataclass(frozen=True)
class InboxCursor:
    """Keyset position in a user's inbox, ordered unread first, then newest first."""

    read: bool
    item_id: str


@dataclass(frozen=True)
class WebhookSecret:
    secret_id: str  # ULID: sorts by creation time
    user_id: str
    secret: str
    created_at: datetime
