-- tensorgate catalog, schema version 8, PostgreSQL dialect: the gguf file kind.
-- The same change as migrations/0008_gguf_kind.sql (read it for the why): files.kind
-- and job_files.kind gain 'gguf'. PostgreSQL changes a CHECK in place.

ALTER TABLE files DROP CONSTRAINT files_kind_check;
ALTER TABLE files ADD CONSTRAINT files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece', 'gguf'));

ALTER TABLE job_files DROP CONSTRAINT job_files_kind_check;
ALTER TABLE job_files ADD CONSTRAINT job_files_kind_check
    CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg', 'gif', 'webp', 'sentencepiece', 'gguf'));
