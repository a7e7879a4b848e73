-- tensorgate catalog, schema version 3, PostgreSQL dialect: identifiers are never reused.
-- In PostgreSQL the identity columns of schema 1 already never give an id twice, so
-- only the other half of migrations/0003_stable_ids.sql remains: jobs gain token_id,
-- the token that asked for the job (its commit re-checks it). NULL for older jobs.

ALTER TABLE jobs ADD COLUMN token_id BIGINT;
