-- tensorgate catalog, schema version 10: the code policy of a namespace.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- migrations/postgresql/0010_code_policy.sql is the same change in PostgreSQL's dialect.
--
-- docs/DESIGN.md, "The code policy": an admin may allow code (modeling_x.py, a
-- config.json with auto_map, ...) in a namespace. Three changes:
--
-- 1. namespace_settings: one row per org an admin has set something for, one column per
--    setting (later settings, such as a signature policy or a quota, are new columns
--    with a default); an org without a row has every default. allow_code is 0 or 1.
-- 2. files.kind and job_files.kind gain 'code' (a file admitted only under the policy),
--    and files gains code_reason, the code_* reason it would otherwise have been refused
--    with. A version holds code exactly when one of its files has kind 'code': the mark
--    is computed from the files, never stored as a flag. SQLite cannot change a CHECK in
--    place, so both tables are rebuilt as in version 8.
-- 3. rejections gains outcome: 'refused' (every row before this version, and the
--    default) or 'admitted_by_policy' (code the policy let in, recorded like a refusal).

CREATE TABLE namespace_settings (
    org        TEXT PRIMARY KEY,
    allow_code INTEGER NOT NULL DEFAULT 0 CHECK (allow_code IN (0, 1)),
    updated_at TEXT NOT NULL
);

CREATE TABLE files_new (
    version_id   INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('safetensors', 'json', 'text', 'png', 'jpeg',
                                              'gif', 'webp', 'sentencepiece', 'gguf', 'code')),
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    tensors      INTEGER NOT NULL DEFAULT 0,
    parameters   INTEGER NOT NULL DEFAULT 0,
    nan          INTEGER NOT NULL DEFAULT 0,
    inf          INTEGER NOT NULL DEFAULT 0,
    tensor_stats TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    source_url   TEXT,
    code_reason  TEXT,
    PRIMARY KEY (version_id, path),
    CHECK ((kind = 'code') = (code_reason IS NOT NULL))
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
                                              'gif', 'webp', 'sentencepiece', 'gguf', 'code')),
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

ALTER TABLE rejections ADD COLUMN outcome TEXT NOT NULL DEFAULT 'refused'
    CHECK (outcome IN ('refused', 'admitted_by_policy'));
