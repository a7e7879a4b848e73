-- tensorgate catalog, schema version 16 (PostgreSQL): the lifecycle of a version, and quotas.
-- The same change as migrations/0016_lifecycle.sql (read it for the why).
ALTER TABLE versions ADD COLUMN deprecated_at TEXT;
ALTER TABLE versions ADD COLUMN deprecated_reason TEXT;
ALTER TABLE versions ADD COLUMN deleted_at TEXT;
ALTER TABLE namespace_settings ADD COLUMN quota_bytes BIGINT CHECK (quota_bytes >= 0);
