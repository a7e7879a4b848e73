-- tensorgate catalog (PostgreSQL), schema version 14: mirrors of a Hub repository.
-- The same change as migrations/0014_mirrors.sql.

CREATE TABLE mirror_versions (
    version_id      BIGINT PRIMARY KEY REFERENCES versions (id) ON DELETE CASCADE,
    model_id        BIGINT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    endpoint        TEXT NOT NULL,
    repo            TEXT NOT NULL,
    revision        TEXT NOT NULL,
    upstream_commit TEXT NOT NULL,
    oids            TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL
);
CREATE INDEX mirror_versions_by_repo ON mirror_versions (model_id, endpoint, repo, version_id);

CREATE TABLE mirror_results (
    job_id BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    result TEXT NOT NULL
);

ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('convert', 'import', 'mirror'));
