"""Which shards a watcher should own, given the live watchers.

Rendezvous (highest-random-weight) hashing: every watcher computes the same assignment from the
same member list, a newcomer takes about 1/N of the shards and a departure moves only the
departed watcher's shards. Ownership itself is still a lease in the store, so during a change
two watchers never dispatch the same shard: the newcomer waits until the old lease lapses.
"""

from __future__ import annotations

import hashlib


def _weight(shard: int, member: str) -> int:
    digest = hashlib.blake2b(f"{shard}:{member}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assigned_shards(me: str, members: list[str], shards: int) -> list[int]:
    everyone = sorted(set(members) | {me})
    return [s for s in range(shards) if max(everyone, key=lambda m: _weight(s, m)) == me]
