-- tensorgate catalog, schema version 13: webhooks (subscriptions, the event outbox, deliveries).
-- Applied once, in one transaction, and recorded in schema_migrations.
-- Embedded into the binary at build time (scripts/embed-migrations.sh); tests/unit/server/catalog.c checks the table.
-- migrations/postgresql/0013_webhooks.sql is the same change in PostgreSQL's dialect.
--
-- The outbox: every change a webhook reports writes its event row in the same
-- transaction as the change itself, by the triggers below (so no code path that
-- makes the change can forget it, and a crash loses neither or both). An event is
-- written only when an enabled subscription of its namespace asks for its type.
-- The insert of an event fans out at once, in the same transaction, into one
-- delivery per matching subscription (trigger webhook_fanout); the server's
-- delivery workers claim due deliveries under a lease (lease_owner,
-- lease_expires: Unix milliseconds) and record each attempt's outcome.
-- events is the subscription's event types as ",type,type," (so one instr()
-- test matches a type); next_attempt is Unix milliseconds.

CREATE TABLE webhook_subscriptions (
    id              INTEGER PRIMARY KEY,
    org             TEXT NOT NULL,
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    events          TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1,
    failures        INTEGER NOT NULL DEFAULT 0,
    disabled_reason TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX webhook_subscriptions_by_org ON webhook_subscriptions (org, id);

CREATE TABLE webhook_events (
    id         TEXT PRIMARY KEY,
    org        TEXT NOT NULL,
    type       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    data       TEXT NOT NULL,
    subscription_id INTEGER
);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    subscription_id INTEGER NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id        TEXT NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt    INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_expires   INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    delivered_at    TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt);
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, id);

-- fan-out: an event with a subscription_id (a ping) goes to that one subscription;
-- any other to every enabled subscription of its namespace that lists its type
CREATE TRIGGER webhook_fanout AFTER INSERT ON webhook_events BEGIN
    INSERT INTO webhook_deliveries (subscription_id, event_id, created_at, updated_at)
    SELECT s.id, new.id, new.created_at, new.created_at FROM webhook_subscriptions s
    WHERE s.org = new.org AND (new.subscription_id = s.id OR (new.subscription_id IS NULL
        AND s.enabled = 1 AND instr(s.events, ',' || new.type || ',') > 0));
END;

CREATE TRIGGER webhook_model_created AFTER INSERT ON models
WHEN EXISTS (SELECT 1 FROM webhook_subscriptions WHERE org = new.org AND enabled = 1
             AND instr(events, ',model.created,') > 0) BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    VALUES ('evt_' || lower(hex(randomblob(16))), new.org, 'model.created', new.created_at,
            json_object('model', new.org || '/' || new.name, 'org', new.org, 'name', new.name,
                        'description', new.description));
END;

CREATE TRIGGER webhook_version_published AFTER UPDATE OF state ON versions
WHEN old.state = 'draft' AND new.state = 'published' BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'version.published', new.published_at,
           json_object('model', m.org || '/' || m.name, 'version', new.number, 'digest', new.digest,
                       'derived_from', new.derived_from, 'derived_dtype', new.derived_dtype)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',version.published,') > 0);
END;

-- a derived version (a conversion job's commit) is inserted published
CREATE TRIGGER webhook_version_inserted_published AFTER INSERT ON versions
WHEN new.state = 'published' BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'version.published', new.published_at,
           json_object('model', m.org || '/' || m.name, 'version', new.number, 'digest', new.digest,
                       'derived_from', new.derived_from, 'derived_dtype', new.derived_dtype)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',version.published,') > 0);
END;

CREATE TRIGGER webhook_alias_set AFTER INSERT ON aliases BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'alias.moved',
           strftime('%Y-%m-%dT%H:%M:%SZ', 'now'),
           json_object('model', m.org || '/' || m.name, 'alias', new.name, 'version', new.number,
                       'previous_version', NULL)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',alias.moved,') > 0);
END;

CREATE TRIGGER webhook_alias_moved AFTER UPDATE OF number ON aliases
WHEN old.number IS NOT new.number BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'alias.moved',
           strftime('%Y-%m-%dT%H:%M:%SZ', 'now'),
           json_object('model', m.org || '/' || m.name, 'alias', new.name, 'version', new.number,
                       'previous_version', old.number)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',alias.moved,') > 0);
END;

-- a refused upload of a model (a scan has no namespace and no event)
CREATE TRIGGER webhook_upload_refused AFTER INSERT ON rejections
WHEN new.model IS NOT NULL AND instr(new.model, '/') > 1 BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), substr(new.model, 1, instr(new.model, '/') - 1),
           'upload.refused', new.time,
           json_object('rejection_id', new.id, 'model', new.model, 'version', new.version,
                       'path', new.path, 'reason', new.reason, 'format', new.format,
                       'detail', new.detail, 'size', new.size)
    WHERE EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = substr(new.model, 1, instr(new.model, '/') - 1) AND enabled = 1
        AND instr(events, ',upload.refused,') > 0);
END;

CREATE TRIGGER webhook_job_finished AFTER UPDATE OF state ON jobs
WHEN new.state IN ('done', 'failed') AND old.state <> new.state BEGIN
    INSERT INTO webhook_events (id, org, type, created_at, data)
    SELECT 'evt_' || lower(hex(randomblob(16))), m.org, 'job.finished',
           coalesce(new.finished_at, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
           json_object('job_id', new.id, 'kind', new.kind, 'state', new.state,
                       'model', m.org || '/' || m.name, 'result_version', new.result_version,
                       'error_reason', new.error_reason)
    FROM models m WHERE m.id = new.model_id AND EXISTS (SELECT 1 FROM webhook_subscriptions
        WHERE org = m.org AND enabled = 1 AND instr(events, ',job.finished,') > 0);
END;
