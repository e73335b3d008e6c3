-- onthedot schema for PostgreSQL, version 8: a fencing token on each shard lease. It goes up
-- whenever a shard changes hands or its lease lapsed, and a due claim changes nothing unless it
-- carries the shard's current token (docs/design.md, "Shards and several watchers").
ALTER TABLE shard_leases ADD COLUMN token bigint NOT NULL DEFAULT 1;
