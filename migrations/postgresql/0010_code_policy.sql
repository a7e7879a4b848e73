-- tensorgate catalog, schema version 10 (PostgreSQL): the code policy of a namespace.
-- The same change as migrations/0010_code_policy.sql (read it for the why): the
-- namespace_settings table, the 'code' file kind with files.code_reason, and
-- rejections.outcome. PostgreSQL changes a CHECK in place.

CREATE TABLE namespace_settings (
    org        TEXT PRIMARY KEY,
    allow_code INTEGER NOT NULL DEFAULT 0 CHECK (allow_code IN (0, 1)),
    updated_at TEXT NOT NULL
);

ALTER TABLE files DROP CONSTRAINT files_kind_check;
ALTER TABLE files ADD CONSTRAINT files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece',
                    'gguf', 'code'));
ALTER TABLE files ADD COLUMN code_reason TEXT;
ALTER TABLE files ADD CONSTRAINT files_code_reason_check
    CHECK ((kind = 'code') = (code_reason IS NOT NULL));

ALTER TABLE job_files DROP CONSTRAINT job_files_kind_check;
ALTER TABLE job_files ADD CONSTRAINT job_files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece',
                    'gguf', 'code'));

ALTER TABLE rejections ADD COLUMN outcome TEXT NOT NULL DEFAULT 'refused'
    CHECK (outcome IN ('refused', 'admitted_by_policy'));
