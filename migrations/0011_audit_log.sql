-- tensorgate catalog, schema version 11: the audit log.
-- Applied once, in one transaction, and recorded in schema_migrations.
--
-- One row per write request and per authorization refusal (docs/SECURITY.md, "The
-- audit log"). Rows form one hash chain: seq runs 1, 2, 3... without a gap (the
-- catalog takes max(seq) + 1 inside BEGIN IMMEDIATE), prev_hash is the previous
-- row's hash, and hash is SHA-256 over the record's canonical serialization
-- (server/storage/audit_record.h). The table is append-only: the triggers refuse an
-- UPDATE or a DELETE; whoever goes around them (drops a trigger, edits the file) is
-- found by `tensorgate audit verify`, which recomputes the chain.
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    time       TEXT NOT NULL,
    token_id   INTEGER,
    namespace  TEXT NOT NULL DEFAULT '',
    action     TEXT NOT NULL,
    resource   TEXT NOT NULL,
    status     INTEGER NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL DEFAULT '',
    client     TEXT NOT NULL DEFAULT '',
    user_agent TEXT NOT NULL DEFAULT '',
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX audit_log_by_time ON audit_log (time);
CREATE INDEX audit_log_by_token ON audit_log (token_id, seq);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
