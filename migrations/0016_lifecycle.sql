-- tensorgate catalog, schema version 16: the lifecycle of a version, and quotas.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
-- migrations/postgresql/0016_lifecycle.sql is the same change in PostgreSQL's dialect.
--
-- docs/MANUAL.md, "The life of a version":
-- 1. versions.deprecated_at / deprecated_reason: a published version an author has
--    marked deprecated (NULL: not deprecated). It stays readable by number and
--    digest; "latest" skips it.
-- 2. versions.deleted_at: a published version an admin has deleted. The row stays as a
--    tombstone (so its number is never given again and its number, digest and commit
--    id answer 410 Gone), its files rows go (so gc reclaims the blobs nothing else
--    references), and so do the aliases that pointed at it.
-- 3. namespace_settings.quota_bytes: the storage quota an admin set for the org
--    (NULL: the server's --namespace-quota default).

ALTER TABLE versions ADD COLUMN deprecated_at TEXT;
ALTER TABLE versions ADD COLUMN deprecated_reason TEXT;
ALTER TABLE versions ADD COLUMN deleted_at TEXT;
ALTER TABLE namespace_settings ADD COLUMN quota_bytes INTEGER CHECK (quota_bytes >= 0);
