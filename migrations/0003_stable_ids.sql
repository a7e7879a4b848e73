-- tensorgate catalog, schema version 3: identifiers are never reused.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
--
-- Work that runs for a while (an upload's body, a conversion job, a preload) holds
-- the ids of the rows it was started for and writes under them at its end. With a
-- plain INTEGER PRIMARY KEY, SQLite hands the id of a deleted row (the highest) to
-- the next insert, so that work could land in another tenant's new row. AUTOINCREMENT
-- never gives an id twice, so models, versions, jobs and tokens are rebuilt with it
-- (SQLite cannot add it in place): new table, copy, drop, rename, indexes again.
-- The catalog runs this with foreign_keys off (a DROP would otherwise cascade) and
-- checks PRAGMA foreign_key_check before the commit.
--
-- jobs also gain token_id: the token that asked for the job. Its commit re-checks
-- that the token still exists and still covers the model (a revoked token's job
-- fails with reason token_revoked). NULL for jobs made before this version.

CREATE TABLE models_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org         TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    UNIQUE (org, name)
);
INSERT INTO models_new (id, org, name, description, created_at)
    SELECT id, org, name, description, created_at FROM models;
DROP TABLE models;
ALTER TABLE models_new RENAME TO models;

CREATE TABLE versions_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id      INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    number        INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('draft', 'published')),
    created_at    TEXT NOT NULL,
    published_at  TEXT,
    digest        TEXT,
    derived_from  INTEGER,
    derived_dtype TEXT,
    UNIQUE (model_id, number)
);
INSERT INTO versions_new (id, model_id, number, state, created_at, published_at, digest,
                          derived_from, derived_dtype)
    SELECT id, model_id, number, state, created_at, published_at, digest, derived_from,
           derived_dtype FROM versions;
DROP TABLE versions;
ALTER TABLE versions_new RENAME TO versions;
CREATE INDEX versions_by_digest ON versions (model_id, digest);

CREATE TABLE jobs_new (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
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
    finished_at       TEXT,
    token_id          INTEGER
);
INSERT INTO jobs_new (id, kind, state, model_id, source_version_id, dtype, tensors, bytes_done,
                      bytes_total, attempts, result_version, error_reason, error_detail,
                      created_at, started_at, finished_at)
    SELECT id, kind, state, model_id, source_version_id, dtype, tensors, bytes_done, bytes_total,
           attempts, result_version, error_reason, error_detail, created_at, started_at,
           finished_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_by_state ON jobs (state, id);

CREATE TABLE tokens_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    hash       TEXT NOT NULL UNIQUE,
    scope      TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    namespace  TEXT,
    created_at TEXT NOT NULL
);
INSERT INTO tokens_new (id, hash, scope, namespace, created_at)
    SELECT id, hash, scope, namespace, created_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_new RENAME TO tokens;
