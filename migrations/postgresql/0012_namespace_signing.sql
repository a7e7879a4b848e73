-- tensorgate catalog (PostgreSQL): a namespace's signature policy (docs/SIGNING.md).
-- The same change as migrations/0012_namespace_signing.sql: one row per namespace,
-- policy the JSON text of {"trusted_keys", "trusted_cas", "require_signature"}.

CREATE TABLE namespace_signing (
    org TEXT PRIMARY KEY,
    policy TEXT NOT NULL
);
