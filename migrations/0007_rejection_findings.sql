-- tensorgate catalog, schema version 7: what a refused pickle would do.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
-- migrations/postgresql/0007_rejection_findings.sql is the same change in PostgreSQL's dialect.
--
-- A rejection records the findings of the gate's verdict (docs/DESIGN.md §3): a
-- JSON array of {"global", "calls", "severity", "offset"}, one per global a refused
-- pickle imports (plain, in a PyTorch zip, in a NumPy file). NULL for rows written
-- before this version and for refusals that are not pickles.

ALTER TABLE rejections ADD COLUMN findings TEXT;
