"""Records of the delivery step: where a run's output went, the user's inbox, signing secrets.

A delivery is one (run, channel) pair. Its state machine (every arrow a compare-and-set in the
store, see ``Store.delivery_claim``)::

    (no row) --claim--> SENDING --sent--> DELIVERED   (final: never sent again)
                          |  ^
                          |  +-- claim by a later attempt of the run (the one that claimed it
                          |      lost the run: crashed or fenced) -> sent again, same message id
                          +--failed--> FAILED --claim (next try, or a later attempt)--> SENDING

Only the attempt that holds the run (RUNNING with its lease token) may claim: deliveries are
fenced like every other write of a run.

The inbox channel writes its inbox item and its DELIVERED row in one transaction, so it never
passes through SENDING.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class DeliveryStatus(enum.StrEnum):
    SENDING = "sending"  # claimed by an attempt of the run; the send may or may not have left
    DELIVERED = "delivered"
    FAILED = "failed"


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
    claim_token: str | None = None  # the run attempt (lease token) that last claimed it


@dataclass(frozen=True)
class DeliveryClaim:
    """Take (run, channel) for sending, as the attempt that holds the run (``claim_token`` is
    the run's lease token: a fenced attempt claims nothing): a new row, or a FAILED one, or a
    SENDING one claimed by an earlier attempt (it lost the run mid-send); never a DELIVERED
    one, nor one past ``max_attempts`` sends."""

    run_id: str
    channel_key: str
    channel: str
    target: str
    claim_token: str
    now: datetime
    max_attempts: int


@dataclass(frozen=True)
class DeliveryDone:
    """The outcome of a claimed send: DELIVERED or FAILED, only while ``claim_token`` holds."""

    run_id: str
    channel_key: str
    claim_token: str
    status: DeliveryStatus
    now: datetime
    error: str | None = None


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
