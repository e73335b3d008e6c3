"""Delivery records to SQL parameters and back (the delivery part of the codec, see codec.py).

Parameters carry timestamps as the SQLite text format; the PostgreSQL store replaces them with
native datetimes (``native_times``). Rows from either backend map through the same functions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from onthedot.db.timestamps import ts
from onthedot.domain.delivery import (
    Delivery,
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    DeliveryStatus,
    InboxItem,
    WebhookSecret,
)
from onthedot.store.codec import Row, _as_dt, _need_dt, _output_of, dump_output


def claim_params(claim: DeliveryClaim) -> dict[str, Any]:
    return {"run_id": claim.run_id, "channel_key": claim.channel_key, "channel": claim.channel,
            "target": claim.target, "claim_token": claim.claim_token, "now": ts(claim.now),
            "max_attempts": claim.max_attempts, "stale_at": ts(claim.stale_at)}


def retry_claim_params(claim: DeliveryRetryClaim) -> dict[str, Any]:
    return {"claim_token": claim.claim_token, "now": ts(claim.now),
            "stale_at": ts(claim.stale_at), "limit": claim.limit}


def done_params(done: DeliveryDone) -> dict[str, Any]:
    return {"run_id": done.run_id, "channel_key": done.channel_key,
            "claim_token": done.claim_token, "status": done.status.value, "now": ts(done.now),
            "error": done.error,
            "next_attempt_at": None if done.next_attempt_at is None else ts(done.next_attempt_at)}


def delivery_from_row(row: Row) -> Delivery:
    return Delivery(
        run_id=row["run_id"], channel_key=row["channel_key"], channel=row["channel"],
        target=row["target"], status=DeliveryStatus(row["status"]),
        attempts=int(row["attempts"]), updated_at=_need_dt(row["updated_at"]),
        sent_at=_as_dt(row["sent_at"]), error=row["error"], claim_token=row["claim_token"],
        next_attempt_at=_as_dt(row["next_attempt_at"]), retries=int(row["retries"]))


def inbox_params(item: InboxItem, claim_token: str) -> dict[str, Any]:
    return {"item_id": item.item_id, "user_id": item.user_id, "job_id": item.job_id,
            "run_id": item.run_id, "title": item.title, "body": item.text,
            "output": dump_output(item.output), "scheduled_at": ts(item.scheduled_at),
            "created_at": ts(item.created_at), "now": ts(item.created_at),
            "claim_token": claim_token}


def inbox_from_row(row: Row) -> InboxItem:
    return InboxItem(
        item_id=row["item_id"], user_id=row["user_id"], job_id=row["job_id"],
        run_id=row["run_id"], title=row["title"], text=row["body"],
        output=_output_of(row["run_id"], row["output"]),
        scheduled_at=_need_dt(row["scheduled_at"]), created_at=_need_dt(row["created_at"]),
        read_at=_as_dt(row["read_at"]))


def secret_params(secret: WebhookSecret) -> dict[str, Any]:
    return {"secret_id": secret.secret_id, "user_id": secret.user_id, "secret": secret.secret,
            "created_at": ts(secret.created_at)}


def secret_from_row(row: Row) -> WebhookSecret:
    return WebhookSecret(secret_id=row["secret_id"], user_id=row["user_id"],
                         secret=row["secret"], created_at=_need_dt(row["created_at"]))


def native_times(params: dict[str, Any], **instants: datetime | None) -> dict[str, Any]:
    """PostgreSQL takes datetimes, not the SQLite text format."""
    return {**params, **instants}
