-- tensorgate catalog, schema version 6: imports from a URL.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
--
-- POST .../versions/{rev}/files/{path}/import queues a job of kind 'import': the
-- worker fetches url (server/jobs/import_job.c) through the ingest pipeline into the
-- file path of the draft version source_version_id. The file row records the URL it
-- came from (files.source_url; NULL for uploaded and converted files, and again NULL
-- when an upload replaces the file).
--
-- jobs.kind's CHECK gains 'import', and jobs gains url and path (NULL for
-- conversions). SQLite cannot change a CHECK in place, so jobs is rebuilt as in
-- schema 3 (new, copy, drop, rename, indexes), keeping its AUTOINCREMENT counter so a
-- deleted job's id is never given again, and the lease columns of schema 5.
-- migrations/postgresql/0006_imports.sql is the same change in PostgreSQL's dialect.

ALTER TABLE files ADD COLUMN source_url TEXT;

CREATE TABLE jobs_new (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT NOT NULL CHECK (kind IN ('convert', 'import')),
    state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    model_id          INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    source_version_id INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    dtype             TEXT NOT NULL,
    tensors           TEXT NOT NULL DEFAULT '[]',
    bytes_done        INTEGER NOT NULL DEFAULT 0,
    bytes_total       INTEGER NOT NULL DEFAULT 0,
    attempts          INTEGER NOT NULL DEFAULT 0,
    result_version    INTEGER,
    error_reason      TEXT,
    error_detail      TEXT,
    created_at        TEXT NOT NULL,
    started_at        TEXT,
    finished_at       TEXT,
    token_id          INTEGER,
    lease_owner       TEXT,
    lease_expires     INTEGER,
    url               TEXT,
    path              TEXT
);
INSERT INTO jobs_new (id, kind, state, model_id, source_version_id, dtype, tensors, bytes_done,
                      bytes_total, attempts, result_version, error_reason, error_detail,
                      created_at, started_at, finished_at, token_id, lease_owner, lease_expires)
    SELECT id, kind, state, model_id, source_version_id, dtype, tensors, bytes_done, bytes_total,
           attempts, result_version, error_reason, error_detail, created_at, started_at,
           finished_at, token_id, lease_owner, lease_expires FROM jobs;
DELETE FROM sqlite_sequence WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs';
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_lease ON jobs (state, lease_expires);
