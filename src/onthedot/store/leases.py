"""What both SQL stores share for shard leases: how a released lease is marked, and how a take
is told apart from a renewal.

A lease row is never deleted, so its fencing token only ever goes up (a deleted row would be
inserted again with token 1, which an old holder might still carry). Releasing ends the lease
by moving ``expires_at`` to ``RELEASED_AT``; a lease that simply ran out keeps the instant it
ran out at, which is how a take from a dead (or stalled) holder is recognised::

    previous row                       after this take         reported
    absent / released                  ours, token 1 / +1      taken_from = None
    ours, not expired                  ours, same token        taken_from = None  (renewal)
    anyone's (ours too), lapsed        ours, token + 1         taken_from = that owner
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from onthedot.store.base import ShardLease

# expires_at of a released lease: earlier than any instant a lease can have run out at
RELEASED_AT = datetime(1970, 1, 1, tzinfo=UTC)


def leases_taken(previous: Mapping[int, tuple[str, datetime]],
                 owned: Iterable[tuple[int, int]], now: datetime) -> list[ShardLease]:
    """``owned`` (shard, token) pairs held after the take, as ``ShardLease``s; ``previous``
    maps a shard to (owner, expires_at) as read in the taking transaction before the take."""
    leases = []
    for shard, token in owned:
        taken_from = None
        if shard in previous:
            holder, expires_at = previous[shard]
            if RELEASED_AT < expires_at <= now:
                taken_from = holder
        leases.append(ShardLease(shard=shard, token=token, taken_from=taken_from))
    return leases
