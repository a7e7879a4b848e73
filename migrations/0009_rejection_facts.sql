-- tensorgate catalog, schema version 9: rejections a security team can use.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- migrations/postgresql/0009_rejection_facts.sql is the same change in PostgreSQL's dialect.
--
-- A rejection now says which bytes were refused, whose they were and how they came:
--   sha256     the SHA-256 (hex) of the whole refused body, hashed as it streamed
--              through the gate; NULL when the server did not read all of it (refused
--              before the body, or answered and closed mid-body)
--   namespace  the org of the model the file was aimed at
--   token_id   the id of the token that sent it (tokens.id, never reused); NULL when
--              anonymous or when the token is gone
--   route      "METHOD /pattern" of the route that took the body; NULL for imports
--   job_id     the import job that fetched it; NULL for uploads
-- From this version `size` is the refused file's size: the bytes received when the
-- body was read to its end, else its declared length (rows written before hold the
-- bytes the gate had seen when it refused). Rows written before get their namespace
-- from their model; the rest stays NULL.
-- The indexes serve GET /v1/rejections' filters, newest first.

ALTER TABLE rejections ADD COLUMN sha256 TEXT;
ALTER TABLE rejections ADD COLUMN namespace TEXT;
ALTER TABLE rejections ADD COLUMN token_id INTEGER;
ALTER TABLE rejections ADD COLUMN route TEXT;
ALTER TABLE rejections ADD COLUMN job_id INTEGER;

UPDATE rejections SET namespace = substr(model, 1, instr(model, '/') - 1)
    WHERE instr(model, '/') > 1;

CREATE INDEX rejections_namespace ON rejections (namespace, id);
CREATE INDEX rejections_reason ON rejections (reason, id);
CREATE INDEX rejections_sha256 ON rejections (sha256, id);
