-- tensorgate catalog, schema version 1.
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.

CREATE TABLE models (
    id          INTEGER PRIMARY KEY,
    org         TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    UNIQUE (org, name)
);

CREATE TABLE versions (
    id           INTEGER PRIMARY KEY,
    model_id     INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    number       INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('draft', 'published')),
    created_at   TEXT NOT NULL,
    published_at TEXT,
    digest       TEXT,
    UNIQUE (model_id, number)
);
CREATE INDEX versions_by_digest ON versions (model_id, digest);

CREATE TABLE files (
    version_id   INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('safetensors', 'json', 'text')),
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    tensors      INTEGER NOT NULL DEFAULT 0,
    parameters   INTEGER NOT NULL DEFAULT 0,
    nan          INTEGER NOT NULL DEFAULT 0,
    inf          INTEGER NOT NULL DEFAULT 0,
    tensor_stats TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    PRIMARY KEY (version_id, path)
);
CREATE INDEX files_by_sha256 ON files (sha256);

CREATE TABLE aliases (
    model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    number   INTEGER NOT NULL,
    PRIMARY KEY (model_id, name)
);

CREATE TABLE rejections (
    id      INTEGER PRIMARY KEY,
    time    TEXT NOT NULL,
    model   TEXT,
    version INTEGER,
    path    TEXT,
    reason  TEXT NOT NULL,
    format  TEXT,
    detail  TEXT,
    client  TEXT,
    size    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE tokens (
    id         INTEGER PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    scope      TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    namespace  TEXT,
    created_at TEXT NOT NULL
);
