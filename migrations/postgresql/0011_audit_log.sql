-- tensorgate catalog (PostgreSQL), schema version 11: the audit log.
-- Applied once, in one transaction, and recorded in schema_migrations.
--
-- As migrations/0011_audit_log.sql. Replicas on one database append to one chain:
-- each append takes a transaction-level advisory lock before it reads the last row
-- and inserts the next, so seq has no gap and prev_hash is always the last hash.
-- The triggers refuse UPDATE, DELETE and TRUNCATE; an edit made around them is found
-- by `tensorgate audit verify`.
CREATE TABLE audit_log (
    seq        BIGINT PRIMARY KEY,
    time       TEXT NOT NULL,
    token_id   BIGINT,
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

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END;
$$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
