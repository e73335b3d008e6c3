-- onthedot schema for PostgreSQL, version 5: a job's flexible window (docs/schedules.md,
-- "Flexible window"). Jobs made before fire exactly on time.
ALTER TABLE jobs ADD COLUMN flexible_window_seconds integer NOT NULL DEFAULT 0
    CONSTRAINT jobs_flexible_window_range CHECK (flexible_window_seconds BETWEEN 0 AND 3600);
