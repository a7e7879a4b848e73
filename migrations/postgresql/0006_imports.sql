-- tensorgate catalog, schema version 6 (PostgreSQL): imports from a URL.
-- The same change as migrations/0006_imports.sql: jobs of kind 'import' carry the
-- source url and the draft's file path; a file row records the URL it came from.
-- PostgreSQL changes the CHECK in place (no table rebuild).

ALTER TABLE files ADD COLUMN source_url TEXT;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('convert', 'import'));
ALTER TABLE jobs ADD COLUMN url TEXT;
ALTER TABLE jobs ADD COLUMN path TEXT;
