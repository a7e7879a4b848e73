-- tensorgate catalog: a namespace's signature policy (docs/SIGNING.md).
-- Applied once, in one transaction, and recorded in schema_migrations.
-- migrations/postgresql/0012_namespace_signing.sql is the same change in PostgreSQL's dialect.
--
-- One row per namespace that has one: policy is the JSON text of
-- {"trusted_keys": [PEM...], "trusted_cas": [PEM...], "require_signature": bool},
-- as an admin set it through PUT /v1/namespaces/{org}/signing (checked there: every
-- PEM parses). A namespace without a row trusts nothing and requires nothing.

CREATE TABLE namespace_signing (
    org TEXT PRIMARY KEY,
    policy TEXT NOT NULL
);
