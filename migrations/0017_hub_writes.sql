-- tensorgate catalog, schema version 17: Hub writes that survive a restart and span
-- replicas, Hub branches, and quota reservations.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh).
-- migrations/postgresql/0017_hub_writes.sql is the same change in PostgreSQL's dialect.
--
-- docs/HF_CLIENTS.md, "Writes":
-- 1. hub_lfs_pending: an LFS object a Hub client uploaded (PUT to the signed href) and
--    the gate accepted, waiting for the commit that names it. One row per namespace
--    (org) and SHA-256: what the gate found (kind, tensor facts, per-tensor stats), the
--    model it was uploaded for, the token of the LFS batch request. A commit takes it
--    from here (on any replica, after a restart); an uncommitted one expires after a
--    day (the server deletes the row, then reclaims the blob). Its blob counts as
--    referenced (gc keeps it) and its bytes count in the namespace's usage.
-- 2. hub_secrets: the key that signs LFS upload hrefs, made once at random by the first
--    server that needs it, so that every replica (and a restarted server) accepts the
--    hrefs any of them gave.
-- 3. upload_reservations: the declared length of an upload in progress, reserved
--    against its namespace's quota at the upload's start and released at its end
--    (quota_locks serialises the check-and-reserve of one namespace across replicas).
-- 4. aliases.kind: 'alias' (made by /v1 or the CLI), 'branch' or 'tag' (made by the Hub
--    routes). /refs lists branches and plain aliases under "branches", tags under "tags".
-- 5. versions.branch: the branch a Hub commit on a branch other than main made the
--    version for (NULL: main's line). Such a version is published (readable by number,
--    commit id and its branch) but is never "latest"/main.

CREATE TABLE hub_lfs_pending (
    org         TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL CHECK (size >= 0),
    kind        TEXT NOT NULL,
    tensors     INTEGER NOT NULL DEFAULT 0,
    parameters  INTEGER NOT NULL DEFAULT 0,
    nan         INTEGER NOT NULL DEFAULT 0,
    inf         INTEGER NOT NULL DEFAULT 0,
    code_reason TEXT NOT NULL DEFAULT '',
    stats       TEXT NOT NULL,
    model       TEXT NOT NULL,
    token_id    INTEGER,
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
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    created_at TEXT NOT NULL
);
CREATE INDEX upload_reservations_by_org ON upload_reservations (org);

CREATE TABLE quota_locks (
    org TEXT PRIMARY KEY
);

ALTER TABLE aliases ADD COLUMN kind TEXT NOT NULL DEFAULT 'alias'
    CHECK (kind IN ('alias', 'branch', 'tag'));
ALTER TABLE versions ADD COLUMN branch TEXT;
