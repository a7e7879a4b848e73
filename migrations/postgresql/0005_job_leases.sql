-- tensorgate catalog, schema version 5, PostgreSQL dialect: job leases (see migrations/0005_job_leases.sql).

ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_expires BIGINT;
CREATE INDEX jobs_by_lease ON jobs (state, lease_expires);
