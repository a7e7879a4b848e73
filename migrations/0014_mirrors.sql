-- tensorgate catalog, schema version 14: mirrors of a Hub repository.
-- Applied once, in one transaction, and recorded in schema_migrations.
--
-- POST /v1/models/{org}/{name}/mirror queues a job of kind 'mirror'
-- (server/jobs/mirror_job.c): jobs.url holds the upstream endpoint (with the
-- upstream token as its userinfo while the job is queued or running; scrubbed like
-- an import's URL when it ends), jobs.path "REPO@REVISION", jobs.dtype "partial"
-- when refused files may be left out. source_version_id is the draft it fills.
--
-- mirror_versions: which upstream repository and commit a published version came
-- from, and the upstream's blob id of each of its files (JSON object path -> oid),
-- so the next mirror of the same repository copies what did not change.
-- mirror_results: a mirror job's result (JSON: fetched, copied, refused files).
--
-- jobs.kind's CHECK gains 'mirror'; SQLite rebuilds jobs as migration 6 did.

CREATE TABLE mirror_versions (
    version_id      INTEGER PRIMARY KEY REFERENCES versions (id) ON DELETE CASCADE,
    model_id        INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    endpoint        TEXT NOT NULL,
    repo            TEXT NOT NULL,
    revision        TEXT NOT NULL,
    upstream_commit TEXT NOT NULL,
    oids            TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL
);
CREATE INDEX mirror_versions_by_repo ON mirror_versions (model_id, endpoint, repo, version_id);

CREATE TABLE jobs_new (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT NOT NULL CHECK (kind IN ('convert', 'import', 'mirror')),
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
                      created_at, started_at, finished_at, token_id, lease_owner, lease_expires,
                      url, path)
    SELECT id, kind, state, model_id, source_version_id, dtype, tensors, bytes_done, bytes_total,
           attempts, result_version, error_reason, error_detail, created_at, started_at,
           finished_at, token_id, lease_owner, lease_expires, url, path FROM jobs;
DELETE FROM sqlite_sequence WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs';
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_lease ON jobs (state, lease_expires);
-- the rebuild dropped the webhooks' trigger on jobs (version 13): made again as it was
CREATE TRIGGER webhook_job_finished AFTER UPDATE OF state ON jobs
WHEN new.state IN ('done', 'failed') AND old.state <> new.state BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'job.finished',
           coalesce(new.finished_at, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
           json_object('job_id', new.id, 'kind', new.kind, 'state', new.state,
                       'model', m.org || '/' || m.name, 'result_version', new.result_version,
                       'error_reason', new.error_reason)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',job.finished,') > 0);
END;

-- after the rebuild, so that it references the new jobs table
CREATE TABLE mirror_results (
    job_id INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    result TEXT NOT NULL
);
