-- tensorgate catalog, schema version 2: derived versions and background jobs.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
--
-- A half-made version is never visible because it has no row: a conversion job
-- keeps the files it has finished in job_files, and its version row is inserted,
-- with all its files, in the one transaction that commits the job. Until then no
-- version number is taken, no list shows it, nothing resolves to it and `latest`
-- does not move.

-- Lineage of a version made by a job: the source version's number (same model)
-- and the dtype its tensors were converted to. NULL for uploaded versions.
ALTER TABLE versions ADD COLUMN derived_from INTEGER;
ALTER TABLE versions ADD COLUMN derived_dtype TEXT;

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    kind              TEXT NOT NULL CHECK (kind IN ('convert')),
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
    finished_at       TEXT
);
CREATE INDEX jobs_by_state ON jobs (state, id);

-- Files a job has finished (blobs committed to the store), waiting for the job's
-- commit. gc counts them as references so a running job's blobs stay.
CREATE TABLE job_files (
    job_id       INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('safetensors', 'json', 'text')),
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    tensors      INTEGER NOT NULL DEFAULT 0,
    parameters   INTEGER NOT NULL DEFAULT 0,
    nan          INTEGER NOT NULL DEFAULT 0,
    inf          INTEGER NOT NULL DEFAULT 0,
    tensor_stats TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (job_id, path)
);
CREATE INDEX job_files_by_sha256 ON job_files (sha256);
