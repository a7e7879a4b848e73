-- tensorgate catalog, schema version 15: registry metadata (tags, version
-- descriptions), the Hub's tags of a published version, and download counts.
-- Applied once, in one transaction, and recorded in schema_migrations.
--
-- model_tags and version_tags hold the key/value tags a writer sets with PATCH
-- (docs/MANUAL.md "Tags and descriptions"): one row per key, value '' for a bare
-- key. version_hub_tags holds the Hub tags a version had when it was published
-- (its model card's tags, language, license:..., base_model:..., dataset:..., and
-- "gguf" when it holds a GGUF file), so that listings filter by them in SQL.
-- models.downloads is the download counter the server adds its batched counts to.

ALTER TABLE versions ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN downloads INTEGER NOT NULL DEFAULT 0;

CREATE TABLE model_tags (
    model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    key      TEXT NOT NULL,
    value    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (model_id, key)
);
CREATE INDEX model_tags_by_key ON model_tags (key, value);

CREATE TABLE version_tags (
    version_id INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (version_id, key)
);

CREATE TABLE version_hub_tags (
    version_id INTEGER NOT NULL REFERENCES versions (id) ON DELETE CASCADE,
    tag        TEXT NOT NULL,
    PRIMARY KEY (version_id, tag)
);
CREATE INDEX version_hub_tags_by_tag ON version_hub_tags (tag);
CREATE INDEX models_by_downloads ON models (downloads DESC, org, name);
