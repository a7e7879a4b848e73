-- tensorgate catalog, schema version 8: the gguf file kind.
-- Applied once, in one transaction, and recorded in schema_migrations.
--
-- The gate admits a GGUF file (llama.cpp's format) when it passes the strict validator
-- (lib/st_gguf.c, docs/DESIGN.md "GGUF"); its kind is 'gguf'. files.kind and
-- job_files.kind gain it. SQLite cannot change a CHECK in place, so both tables are
-- rebuilt as in version 4 (files keeps the source_url column of version 6).

CREATE TABLE files_new (
    version_id   INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg',
                                              'gif', 'webp', 'sentencepiece', 'gguf')),
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    tensors      INTEGER NOT NULL DEFAULT 0,
    parameters   INTEGER NOT NULL DEFAULT 0,
    nan          INTEGER NOT NULL DEFAULT 0,
    inf          INTEGER NOT NULL DEFAULT 0,
    tensor_stats TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    source_url   TEXT,
    PRIMARY KEY (version_id, path)
);
INSERT INTO files_new (version_id, path, kind, size, sha256, tensors, parameters, nan, inf,
                       tensor_stats, created_at, source_url)
    SELECT version_id, path, kind, size, sha256, tensors, parameters, nan, inf, tensor_stats,
           created_at, source_url FROM files;
DROP TABLE files;
ALTER TABLE files_new RENAME TO files;
CREATE INDEX files_by_sha256 ON files (sha256);

CREATE TABLE job_files_new (
    job_id       INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg',
                                              'gif', 'webp', 'sentencepiece', 'gguf')),
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    tensors      INTEGER NOT NULL DEFAULT 0,
    parameters   INTEGER NOT NULL DEFAULT 0,
    nan          INTEGER NOT NULL DEFAULT 0,
    inf          INTEGER NOT NULL DEFAULT 0,
    tensor_stats TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (job_id, path)
);
INSERT INTO job_files_new (job_id, path, kind, size, sha256, tensors, parameters, nan, inf,
                           tensor_stats)
    SELECT job_id, path, kind, size, sha256, tensors, parameters, nan, inf, tensor_stats
    FROM job_files;
DROP TABLE job_files;
ALTER TABLE job_files_new RENAME TO job_files;
CREATE INDEX job_files_by_sha256 ON job_files (sha256);
