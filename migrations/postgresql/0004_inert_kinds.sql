-- tensorgate catalog, schema version 4, PostgreSQL dialect: inert file kinds.
-- The same change as migrations/0004_inert_kinds.sql (read it for the why):
-- files.kind and job_files.kind gain 'png', 'jpeg', 'gif', 'webp' and
-- 'sentencepiece'. PostgreSQL changes a CHECK in place (the constraints of schema
-- 1 and 2 carry PostgreSQL's default names).

ALTER TABLE files DROP CONSTRAINT files_kind_check;
ALTER TABLE files ADD CONSTRAINT files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece'));

ALTER TABLE job_files DROP CONSTRAINT job_files_kind_check;
ALTER TABLE job_files ADD CONSTRAINT job_files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece'));
