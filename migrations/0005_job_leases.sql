-- tensorgate catalog, schema version 5: job leases, so several replicas share one job queue.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
-- migrations/postgresql/0005_job_leases.sql is the same change in PostgreSQL's dialect.
--
-- A claim writes who runs the job (lease_owner: one catalog handle, that is one
-- server process) and until when (lease_expires: Unix milliseconds, the
-- database's clock). The worker renews the lease while it works; progress, job files, the
-- commit and a failure are accepted only from the lease holder. A running job
-- whose lease has expired (its process died) is claimed again by any process,
-- so a job survives the loss of the replica that ran it, and its version is
-- still committed once (only the holder can commit). NULL for jobs not running.

ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_expires INTEGER;
CREATE INDEX jobs_by_lease ON jobs (state, lease_expires);
