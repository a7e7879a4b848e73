-- tensorgate catalog, schema version 9 (PostgreSQL): rejections a security team can use.
-- The same change as migrations/0009_rejection_facts.sql (read it for what each
-- column holds): sha256, namespace, token_id, route and job_id; old rows get their
-- namespace from their model; indexes for GET /v1/rejections' filters.

ALTER TABLE rejections ADD COLUMN sha256 TEXT;
ALTER TABLE rejections ADD COLUMN namespace TEXT;
ALTER TABLE rejections ADD COLUMN token_id BIGINT;
ALTER TABLE rejections ADD COLUMN route TEXT;
ALTER TABLE rejections ADD COLUMN job_id BIGINT;

UPDATE rejections SET namespace = split_part(model, '/', 1)
    WHERE strpos(model, '/') > 1;

CREATE INDEX rejections_namespace ON rejections (namespace, id);
CREATE INDEX rejections_reason ON rejections (reason, id);
CREATE INDEX rejections_sha256 ON rejections (sha256, id);
