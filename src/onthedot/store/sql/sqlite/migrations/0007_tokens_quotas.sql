-- onthedot schema for SQLite, version 7: tokens with an id, scopes, an expiry and revocation
-- (docs/api.md, "Tokens and scopes"), and what the per-user active-job quota counts.

-- The id names a token in `onthedot token list|revoke|rotate`; it is not a secret. Tokens made
-- before get an id derived from their hash (which is not a secret either).
ALTER TABLE api_tokens ADD COLUMN token_id TEXT;
UPDATE api_tokens SET token_id = 'tok_' || substr(token_hash, 1, 10) WHERE token_id IS NULL;
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (token_id);
-- Space-separated: read, write (implies read), admin (implies both).
ALTER TABLE api_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'write';
ALTER TABLE api_tokens ADD COLUMN expires_at TEXT;
ALTER TABLE api_tokens ADD COLUMN last_used_at TEXT;
-- A revoked token is kept (so the server never falls back to token-less mode by revoking the
-- last one) but never accepted again.
ALTER TABLE api_tokens ADD COLUMN revoked_at TEXT;

-- The active-job quota counts a user's scheduled and paused jobs at every create.
CREATE INDEX jobs_active_by_user ON jobs (user_id) WHERE status IN ('scheduled', 'paused');
