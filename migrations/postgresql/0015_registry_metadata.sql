-- tensorgate catalog, schema version 15, PostgreSQL dialect: registry metadata.
-- The same change as migrations/0015_registry_metadata.sql (read it for the why).

ALTER TABLE versions ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN downloads BIGINT NOT NULL DEFAULT 0;

CREATE TABLE model_tags (
    model_id BIGINT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    key      TEXT COLLATE "C" NOT NULL,
    value    TEXT COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (model_id, key)
);
CREATE INDEX model_tags_by_key ON model_tags (key, value);

CREATE TABLE version_tags (
    version_id BIGINT NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    key        TEXT COLLATE "C" NOT NULL,
    value      TEXT COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (version_id, key)
);

CREATE TABLE version_hub_tags (
    version_id BIGINT NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    tag        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (version_id, tag)
);
CREATE INDEX version_hub_tags_by_tag ON version_hub_tags (tag);
CREATE INDEX models_by_downloads ON models (downloads DESC, org, name);
