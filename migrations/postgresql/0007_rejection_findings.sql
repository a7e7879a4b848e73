-- tensorgate catalog, schema version 7 (PostgreSQL): what a refused pickle would do.
-- The same change as migrations/0007_rejection_findings.sql: a rejection records the
-- findings of the gate's verdict as a JSON text (NULL when none).

ALTER TABLE rejections ADD COLUMN findings TEXT;
