-- tensorgate catalog (PostgreSQL): a namespace's signature policy (docs/SIGNING.md).
-- (This helper branch was assigned migration number 0013: it is 0009 here only because
-- scripts/embed-migrations.sh wants contiguous numbers; renumber it 0013 at merge.)
-- The same change as migrations/0009_namespace_signing.sql: one row per namespace,
-- policy the JSON text of {"trusted_keys", "trusted_cas", "require_signature"}.

CREATE TABLE namespace_signing (
    org TEXT PRIMARY KEY,
    policy TEXT NOT NULL
);
