-- tensorgate catalog, schema version 17 (PostgreSQL): Hub writes that survive a restart
-- and span replicas, Hub branches, and quota reservations.
-- The same change as migrations/0017_hub_writes.sql (read it for the why).
CREATE TABLE hub_lfs_pending (
    org         TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    kind        TEXT NOT NULL,
    tensors     BIGINT NOT NULL DEFAULT 0,
    parameters  BIGINT NOT NULL DEFAULT 0,
    nan         BIGINT NOT NULL DEFAULT 0,
    inf         BIGINT NOT NULL DEFAULT 0,
    code_reason TEXT NOT NULL DEFAULT '',
    stats       TEXT NOT NULL,
    model       TEXT NOT NULL,
    token_id    BIGINT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (org, sha256)
);
CREATE INDEX hub_lfs_pending_by_sha256 ON hub_lfs_pending (sha256);
CREATE INDEX hub_lfs_pending_by_time ON hub_lfs_pending (created_at);

CREATE TABLE hub_secrets (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE upload_reservations (
    id         TEXT PRIMARY KEY,
    org        TEXT NOT NULL,
    bytes      BIGINT NOT NULL CHECK (bytes >= 0),
    created_at TEXT NOT NULL
);
CREATE INDEX upload_reservations_by_org ON upload_reservations (org);

CREATE TABLE quota_locks (
    org TEXT PRIMARY KEY
);

ALTER TABLE aliases ADD COLUMN kind TEXT NOT NULL DEFAULT 'alias'
    CHECK (kind IN ('alias', 'branch', 'tag'));
ALTER TABLE versions ADD COLUMN branch TEXT;
