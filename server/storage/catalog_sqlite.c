/* The SQLite catalog backend (catalog_backend.h; the API is catalog.h).
 *
 * One database file in WAL mode, two kinds of connection:
 *  - one writer: every call that changes the catalog runs on it, serialised by
 *    write_lock (SQLite allows one writer at a time anyway), and so do the
 *    migrations at open;
 *  - readers: a pool of read-only connections. A call that only reads checks one
 *    out (opening one when none is idle), runs its statements in autocommit (each
 *    call is its own read transaction), and puts it back. In WAL mode readers never
 *    wait on the writer nor on each other, and a read transaction sees every commit
 *    that finished before it began: a write that returned is seen by any read that
 *    starts after it, on any thread (read-your-writes).
 * So no lock is held while a read runs or while its visitor is called (the rule
 * catalog.h states). Connections are not tied to threads: a thread that ends leaves
 * nothing behind, and tg_catalog_close closes the writer and every pooled reader
 * (it must not race calls in flight). Statements are prepared once per connection
 * and cached by their SQL text's address. */
#include "catalog.h"
#include "catalog_backend.h"
#include "catalog_sql.h"
#include "embedded.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* migrations/NNNN_*.sql, in order, compiled in by scripts/embed-migrations.sh:
 * tg_migrations[i] is schema version i + 1. */
#define MIGRATION_COUNT ((int)tg_migrations_count)

#define STATEMENT_CACHE_SIZE 96
/* Idle readers kept open; one returned beyond this is closed. The pool holds at
 * most as many readers as calls ran at once (the server's threads and workers). */
#define IDLE_READERS_MAX 64
/* How long a connection waits on a lock another connection holds (the writer of
 * another process, a checkpoint) before its call fails. */
#define BUSY_TIMEOUT_MS 10000

typedef struct conn {
    sqlite3 *db;
    struct {
        const char *sql; /* identity: the static string's address */
        sqlite3_stmt *statement;
    } cache[STATEMENT_CACHE_SIZE];
    struct conn *next_idle;
} conn;

typedef struct sqlite_catalog {
    tg_catalog base; /* first: a tg_catalog * points here */
    char *path;
    pthread_mutex_t write_lock; /* held for every call on writer */
    conn writer;
    pthread_mutex_t pool_lock; /* guards the three fields below; held only to pop or push */
    conn *idle;                /* readers not in use, the most recently used first */
    unsigned idle_count;
    unsigned readers; /* open readers, idle or checked out */
    int schema_version;
} sqlite_catalog;

static const tg_catalog_ops sqlite_ops;

static sqlite_catalog *sq(tg_catalog *catalog)
{
    assert(catalog->ops == &sqlite_ops);
    return (sqlite_catalog *)catalog;
}

static int sq_schema_version(tg_catalog *catalog)
{
    return sq(catalog)->schema_version;
}

/* The cached statement for sql on k, reset and with bindings cleared; NULL when k
 * is NULL (no connection could be had) or the statement does not prepare. The
 * caller holds k (write_begin or read_begin). */
static sqlite3_stmt *statement(conn *k, const char *sql)
{
    if (k == NULL)
        return NULL;
    for (int i = 0; i < STATEMENT_CACHE_SIZE; i++) {
        if (k->cache[i].sql == sql) {
            sqlite3_reset(k->cache[i].statement);
            sqlite3_clear_bindings(k->cache[i].statement);
            return k->cache[i].statement;
        }
        if (k->cache[i].sql == NULL) {
            sqlite3_stmt *st = NULL;
            if (sqlite3_prepare_v3(k->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) !=
                SQLITE_OK) {
                tg_log(TG_LOG_ERROR, "catalog: %s", sqlite3_errmsg(k->db));
                return NULL;
            }
            k->cache[i].sql = sql;
            k->cache[i].statement = st;
            return st;
        }
    }
    tg_log(TG_LOG_ERROR, "catalog: more than %d distinct statements on one connection",
           STATEMENT_CACHE_SIZE);
    return NULL;
}

static void copy_text(char *dst, size_t dst_len, sqlite3_stmt *st, int column)
{
    const unsigned char *text = sqlite3_column_text(st, column);
    snprintf(dst, dst_len, "%s", text ? (const char *)text : "");
}

static int64_t row_integer(const tg_cat_row *row, int column)
{
    return sqlite3_column_int64((sqlite3_stmt *)row->result, column);
}

static void row_text(const tg_cat_row *row, int column, char *dst, size_t len)
{
    copy_text(dst, len, (sqlite3_stmt *)row->result, column);
}

/* The current row of st, for the shared decoders (catalog_sql.h). */
static tg_cat_row sq_row(sqlite3_stmt *st)
{
    return (tg_cat_row){.integer = row_integer, .text = row_text, .result = st};
}

static void bind_text(sqlite3_stmt *st, int index, const char *text)
{
    if (text == NULL)
        sqlite3_bind_null(st, index);
    else
        sqlite3_bind_text(st, index, text, -1, SQLITE_TRANSIENT);
}

static int exec(conn *k, const char *sql)
{
    if (k == NULL)
        return SQLITE_ERROR;
    char *message = NULL;
    int rc = sqlite3_exec(k->db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK) {
        tg_log(TG_LOG_ERROR, "catalog: %s", message ? message : sqlite3_errstr(rc));
        sqlite3_free(message);
    }
    return rc;
}

/* status, or TG_CAT_FULL when it is a failure and k's last call failed for a
 * full disk: SQLite answers SQLITE_FULL when a write finds no room (ENOSPC); an
 * fsync or a truncate that does gives SQLITE_IOERR_* with the errno kept. */
static tg_cat_status full_or(conn *k, tg_cat_status status)
{
    if (status != TG_CAT_ERROR || k == NULL)
        return status;
    int code = sqlite3_errcode(k->db);
    int sys = sqlite3_system_errno(k->db);
    if (code == SQLITE_FULL || (code == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT)))
        return TG_CAT_FULL;
    return status;
}

static void finalize_statements(conn *k)
{
    for (int i = 0; i < STATEMENT_CACHE_SIZE; i++) {
        sqlite3_finalize(k->cache[i].statement);
        k->cache[i].statement = NULL;
        k->cache[i].sql = NULL;
    }
}

/* The writer, for one call that writes; write_end gives it back. */
static conn *write_begin(tg_catalog *catalog)
{
    sqlite_catalog *c = sq(catalog);
    pthread_mutex_lock(&c->write_lock);
    return &c->writer;
}

/* Gives the writer back; the call's status, TG_CAT_FULL for a full disk. */
static tg_cat_status write_end(tg_catalog *catalog, conn *k, tg_cat_status status)
{
    sqlite_catalog *c = sq(catalog);
    status = full_or(k, status);
    pthread_mutex_unlock(&c->write_lock);
    return status;
}

/* Ends the transaction the call opened on k: COMMIT when status is OK (a commit that
 * fails is the call's failure), else ROLLBACK. The status, TG_CAT_FULL for a full disk. */
static tg_cat_status commit_or_rollback(conn *k, tg_cat_status status)
{
    status = full_or(k, status);
    if (status == TG_CAT_OK && exec(k, "COMMIT") != SQLITE_OK)
        status = full_or(k, TG_CAT_ERROR);
    if (status != TG_CAT_OK)
        exec(k, "ROLLBACK");
    return status;
}

static void reader_close(conn *k)
{
    finalize_statements(k);
    sqlite3_close(k->db);
    free(k);
}

/* A new reader of the catalog file, or NULL (logged). */
static conn *reader_open(const sqlite_catalog *c)
{
    conn *k = calloc(1, sizeof *k);
    if (k == NULL) {
        tg_log(TG_LOG_ERROR, "catalog: out of memory for a read connection");
        return NULL;
    }
    /* NOMUTEX: a reader is used by one thread at a time (checked out). */
    int rc = sqlite3_open_v2(c->path, &k->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(k->db, BUSY_TIMEOUT_MS);
        rc = exec(k, "PRAGMA query_only=ON");
    }
    if (rc != SQLITE_OK) {
        tg_log(TG_LOG_ERROR, "catalog: cannot open a read connection to %s: %s", c->path,
               k->db ? sqlite3_errmsg(k->db) : sqlite3_errstr(rc));
        sqlite3_close(k->db);
        free(k);
        return NULL;
    }
    return k;
}

/* A reader for one call that only reads: an idle one, or a new one. NULL when
 * none can be opened (logged); the call then fails (statement and exec answer
 * errors for a NULL connection). read_end gives it back. */
static conn *read_begin(tg_catalog *catalog)
{
    sqlite_catalog *c = sq(catalog);
    pthread_mutex_lock(&c->pool_lock);
    conn *k = c->idle;
    if (k != NULL) {
        c->idle = k->next_idle;
        c->idle_count--;
    }
    c->readers += k == NULL; /* counted before it opens: close sees it in flight */
    pthread_mutex_unlock(&c->pool_lock);
    if (k != NULL)
        return k;
    k = reader_open(c);
    if (k == NULL) {
        pthread_mutex_lock(&c->pool_lock);
        c->readers--;
        pthread_mutex_unlock(&c->pool_lock);
    }
    return k;
}

/* True when no statement of k is running: every call resets its statements
 * before it gives the connection back, so the read transaction has ended. */
static bool reader_is_quiet(conn *k)
{
    for (sqlite3_stmt *st = sqlite3_next_stmt(k->db, NULL); st; st = sqlite3_next_stmt(k->db, st))
        if (sqlite3_stmt_busy(st))
            return false;
    return sqlite3_get_autocommit(k->db) != 0;
}

/* Gives the reader back; the call's status, TG_CAT_FULL for a full disk. */
static tg_cat_status read_end(tg_catalog *catalog, conn *k, tg_cat_status status)
{
    if (k == NULL)
        return status;
    sqlite_catalog *c = sq(catalog);
    status = full_or(k, status);
    /* A reader left inside a read transaction would keep serving its old snapshot
     * to the next call: every call ends its statements. */
    assert(reader_is_quiet(k));
    pthread_mutex_lock(&c->pool_lock);
    bool keep = c->idle_count < IDLE_READERS_MAX;
    if (keep) {
        k->next_idle = c->idle;
        c->idle = k;
        c->idle_count++;
    } else {
        c->readers--;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (!keep)
        reader_close(k);
    return status;
}

/* PRAGMA foreign_key_check finds no row: every foreign key has its parent. */
static bool foreign_keys_hold(conn *k)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(k->db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool hold = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return hold;
}

/* The migration driver's view of the writer (catalog_sql.h). */
typedef struct sq_migrator {
    conn *k;
    bool foreign_keys_off;
} sq_migrator;

static int sq_migration_version(void *ctx, int *version, char *err, size_t err_len)
{
    conn *k = ((sq_migrator *)ctx)->k;
    if (exec(k, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)") != SQLITE_OK) {
        snprintf(err, err_len, "cannot create schema_migrations: %s", sqlite3_errmsg(k->db));
        return -1;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(k->db, TG_CAT_SQL_SCHEMA_VERSION, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        snprintf(err, err_len, "cannot read schema_migrations: %s", sqlite3_errmsg(k->db));
        sqlite3_finalize(st);
        return -1;
    }
    *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int sq_migration_apply(void *ctx, int number, char *err, size_t err_len)
{
    sq_migrator *m = ctx;
    conn *k = m->k;
    /* A migration may rebuild a table (new, copy, drop, rename: SQLite cannot change a
     * key in place), and with foreign keys on the DROP would cascade into every row
     * that references it. So they are off while migrations run (the pragma cannot
     * change inside a transaction) and each migration checks them before its commit. */
    if (!m->foreign_keys_off) {
        if (exec(k, "PRAGMA foreign_keys=OFF") != SQLITE_OK) {
            snprintf(err, err_len, "cannot configure the catalog: %s", sqlite3_errmsg(k->db));
            return -1;
        }
        m->foreign_keys_off = true;
    }
    char now[TG_TIME_LEN];
    tg_time_now(now);
    char record[128];
    snprintf(record, sizeof record,
             "INSERT INTO schema_migrations(version, applied_at) VALUES (%d, '%s')", number, now);
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto fail;
    if (exec(k, tg_catalog_migration_sql(number)) != SQLITE_OK || exec(k, record) != SQLITE_OK) {
        exec(k, "ROLLBACK");
        goto fail;
    }
    if (!foreign_keys_hold(k)) {
        exec(k, "ROLLBACK");
        snprintf(err, err_len,
                 "migration %d failed: it leaves rows whose foreign key has no parent", number);
        return -1;
    }
    if (exec(k, "COMMIT") == SQLITE_OK)
        return 0;
fail:
    snprintf(err, err_len, "migration %d failed: %s", number, sqlite3_errmsg(k->db));
    return -1;
}

/* Brings the catalog to the newest schema on the writer (at open, before any reader). */
static tg_cat_status apply_migrations(sqlite_catalog *c, char *err, size_t err_len)
{
    sq_migrator m = {.k = &c->writer};
    tg_cat_migrator migrator = {&m, sq_migration_version, sq_migration_apply};
    tg_cat_status status = tg_cat_migrate(&migrator, MIGRATION_COUNT, err, err_len);
    if (m.foreign_keys_off && exec(m.k, "PRAGMA foreign_keys=ON") != SQLITE_OK &&
        status == TG_CAT_OK) {
        snprintf(err, err_len, "cannot configure the catalog: %s", sqlite3_errmsg(m.k->db));
        status = TG_CAT_ERROR;
    }
    if (status == TG_CAT_OK)
        c->schema_version = MIGRATION_COUNT;
    return status;
}

static void sq_close(tg_catalog *catalog)
{
    sqlite_catalog *c = sq(catalog);
    /* Readers first: the writer's close, the last, checkpoints the WAL into the file. */
    while (c->idle != NULL) {
        conn *k = c->idle;
        c->idle = k->next_idle;
        c->idle_count--;
        c->readers--;
        reader_close(k);
    }
    if (c->readers != 0)
        tg_log(TG_LOG_ERROR, "catalog: closed with %u read calls in flight", c->readers);
    finalize_statements(&c->writer);
    sqlite3_close(c->writer.db);
    pthread_mutex_destroy(&c->pool_lock);
    pthread_mutex_destroy(&c->write_lock);
    free(c->path);
    free(c);
}

/* The journal mode the writer reports (lowercase), for the WAL check at open. */
static bool journal_is_wal(conn *k)
{
    sqlite3_stmt *st = NULL;
    bool wal = false;
    if (sqlite3_prepare_v2(k->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *mode = sqlite3_column_text(st, 0);
        wal = mode != NULL && strcmp((const char *)mode, "wal") == 0;
    }
    sqlite3_finalize(st);
    return wal;
}

tg_cat_status tg_catalog_sqlite_open(const char *path, tg_catalog **out, char *err, size_t err_len)
{
    *out = NULL;
    if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
        snprintf(err, err_len,
                 "the SQLite catalog needs a file path (\"%s\" is not one: its read connections "
                 "open the same file)",
                 path);
        return TG_CAT_ERROR;
    }
    sqlite_catalog *c = calloc(1, sizeof *c);
    if (c == NULL || (c->path = strdup(path)) == NULL) {
        free(c);
        snprintf(err, err_len, "out of memory");
        return TG_CAT_ERROR;
    }
    c->base.ops = &sqlite_ops;
    if (pthread_mutex_init(&c->write_lock, NULL) != 0) {
        free(c->path);
        free(c);
        snprintf(err, err_len, "cannot create the catalog's lock");
        return TG_CAT_ERROR;
    }
    if (pthread_mutex_init(&c->pool_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->write_lock);
        free(c->path);
        free(c);
        snprintf(err, err_len, "cannot create the catalog's lock");
        return TG_CAT_ERROR;
    }
    /* NOMUTEX: write_lock serialises every use of the writer. */
    int rc =
        sqlite3_open_v2(path, &c->writer.db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, err_len, "cannot open the catalog %s: %s", path,
                 c->writer.db ? sqlite3_errmsg(c->writer.db) : sqlite3_errstr(rc));
        sq_close(&c->base);
        return TG_CAT_ERROR;
    }
    sqlite3_busy_timeout(c->writer.db, BUSY_TIMEOUT_MS);
    /* WAL: readers never block the writer nor wait for it (the read pool depends on
     * it); synchronous=FULL: a committed row survives power loss. */
    if (!journal_is_wal(&c->writer)) {
        snprintf(err, err_len, "cannot put the catalog %s in WAL mode: %s", path,
                 sqlite3_errmsg(c->writer.db));
        sq_close(&c->base);
        return TG_CAT_ERROR;
    }
    if (exec(&c->writer, "PRAGMA synchronous=FULL") != SQLITE_OK ||
        exec(&c->writer, "PRAGMA foreign_keys=ON") != SQLITE_OK) {
        snprintf(err, err_len, "cannot configure the catalog %s: %s", path,
                 sqlite3_errmsg(c->writer.db));
        sq_close(&c->base);
        return TG_CAT_ERROR;
    }
    if (apply_migrations(c, err, err_len) != TG_CAT_OK) {
        sq_close(&c->base);
        return TG_CAT_ERROR;
    }
    /* One reader now, parked in the pool: a catalog that cannot be read from a second
     * connection is refused at open rather than at the first request. */
    conn *k = read_begin(&c->base);
    if (k == NULL) {
        snprintf(err, err_len, "cannot open a read connection to the catalog %s", path);
        sq_close(&c->base);
        return TG_CAT_ERROR;
    }
    (void)read_end(&c->base, k, TG_CAT_OK);
    *out = &c->base;
    return TG_CAT_OK;
}

static tg_cat_status sq_ping(tg_catalog *catalog)
{
    static const char sql[] = TG_CAT_SQL_PING;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = (st && sqlite3_step(st) == SQLITE_ROW) ? TG_CAT_OK : TG_CAT_ERROR;
    if (st)
        sqlite3_reset(st);
    return read_end(catalog, k, status);
}

/* ---- models ---- */

static tg_cat_status sq_model_create(tg_catalog *catalog, const char *org, const char *name,
                                     const char *description, tg_model *out)
{
    static const char sql[] =
        "INSERT INTO models(org, name, description, created_at) VALUES (?, ?, ?, ?)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        bind_text(st, 2, name);
        bind_text(st, 3, description ? description : "");
        bind_text(st, 4, now);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            memset(out, 0, sizeof *out);
            out->id = sqlite3_last_insert_rowid(k->db);
            snprintf(out->org, sizeof out->org, "%s", org);
            snprintf(out->name, sizeof out->name, "%s", name);
            snprintf(out->description, sizeof out->description, "%s",
                     description ? description : "");
            memcpy(out->created_at, now, sizeof now);
            status = TG_CAT_OK;
        } else if (sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_UNIQUE) {
            status = TG_CAT_EXISTS;
        }
        sqlite3_reset(st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_model_get(tg_catalog *catalog, const char *org, const char *name,
                                  tg_model *out)
{
    static const char sql[] = TG_CAT_SQL_MODEL_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        bind_text(st, 2, name);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            tg_cat_read_model(sq_row(st), out);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_model_list(tg_catalog *catalog, const char *org, const char *query,
                                   const char *after_org, const char *after_name, unsigned limit,
                                   void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    static const char sql[] = "SELECT " TG_CAT_MODEL_COLUMNS " FROM models"
                              " WHERE (?1 IS NULL OR (org, name) > (?1, ?2))"
                              "   AND (?3 IS NULL OR instr(org || '/' || name, ?3) > 0)"
                              "   AND (?5 IS NULL OR org = ?5)"
                              " ORDER BY org, name LIMIT ?4";
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, after_org);
        bind_text(st, 2, after_name ? after_name : "");
        bind_text(st, 3, (query && query[0]) ? query : NULL);
        sqlite3_bind_int64(st, 4, limit);
        bind_text(st, 5, org);
        int rc = SQLITE_ERROR;
        tg_model *model = malloc(sizeof *model);
        while (model && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_model(sq_row(st), model);
            visit(ctx, model);
        }
        status = (model && rc == SQLITE_DONE) ? TG_CAT_OK : TG_CAT_ERROR;
        free(model);
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status run_write(conn *k, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_DONE)
        status = sqlite3_changes(k->db) > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
    else if (sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_UNIQUE ||
             sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
        status = TG_CAT_EXISTS;
    sqlite3_reset(st);
    return status;
}

static tg_cat_status sq_model_delete(tg_catalog *catalog, int64_t model_id)
{
    static const char sql[] = TG_CAT_SQL_MODEL_DELETE;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

/* ---- registry metadata (schema 15) ---- */

static tg_cat_status sq_tag_list(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                 void (*visit)(void *ctx, const char *key, const char *value),
                                 void *ctx)
{
    static const char model_sql[] = TG_CAT_SQL_MODEL_TAG_LIST;
    static const char version_sql[] = TG_CAT_SQL_VERSION_TAG_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, version_id > 0 ? version_sql : model_sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, version_id > 0 ? version_id : model_id);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const unsigned char *key = sqlite3_column_text(st, 0);
            const unsigned char *value = sqlite3_column_text(st, 1);
            visit(ctx, key ? (const char *)key : "", value ? (const char *)value : "");
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_version_description(tg_catalog *catalog, int64_t version_id,
                                            char out[TG_DESCRIPTION_MAX + 1])
{
    static const char sql[] = TG_CAT_SQL_VERSION_DESCRIPTION;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    out[0] = '\0';
    if (st) {
        sqlite3_bind_int64(st, 1, version_id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            copy_text(out, TG_DESCRIPTION_MAX + 1, st, 0);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* Runs st (bound) for its effect; true when it is done. */
static bool meta_step(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE;
}

/* The single integer st answers (bound), or -1 when it fails; 0 for no row. */
static int64_t step_integer(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : rc == SQLITE_DONE ? 0 : -1;
    sqlite3_reset(st);
    return value;
}

static tg_cat_status sq_meta_update(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                    const char *description, const tg_tag_change *changes,
                                    size_t count, unsigned max_tags, const char **why)
{
    static const char model_exists_sql[] = TG_CAT_SQL_MODEL_EXISTS;
    static const char version_of_sql[] = TG_CAT_SQL_VERSION_OF_MODEL;
    static const char model_describe_sql[] = TG_CAT_SQL_MODEL_DESCRIBE;
    static const char version_describe_sql[] = TG_CAT_SQL_VERSION_DESCRIBE;
    static const char model_set_sql[] = TG_CAT_SQL_MODEL_TAG_SET;
    static const char version_set_sql[] = TG_CAT_SQL_VERSION_TAG_SET;
    static const char model_delete_sql[] = TG_CAT_SQL_MODEL_TAG_DELETE;
    static const char version_delete_sql[] = TG_CAT_SQL_VERSION_TAG_DELETE;
    static const char model_count_sql[] = TG_CAT_SQL_MODEL_TAG_COUNT;
    static const char version_count_sql[] = TG_CAT_SQL_VERSION_TAG_COUNT;
    bool of_version = version_id > 0;
    int64_t object = of_version ? version_id : model_id;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (k == NULL || exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        return write_end(catalog, k, status);
    sqlite3_stmt *st = statement(k, of_version ? version_of_sql : model_exists_sql);
    if (st == NULL)
        goto done;
    sqlite3_bind_int64(st, 1, object);
    if (of_version)
        sqlite3_bind_int64(st, 2, model_id);
    int64_t found = step_integer(st);
    if (found < 0)
        goto done;
    if (found == 0) {
        status = TG_CAT_NOT_FOUND;
        *why = of_version ? "version_not_found" : "model_not_found";
        goto done;
    }
    if (description != NULL) {
        st = statement(k, of_version ? version_describe_sql : model_describe_sql);
        if (st == NULL)
            goto done;
        bind_text(st, 1, description);
        sqlite3_bind_int64(st, 2, object);
        if (!meta_step(st))
            goto done;
    }
    for (size_t i = 0; i < count; i++) {
        bool set = changes[i].value != NULL;
        st = statement(k, set ? (of_version ? version_set_sql : model_set_sql)
                              : (of_version ? version_delete_sql : model_delete_sql));
        if (st == NULL)
            goto done;
        sqlite3_bind_int64(st, 1, object);
        bind_text(st, 2, changes[i].key);
        if (set)
            bind_text(st, 3, changes[i].value);
        if (!meta_step(st))
            goto done;
    }
    st = statement(k, of_version ? version_count_sql : model_count_sql);
    if (st == NULL)
        goto done;
    sqlite3_bind_int64(st, 1, object);
    int64_t tags = step_integer(st);
    if (tags < 0)
        goto done;
    if (tags > (int64_t)max_tags) {
        status = TG_CAT_CONFLICT;
        *why = "too_many_tags";
        goto done;
    }
    status = TG_CAT_OK;
done:
    status = commit_or_rollback(k, status);
    return write_end(catalog, k, status);
}

static tg_cat_status sq_version_hub_tags_set(tg_catalog *catalog, int64_t version_id,
                                             const char *const *tags, size_t count)
{
    static const char drop_sql[] = TG_CAT_SQL_HUB_TAGS_DROP;
    static const char add_sql[] = TG_CAT_SQL_HUB_TAG_ADD;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (k == NULL || exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        return write_end(catalog, k, status);
    sqlite3_stmt *st = statement(k, drop_sql);
    if (st == NULL)
        goto done;
    sqlite3_bind_int64(st, 1, version_id);
    if (!meta_step(st))
        goto done;
    for (size_t i = 0; i < count; i++) {
        st = statement(k, add_sql);
        if (st == NULL)
            goto done;
        sqlite3_bind_int64(st, 1, version_id);
        bind_text(st, 2, tags[i]);
        if (!meta_step(st))
            goto done;
    }
    status = TG_CAT_OK;
done:
    status = commit_or_rollback(k, status);
    return write_end(catalog, k, status);
}

static tg_cat_status sq_hub_tag_list(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const char *tag), void *ctx)
{
    static const char sql[] = TG_CAT_SQL_HUB_TAG_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const unsigned char *tag = sqlite3_column_text(st, 0);
            visit(ctx, tag ? (const char *)tag : "");
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_downloads_add(tg_catalog *catalog, const int64_t *model_ids,
                                      const uint64_t *counts, size_t n)
{
    static const char sql[] = TG_CAT_SQL_DOWNLOADS_ADD;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (k == NULL || exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        return write_end(catalog, k, status);
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *st = statement(k, sql);
        if (st == NULL)
            goto done;
        sqlite3_bind_int64(st, 1, counts[i] > INT64_MAX ? INT64_MAX : (int64_t)counts[i]);
        sqlite3_bind_int64(st, 2, model_ids[i]);
        if (!meta_step(st))
            goto done;
    }
    status = TG_CAT_OK;
done:
    status = commit_or_rollback(k, status);
    return write_end(catalog, k, status);
}

static tg_cat_status sq_model_search(tg_catalog *catalog, const tg_model_search *search,
                                     void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    char sql[8192];
    const char *binds[TG_CAT_SEARCH_BINDS];
    int bind_count = 0;
    if (!tg_cat_sql_model_search(search, false, sql, sizeof sql, binds, &bind_count))
        return TG_CAT_ERROR;
    conn *k = read_begin(catalog);
    if (k == NULL)
        return read_end(catalog, k, TG_CAT_ERROR);
    /* the text varies with the search: prepared for this call, not cached */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(k->db, sql, -1, &st, NULL) != SQLITE_OK) {
        tg_log(TG_LOG_ERROR, "catalog: %s", sqlite3_errmsg(k->db));
        return read_end(catalog, k, TG_CAT_ERROR);
    }
    for (int i = 0; i < bind_count; i++)
        bind_text(st, i + 1, binds[i]);
    int rc = SQLITE_ERROR;
    tg_model *model = malloc(sizeof *model);
    while (model && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        tg_cat_read_model(sq_row(st), model);
        visit(ctx, model);
    }
    tg_cat_status status = (model && rc == SQLITE_DONE) ? TG_CAT_OK : TG_CAT_ERROR;
    free(model);
    sqlite3_finalize(st);
    return read_end(catalog, k, status);
}

/* ---- versions ---- */

/* Runs a prepared single-row version query; caller holds k. */
static tg_cat_status one_version(sqlite3_stmt *st, tg_version *out)
{
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_ROW) {
        tg_cat_read_version(sq_row(st), out);
        status = TG_CAT_OK;
    } else if (rc == SQLITE_DONE) {
        status = TG_CAT_NOT_FOUND;
    }
    sqlite3_reset(st);
    return status;
}

static tg_cat_status sq_version_create(tg_catalog *catalog, int64_t model_id, tg_version *out)
{
    static const char insert_sql[] =
        "INSERT INTO versions(model_id, number, state, created_at)"
        " SELECT ?1, coalesce(max(number), 0) + 1, 'draft', ?2 FROM versions WHERE model_id = ?1";
    static const char select_sql[] = "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE id = ?";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    sqlite3_stmt *st = statement(k, insert_sql);
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        bind_text(st, 2, now);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_DONE) {
            int64_t id = sqlite3_last_insert_rowid(k->db);
            sqlite3_stmt *sel = statement(k, select_sql);
            if (sel) {
                sqlite3_bind_int64(sel, 1, id);
                status = one_version(sel, out);
            }
        } else if (sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_FOREIGNKEY) {
            status = TG_CAT_NOT_FOUND;
        }
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_version_get(tg_catalog *catalog, int64_t model_id, int64_t number,
                                    tg_version *out)
{
    static const char sql[] = TG_CAT_SQL_VERSION_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        sqlite3_bind_int64(st, 2, number);
        status = one_version(st, out);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_version_by_digest(tg_catalog *catalog, int64_t model_id, const char *digest,
                                          tg_version *out)
{
    static const char sql[] = TG_CAT_SQL_VERSION_BY_DIGEST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        bind_text(st, 2, digest);
        status = one_version(st, out);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_version_latest_published(tg_catalog *catalog, int64_t model_id,
                                                 tg_version *out)
{
    static const char sql[] = TG_CAT_SQL_VERSION_LATEST_PUBLISHED;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        status = one_version(st, out);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_version_list(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const tg_version *version), void *ctx)
{
    static const char sql[] = TG_CAT_SQL_VERSION_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        int rc;
        tg_version version;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_version(sq_row(st), &version);
            visit(ctx, &version);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_version_publish(tg_catalog *catalog, int64_t version_id, const char *digest,
                                        tg_version *out)
{
    static const char update_sql[] =
        "UPDATE versions SET state = 'published', published_at = ?, digest = ?"
        " WHERE id = ? AND state = 'draft'";
    static const char select_sql[] = "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE id = ?";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    sqlite3_stmt *st = statement(k, update_sql);
    if (st) {
        bind_text(st, 1, now);
        bind_text(st, 2, digest);
        sqlite3_bind_int64(st, 3, version_id);
        status = run_write(k, st);
        /* No row changed: the version was already published (or is gone). */
        if (status == TG_CAT_NOT_FOUND)
            status = TG_CAT_CONFLICT;
        if (status == TG_CAT_OK) {
            sqlite3_stmt *sel = statement(k, select_sql);
            status = TG_CAT_ERROR;
            if (sel) {
                sqlite3_bind_int64(sel, 1, version_id);
                status = one_version(sel, out);
            }
        }
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_version_publish_files(tg_catalog *catalog, int64_t version_id,
                                              const char *digest, const tg_file_record *files,
                                              size_t count, tg_version *out, const char **why)
{
    static const char state_sql[] = "SELECT state FROM versions WHERE id = ?";
    static const char files_sql[] =
        "SELECT path, kind, size, sha256, tensors, parameters, nan, inf, created_at"
        " FROM files WHERE version_id = ?";
    static const char update_sql[] =
        "UPDATE versions SET state = 'published', published_at = ?, digest = ?"
        " WHERE id = ? AND state = 'draft'";
    static const char select_sql[] = "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE id = ?";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    /* one write transaction: no file put or delete comes between the check and the change */
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    sqlite3_stmt *st = statement(k, state_sql);
    if (st == NULL)
        goto done;
    sqlite3_bind_int64(st, 1, version_id);
    int rc = sqlite3_step(st);
    bool draft = rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "draft") == 0;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto done;
    if (!draft) {
        status = TG_CAT_CONFLICT;
        *why = "version_published";
        goto done;
    }
    st = statement(k, files_sql);
    if (st == NULL)
        goto done;
    sqlite3_bind_int64(st, 1, version_id);
    tg_file_records stored = {0};
    tg_file_record file;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tg_cat_read_file(sq_row(st), &file);
        tg_file_records_collect(&stored, &file);
    }
    sqlite3_reset(st);
    bool same = rc == SQLITE_DONE && tg_catalog_files_match(files, count, &stored);
    bool failed = rc != SQLITE_DONE || stored.failed;
    free(stored.items);
    if (failed)
        goto done;
    if (!same) {
        status = TG_CAT_CONFLICT;
        *why = "version_changed";
        goto done;
    }
    st = statement(k, update_sql);
    if (st == NULL)
        goto done;
    bind_text(st, 1, now);
    bind_text(st, 2, digest);
    sqlite3_bind_int64(st, 3, version_id);
    status = run_write(k, st);
    if (status == TG_CAT_OK) {
        sqlite3_stmt *sel = statement(k, select_sql);
        status = TG_CAT_ERROR;
        if (sel) {
            sqlite3_bind_int64(sel, 1, version_id);
            status = one_version(sel, out);
        }
    } else if (status == TG_CAT_NOT_FOUND) {
        status = TG_CAT_ERROR;
    }
done:
    /* a full disk is told before the ROLLBACK clears SQLite's error (507, not 500) */
    status = commit_or_rollback(k, status);
out:
    return write_end(catalog, k, status);
}

/* ---- aliases ---- */

static tg_cat_status sq_code_files(tg_catalog *catalog, int64_t model_id, int64_t number,
                                   void (*visit)(void *ctx, int64_t number, const char *path,
                                                 const char *code_reason),
                                   void *ctx)
{
    static const char sql[] = TG_CAT_SQL_CODE_FILES;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        sqlite3_bind_int64(st, 2, number);
        int rc;
        char path[TG_PATH_MAX + 1], reason[32];
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            copy_text(path, sizeof path, st, 1);
            copy_text(reason, sizeof reason, st, 2);
            visit(ctx, sqlite3_column_int64(st, 0), path, reason);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* ---- namespace settings ---- */

static tg_cat_status sq_namespace_get(tg_catalog *catalog, const char *org,
                                      tg_namespace_settings *out)
{
    static const char sql[] = TG_CAT_SQL_NAMESPACE_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            out->allow_code = sqlite3_column_int64(st, 0) != 0;
            copy_text(out->updated_at, sizeof out->updated_at, st, 1);
            out->quota_bytes = sqlite3_column_int64(st, 2);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_namespace_set_code(tg_catalog *catalog, const char *org, bool allow_code,
                                           const char *now)
{
    static const char sql[] = TG_CAT_SQL_NAMESPACE_SET_CODE;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        sqlite3_bind_int64(st, 2, allow_code ? 1 : 0);
        bind_text(st, 3, now);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_alias_set(tg_catalog *catalog, int64_t model_id, const char *alias,
                                  int64_t number)
{
    static const char sql[] = TG_CAT_SQL_ALIAS_SET;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        bind_text(st, 2, alias);
        sqlite3_bind_int64(st, 3, number);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_delete_by_id_text(tg_catalog *catalog, const char *sql, int64_t id,
                                          const char *text)
{
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        if (text != NULL)
            bind_text(st, 2, text);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_alias_delete(tg_catalog *catalog, int64_t model_id, const char *alias)
{
    static const char sql[] = TG_CAT_SQL_ALIAS_DELETE;
    return sq_delete_by_id_text(catalog, sql, model_id, alias);
}

static tg_cat_status sq_version_delete_draft(tg_catalog *catalog, int64_t version_id)
{
    static const char sql[] = TG_CAT_SQL_VERSION_DELETE_DRAFT;
    return sq_delete_by_id_text(catalog, sql, version_id, NULL);
}

static tg_cat_status sq_alias_get(tg_catalog *catalog, int64_t model_id, const char *alias,
                                  int64_t *number)
{
    static const char sql[] = TG_CAT_SQL_ALIAS_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        bind_text(st, 2, alias);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *number = sqlite3_column_int64(st, 0);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_signing_set(tg_catalog *catalog, const char *org, const char *policy)
{
    static const char sql[] = TG_CAT_SQL_SIGNING_SET;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        bind_text(st, 2, policy);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_signing_get(tg_catalog *catalog, const char *org, char **policy)
{
    static const char sql[] = TG_CAT_SQL_SIGNING_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, org);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *text = sqlite3_column_text(st, 0);
            *policy = strdup(text ? (const char *)text : "{}");
            status = *policy ? TG_CAT_OK : TG_CAT_ERROR;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_alias_list(tg_catalog *catalog, int64_t model_id,
                                   void (*visit)(void *ctx, const char *alias, int64_t number),
                                   void *ctx)
{
    static const char sql[] = TG_CAT_SQL_ALIAS_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            visit(ctx, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1));
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* ---- files ---- */

/* Caller holds k: TG_CAT_OK when the version exists and is a draft. */
static tg_cat_status check_draft(conn *k, int64_t version_id)
{
    static const char sql[] = "SELECT state FROM versions WHERE id = ?";
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, version_id);
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_ROW)
        status = strcmp((const char *)sqlite3_column_text(st, 0), "draft") == 0 ? TG_CAT_OK
                                                                                : TG_CAT_CONFLICT;
    else if (rc == SQLITE_DONE)
        status = TG_CAT_NOT_FOUND;
    sqlite3_reset(st);
    return status;
}

/* Caller holds k inside a transaction: TG_CAT_OK when the token hash names a
 * token that still exists, has at least write scope and whose namespace (if any)
 * is org; else TG_CAT_NOT_FOUND with *why "token_revoked" or "forbidden". */
static tg_cat_status check_token_covers(conn *k, const char *hash, int64_t id, const char *org,
                                        const char **why)
{
    static const char by_hash[] = TG_CAT_SQL_TOKEN_SCOPE;
    static const char by_id[] = "SELECT scope, namespace FROM tokens WHERE id = ?";
    sqlite3_stmt *st = statement(k, hash != NULL ? by_hash : by_id);
    if (st == NULL)
        return TG_CAT_ERROR;
    if (hash != NULL)
        bind_text(st, 1, hash);
    else
        sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_DONE) {
        *why = "token_revoked";
        status = TG_CAT_NOT_FOUND;
    } else if (rc == SQLITE_ROW) {
        const char *scope = (const char *)sqlite3_column_text(st, 0);
        const char *ns = (const char *)sqlite3_column_text(st, 1);
        status = TG_CAT_OK;
        if (scope == NULL || strcmp(scope, "read") == 0 || (ns != NULL && strcmp(ns, org) != 0)) {
            *why = "forbidden";
            status = TG_CAT_NOT_FOUND;
        }
    }
    sqlite3_reset(st);
    return status;
}

/* Caller holds k inside a transaction: the guard's model still exists with
 * the same id, org and name, version_id is one of its versions and a draft, and
 * the guard's token still covers the model. */
static tg_cat_status check_guard(conn *k, const tg_commit_guard *guard, int64_t version_id,
                                 const char **why)
{
    static const char sql[] = "SELECT v.state FROM versions v JOIN models m ON m.id = v.model_id"
                              " WHERE v.id = ? AND m.id = ? AND m.org = ? AND m.name = ?";
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, version_id);
    sqlite3_bind_int64(st, 2, guard->model_id);
    bind_text(st, 3, guard->org);
    bind_text(st, 4, guard->name);
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_DONE) {
        *why = "version_not_found";
        status = TG_CAT_NOT_FOUND;
    } else if (rc == SQLITE_ROW) {
        status = strcmp((const char *)sqlite3_column_text(st, 0), "draft") == 0 ? TG_CAT_OK
                                                                                : TG_CAT_CONFLICT;
        if (status == TG_CAT_CONFLICT)
            *why = "version_published";
    }
    sqlite3_reset(st);
    if (status == TG_CAT_OK && guard->token_hash != NULL)
        status = check_token_covers(k, guard->token_hash, 0, guard->org, why);
    return status;
}

/* Caller holds k inside a transaction: the file row (sql: the INSERT of
 * sq_file_put_guarded). */
static tg_cat_status insert_file(conn *k, const char *sql, int64_t version_id,
                                 const tg_file_record *file, const char *tensor_stats,
                                 const char *now)
{
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, version_id);
    bind_text(st, 2, file->path);
    bind_text(st, 3, file->kind);
    sqlite3_bind_int64(st, 4, (int64_t)file->size);
    bind_text(st, 5, file->sha256);
    sqlite3_bind_int64(st, 6, (int64_t)file->tensors);
    sqlite3_bind_int64(st, 7, (int64_t)file->parameters);
    sqlite3_bind_int64(st, 8, (int64_t)file->nan);
    sqlite3_bind_int64(st, 9, (int64_t)file->inf);
    bind_text(st, 10, tensor_stats ? tensor_stats : "[]");
    bind_text(st, 11, now);
    bind_text(st, 12, file->source_url[0] != '\0' ? file->source_url : NULL);
    bind_text(st, 13, file->code_reason[0] != '\0' ? file->code_reason : NULL);
    return run_write(k, st);
}

static tg_cat_status sq_file_put_guarded(tg_catalog *catalog, const tg_commit_guard *guard,
                                         int64_t version_id, const tg_file_record *file,
                                         const char *tensor_stats, const char **why)
{
    const char *why_local = NULL;
    if (why == NULL)
        why = &why_local;
    *why = NULL;
    static const char sql[] =
        "INSERT OR REPLACE INTO files(version_id, path, kind, size, sha256, tensors, parameters,"
        " nan, inf, tensor_stats, created_at, source_url, code_reason)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    /* The draft check and the insert are one transaction: a publish cannot slip between. */
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    status = guard != NULL ? check_guard(k, guard, version_id, why) : check_draft(k, version_id);
    if (status == TG_CAT_OK)
        status = insert_file(k, sql, version_id, file, tensor_stats, now);
    if (exec(k, status == TG_CAT_OK ? "COMMIT" : "ROLLBACK") != SQLITE_OK && status == TG_CAT_OK) {
        exec(k, "ROLLBACK");
        status = TG_CAT_ERROR;
    }
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_guard_check(tg_catalog *catalog, const tg_commit_guard *guard,
                                    int64_t version_id, const char **why)
{
    static const char model_sql[] = "SELECT 1 FROM models WHERE id = ? AND org = ? AND name = ?";
    static const char version_sql[] = "SELECT 1 FROM versions WHERE id = ? AND model_id = ?";
    *why = NULL;
    conn *k = read_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    /* One read transaction: the three answers come from the same state. */
    if (exec(k, "BEGIN") != SQLITE_OK)
        goto out;
    sqlite3_stmt *st = statement(k, model_sql);
    if (st != NULL) {
        sqlite3_bind_int64(st, 1, guard->model_id);
        bind_text(st, 2, guard->org);
        bind_text(st, 3, guard->name);
        int rc = sqlite3_step(st);
        status = rc == SQLITE_ROW ? TG_CAT_OK : rc == SQLITE_DONE ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
        if (status == TG_CAT_NOT_FOUND)
            *why = "model_deleted";
        sqlite3_reset(st);
    }
    if (status == TG_CAT_OK && (st = statement(k, version_sql)) == NULL)
        status = TG_CAT_ERROR;
    if (status == TG_CAT_OK) {
        sqlite3_bind_int64(st, 1, version_id);
        sqlite3_bind_int64(st, 2, guard->model_id);
        int rc = sqlite3_step(st);
        status = rc == SQLITE_ROW ? TG_CAT_OK : rc == SQLITE_DONE ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
        if (status == TG_CAT_NOT_FOUND)
            *why = "version_deleted";
        sqlite3_reset(st);
    }
    if (status == TG_CAT_OK && guard->token_hash != NULL)
        status = check_token_covers(k, guard->token_hash, 0, guard->org, why);
    /* Read only: nothing to keep, so the transaction ends the same way whatever the answer. */
    if (exec(k, "ROLLBACK") != SQLITE_OK)
        status = TG_CAT_ERROR;
out:
    return read_end(catalog, k, status);
}

static tg_cat_status sq_file_get(tg_catalog *catalog, int64_t version_id, const char *path,
                                 tg_file_record *out)
{
    static const char sql[] = TG_CAT_SQL_FILE_GET;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, version_id);
        bind_text(st, 2, path);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            tg_cat_read_file(sq_row(st), out);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_file_stats(tg_catalog *catalog, int64_t version_id, const char *path,
                                   char **tensor_stats)
{
    static const char sql[] = TG_CAT_SQL_FILE_STATS;
    *tensor_stats = NULL;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, version_id);
        bind_text(st, 2, path);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *text = (const char *)sqlite3_column_text(st, 0);
            *tensor_stats = strdup(text ? text : "[]");
            status = *tensor_stats ? TG_CAT_OK : TG_CAT_ERROR;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_file_delete(tg_catalog *catalog, int64_t version_id, const char *path)
{
    static const char sql[] = TG_CAT_SQL_FILE_DELETE;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    status = check_draft(k, version_id);
    if (status == TG_CAT_OK) {
        sqlite3_stmt *st = statement(k, sql);
        status = TG_CAT_ERROR;
        if (st) {
            sqlite3_bind_int64(st, 1, version_id);
            bind_text(st, 2, path);
            status = run_write(k, st);
        }
    }
    exec(k, status == TG_CAT_OK ? "COMMIT" : "ROLLBACK");
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_file_list(tg_catalog *catalog, int64_t version_id, const char *after_path,
                                  unsigned limit,
                                  void (*visit)(void *ctx, const tg_file_record *file), void *ctx)
{
    static const char sql[] = "SELECT " TG_CAT_FILE_COLUMNS
                              " FROM files WHERE version_id = ?1 AND (?2 IS NULL OR path > ?2)"
                              " ORDER BY path LIMIT ?3";
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, version_id);
        bind_text(st, 2, after_path);
        sqlite3_bind_int64(st, 3, limit == 0 ? -1 : (int64_t)limit);
        int rc;
        tg_file_record file;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_file(sq_row(st), &file);
            visit(ctx, &file);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* ---- rejections ---- */

static void bind_id_or_null(sqlite3_stmt *st, int index, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(st, index, id);
    else
        sqlite3_bind_null(st, index);
}

static tg_cat_status sq_rejection_add(tg_catalog *catalog, const tg_rejection *rejection)
{
    static const char sql[] = TG_CAT_SQL_REJECTION_ADD;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, rejection->time);
        bind_text(st, 2, rejection->model[0] ? rejection->model : NULL);
        if (rejection->version >= 0)
            sqlite3_bind_int64(st, 3, rejection->version);
        else
            sqlite3_bind_null(st, 3);
        bind_text(st, 4, rejection->path[0] ? rejection->path : NULL);
        bind_text(st, 5, rejection->reason);
        bind_text(st, 6, rejection->format[0] ? rejection->format : NULL);
        bind_text(st, 7, rejection->detail);
        bind_text(st, 8, rejection->client[0] ? rejection->client : NULL);
        sqlite3_bind_int64(st, 9, (int64_t)rejection->size);
        bind_text(st, 10, rejection->findings[0] ? rejection->findings : NULL);
        bind_text(st, 11, rejection->sha256[0] ? rejection->sha256 : NULL);
        bind_text(st, 12, rejection->namespace_name[0] ? rejection->namespace_name : NULL);
        bind_id_or_null(st, 13, rejection->token_id);
        bind_text(st, 14, rejection->route[0] ? rejection->route : NULL);
        bind_id_or_null(st, 15, rejection->job_id);
        bind_text(st, 16, rejection->outcome[0] ? rejection->outcome : "refused");
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_rejection_list(tg_catalog *catalog, const tg_rejection_filter *filter,
                                       unsigned limit,
                                       void (*visit)(void *ctx, const tg_rejection *rejection),
                                       void *ctx)
{
    static const char sql[] = TG_CAT_SQL_REJECTION_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    tg_rejection *r = malloc(sizeof *r);
    if (st && r) {
        sqlite3_bind_int64(st, 1, filter->before_id);
        bind_text(st, 2, filter->reason);
        bind_text(st, 3, filter->namespace_name);
        bind_text(st, 4, filter->since);
        bind_text(st, 5, filter->until);
        bind_text(st, 6, filter->sha256);
        sqlite3_bind_int64(st, 7, limit);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_rejection(sq_row(st), r);
            visit(ctx, r);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
    }
    if (st)
        sqlite3_reset(st);
    free(r);
    return read_end(catalog, k, status);
}

/* ---- tokens ---- */

static tg_cat_status sq_token_add(tg_catalog *catalog, const char *hash, tg_scope scope,
                                  const char *namespace_or_null)
{
    static const char sql[] = TG_CAT_SQL_TOKEN_ADD;
    const char *scope_text = tg_cat_scope_name(scope);
    if (scope_text == NULL)
        return TG_CAT_ERROR;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, hash);
        bind_text(st, 2, scope_text);
        bind_text(st, 3, namespace_or_null);
        bind_text(st, 4, now);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_token_lookup(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                     char *namespace_out, size_t namespace_len)
{
    static const char sql[] = TG_CAT_SQL_TOKEN_SCOPE;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, hash);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *scope = tg_cat_scope_from_name((const char *)sqlite3_column_text(st, 0));
            copy_text(namespace_out, namespace_len, st, 1);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_token_each(tg_catalog *catalog,
                                   void (*visit)(void *ctx, const tg_token_info *token), void *ctx)
{
    static const char sql[] = TG_CAT_SQL_TOKEN_EACH;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_token_info token;
            memset(&token, 0, sizeof token);
            token.id = sqlite3_column_int64(st, 0);
            token.scope = tg_cat_scope_from_name((const char *)sqlite3_column_text(st, 1));
            copy_text(token.namespace_name, sizeof token.namespace_name, st, 2);
            copy_text(token.created_at, sizeof token.created_at, st, 3);
            visit(ctx, &token);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_token_revoke(tg_catalog *catalog, int64_t id)
{
    static const char sql[] = TG_CAT_SQL_TOKEN_REVOKE;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

/* ---- blobs ---- */

static tg_cat_status sq_blob_each(tg_catalog *catalog,
                                  int (*visit)(void *ctx, const char *sha256, uint64_t size),
                                  void *ctx)
{
    /* A running job's finished files count too: their blobs are in the store. */
    static const char sql[] = "SELECT sha256, size FROM files UNION"
                              " SELECT sha256, size FROM job_files ORDER BY sha256";
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (visit(ctx, (const char *)sqlite3_column_text(st, 0),
                      (uint64_t)sqlite3_column_int64(st, 1)) != 0) {
                rc = SQLITE_DONE;
                break;
            }
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_blob_referenced(tg_catalog *catalog, const char *sha256, bool *referenced)
{
    static const char sql[] = TG_CAT_SQL_BLOB_REFERENCED;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, sha256);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
            *referenced = rc == SQLITE_ROW;
            status = TG_CAT_OK;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_token_id(tg_catalog *catalog, const char *hash, int64_t *id)
{
    static const char sql[] = TG_CAT_SQL_TOKEN_ID;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, hash);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *id = sqlite3_column_int64(st, 0);
            status = TG_CAT_OK;
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_model_blobs(tg_catalog *catalog, int64_t model_id,
                                    void (*visit)(void *ctx, const char *sha256), void *ctx)
{
    static const char sql[] = TG_CAT_SQL_MODEL_BLOBS;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            visit(ctx, (const char *)sqlite3_column_text(st, 0));
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* ---- jobs ---- */

/* Runs one prepared write of a job transaction; caller holds k. */
static bool step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE;
}

/* Caller holds k. */
static tg_cat_status job_by_id(conn *k, int64_t job_id, tg_job *out)
{
    static const char sql[] = TG_CAT_SQL_JOB_GET;
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    tg_cat_status status = TG_CAT_ERROR;
    if (rc == SQLITE_ROW) {
        tg_cat_read_job(sq_row(st), out);
        status = TG_CAT_OK;
    } else if (rc == SQLITE_DONE) {
        status = TG_CAT_NOT_FOUND;
    }
    sqlite3_reset(st);
    return status;
}

/* The queued or running job (not being cancelled) that would make the same
 * version; caller holds k. TG_CAT_NOT_FOUND when there is none. */
static tg_cat_status same_job(conn *k, int64_t source_version_id, const char *dtype,
                              const char *tensors_json, tg_job *out)
{
    static const char sql[] =
        "SELECT id FROM jobs WHERE state IN ('queued', 'running') AND error_reason IS NULL"
        " AND kind = 'convert' AND source_version_id = ? AND dtype = ? AND tensors = ?"
        " ORDER BY id LIMIT 1";
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, source_version_id);
    bind_text(st, 2, dtype);
    bind_text(st, 3, tensors_json);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (rc == SQLITE_ROW)
        return job_by_id(k, id, out);
    return rc == SQLITE_DONE ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
}

static tg_cat_status sq_job_create_by(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                      int64_t source_version_id, const char *dtype,
                                      const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                      bool *existing)
{
    static const char sql[] =
        "INSERT INTO jobs(kind, state, model_id, source_version_id, dtype, tensors, bytes_total,"
        " created_at, token_id) VALUES ('convert', 'queued', ?, ?, ?, ?, ?, ?, ?)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    *existing = false;
    /* The writer's lock makes the look-up and the insert one step within the
     * process (one process serves a data dir): two equal requests queue one job. */
    conn *k = write_begin(catalog);
    tg_cat_status status = same_job(k, source_version_id, dtype, tensors_json, out);
    if (status != TG_CAT_NOT_FOUND) {
        *existing = status == TG_CAT_OK;
        return write_end(catalog, k, status);
    }
    sqlite3_stmt *st = statement(k, sql);
    status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        sqlite3_bind_int64(st, 2, source_version_id);
        bind_text(st, 3, dtype);
        bind_text(st, 4, tensors_json);
        sqlite3_bind_int64(st, 5, (int64_t)bytes_total);
        bind_text(st, 6, now);
        if (token_id > 0)
            sqlite3_bind_int64(st, 7, token_id);
        else
            sqlite3_bind_null(st, 7);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_DONE)
            status = job_by_id(k, sqlite3_last_insert_rowid(k->db), out);
        else if (sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
            status = TG_CAT_NOT_FOUND;
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_get(tg_catalog *catalog, int64_t job_id, tg_job *out)
{
    conn *k = read_begin(catalog);
    tg_cat_status status = job_by_id(k, job_id, out);
    return read_end(catalog, k, status);
}

static tg_cat_status sq_job_counts(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES])
{
    static const char sql[] = TG_CAT_SQL_JOB_COUNTS;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            tg_cat_read_job_count(sq_row(st), counts);
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_job_list(tg_catalog *catalog, const tg_job_filter *filter,
                                 int64_t before_id, unsigned limit,
                                 void (*visit)(void *ctx, const tg_job *job), void *ctx)
{
    static const char sql[] = "SELECT " TG_CAT_JOB_COLUMNS TG_CAT_JOB_FROM
                              " WHERE (?1 IS NULL OR j.state = ?1) AND (?2 IS NULL OR m.org = ?2)"
                              " AND (?3 IS NULL OR m.name = ?3) AND (?4 <= 0 OR j.id < ?4)"
                              " ORDER BY j.id DESC LIMIT ?5";
    tg_job *job = malloc(sizeof *job);
    if (job == NULL)
        return TG_CAT_ERROR;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        bind_text(st, 1, filter->has_state ? tg_job_state_name(filter->state) : NULL);
        bind_text(st, 2, filter->org);
        bind_text(st, 3, filter->org ? filter->name : NULL);
        sqlite3_bind_int64(st, 4, before_id);
        sqlite3_bind_int64(st, 5, limit);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_job(sq_row(st), job);
            visit(ctx, job);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    status = read_end(catalog, k, status);
    free(job);
    return status;
}

static tg_cat_status finish_transaction(conn *k, tg_cat_status status);

/* The clock of job leases: Unix milliseconds (one process uses an SQLite catalog,
 * so its clock is the only one). */
#define SQ_NOW "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

/* The jobs of j's namespace (org) running under this handle's live leases (?5):
 * the fair pick's count (tg_catalog_job_claim_fair). */
#define SQ_NAMESPACE_BUSY                                                                          \
    "(SELECT count(*) FROM jobs r JOIN models rm ON rm.id = r.model_id WHERE rm.org = m.org"       \
    " AND r.state = 'running' AND r.lease_owner = ?5 AND coalesce(r.lease_expires, 0) >= " SQ_NOW  \
    ")"

static tg_cat_status sq_job_claim(tg_catalog *catalog, unsigned namespace_limit, tg_job *out)
{
    /* running jobs whose lease expired and that will not run again fail */
    static const char expire_sql[] =
        "UPDATE jobs SET state = 'failed', finished_at = ?1, lease_owner = NULL,"
        " error_reason = CASE WHEN error_reason = 'cancelled' THEN error_reason"
        "   ELSE 'interrupted' END,"
        " error_detail = CASE WHEN error_reason = 'cancelled' THEN error_detail"
        "   ELSE 'the server stopped during the job ' || attempts || ' times; given up' END"
        " WHERE state = 'running' AND coalesce(lease_expires, 0) < " SQ_NOW
        " AND (error_reason = 'cancelled' OR attempts >= ?2)";
    static const char drop_sql[] =
        "DELETE FROM job_files WHERE job_id IN (SELECT id FROM jobs WHERE state = 'failed')";
    /* the oldest job of the namespace running the fewest here, under the limit (?6) */
    static const char pick_sql[] =
        "SELECT j.id FROM jobs j JOIN models m ON m.id = j.model_id"
        " WHERE (j.state = 'queued' OR (j.state = 'running' AND j.error_reason IS NULL"
        " AND coalesce(j.lease_expires, 0) < " SQ_NOW "))"
        " AND (?6 = 0 OR " SQ_NAMESPACE_BUSY " < ?6)"
        " ORDER BY " SQ_NAMESPACE_BUSY ", j.id LIMIT 1";
    static const char claim_sql[] = "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
                                    " started_at = coalesce(started_at, ?1), lease_owner = ?2,"
                                    " lease_expires = " SQ_NOW " + ?3 WHERE id = ?4";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    /* one transaction (SQLite's single writer): the pick and the claim are one step */
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    sqlite3_stmt *st = statement(k, expire_sql);
    if (st == NULL)
        goto rollback;
    bind_text(st, 1, now);
    sqlite3_bind_int64(st, 2, catalog->job_max_attempts);
    if (!step_done(st))
        goto rollback;
    if (sqlite3_changes(k->db) > 0) {
        st = statement(k, drop_sql);
        if (st == NULL || !step_done(st))
            goto rollback;
    }
    sqlite3_stmt *pick = statement(k, pick_sql);
    if (pick == NULL)
        goto rollback;
    bind_text(pick, 5, catalog->lease_owner);
    sqlite3_bind_int64(pick, 6, namespace_limit);
    int rc = sqlite3_step(pick);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(pick, 0) : 0;
    sqlite3_reset(pick);
    if (rc == SQLITE_DONE) {
        status = exec(k, "COMMIT") == SQLITE_OK ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
        if (status == TG_CAT_ERROR)
            goto rollback;
        goto out;
    }
    if (rc != SQLITE_ROW)
        goto rollback;
    sqlite3_stmt *claim = statement(k, claim_sql);
    if (claim == NULL)
        goto rollback;
    bind_text(claim, 1, now);
    bind_text(claim, 2, catalog->lease_owner);
    sqlite3_bind_int64(claim, 3, (int64_t)catalog->job_lease_seconds * 1000);
    sqlite3_bind_int64(claim, 4, id);
    status = run_write(k, claim);
    if (status == TG_CAT_OK)
        status = job_by_id(k, id, out);
    status = finish_transaction(k, status);
    goto out;
rollback:
    exec(k, "ROLLBACK");
    status = TG_CAT_ERROR;
out:
    return write_end(catalog, k, status);
}

/* Gives up this handle's lease of a running job (tg_catalog_job_release). */
static tg_cat_status sq_job_release(tg_catalog *catalog, int64_t job_id)
{
    static const char sql[] = TG_CAT_SQL_JOB_RELEASE;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, job_id);
        bind_text(st, 2, catalog->lease_owner);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

/* Extends this handle's lease of a running job (tg_catalog_job_renew). */
static tg_cat_status sq_job_renew(tg_catalog *catalog, int64_t job_id)
{
    static const char sql[] =
        "UPDATE jobs SET lease_expires = " SQ_NOW " + ?3 WHERE id = ?1 AND state = 'running'"
        " AND lease_owner = ?2 RETURNING coalesce(error_reason, '')";
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, job_id);
        bind_text(st, 2, catalog->lease_owner);
        sqlite3_bind_int64(st, 3, (int64_t)catalog->job_lease_seconds * 1000);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *reason = sqlite3_column_text(st, 0);
            status = reason != NULL && strcmp((const char *)reason, "cancelled") == 0
                         ? TG_CAT_CONFLICT
                         : TG_CAT_OK;
            rc = sqlite3_step(st);
        } else if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
        }
        if (rc != SQLITE_DONE)
            status = TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_recover(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                    unsigned *failed)
{
    /* a cancel asked before the stop is kept: such a job fails, never resumes */
    static const char cancelled_sql[] =
        "UPDATE jobs SET state = 'failed', finished_at = ? WHERE state = 'running'"
        " AND error_reason = 'cancelled'";
    static const char fail_sql[] =
        "UPDATE jobs SET state = 'failed', finished_at = ?, error_reason = 'interrupted',"
        " error_detail = 'the server stopped during the job ' || attempts || ' times; given up'"
        " WHERE state = 'running' AND attempts >= ?";
    static const char drop_sql[] =
        "DELETE FROM job_files WHERE job_id IN (SELECT id FROM jobs WHERE state = 'failed')";
    static const char requeue_sql[] =
        "UPDATE jobs SET state = 'queued', lease_owner = NULL WHERE state = 'running'";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    *requeued = *failed = 0;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    sqlite3_stmt *st = statement(k, cancelled_sql);
    if (st == NULL)
        goto rollback;
    bind_text(st, 1, now);
    if (!step_done(st))
        goto rollback;
    *failed = (unsigned)sqlite3_changes(k->db);
    st = statement(k, fail_sql);
    if (st == NULL)
        goto rollback;
    bind_text(st, 1, now);
    sqlite3_bind_int64(st, 2, max_attempts);
    if (!step_done(st))
        goto rollback;
    *failed += (unsigned)sqlite3_changes(k->db);
    st = statement(k, drop_sql);
    if (st == NULL || sqlite3_step(st) != SQLITE_DONE) {
        if (st)
            sqlite3_reset(st);
        goto rollback;
    }
    sqlite3_reset(st);
    st = statement(k, requeue_sql);
    if (st == NULL || sqlite3_step(st) != SQLITE_DONE) {
        if (st)
            sqlite3_reset(st);
        goto rollback;
    }
    sqlite3_reset(st);
    *requeued = (unsigned)sqlite3_changes(k->db);
    if (exec(k, "COMMIT") == SQLITE_OK) {
        status = TG_CAT_OK;
        goto out;
    }
rollback:
    exec(k, "ROLLBACK");
    *requeued = *failed = 0;
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_progress(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                     uint64_t bytes_total)
{
    /* only the lease holder (or a job no one holds) */
    static const char sql[] = TG_CAT_SQL_JOB_PROGRESS;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, (int64_t)bytes_done);
        sqlite3_bind_int64(st, 2, (int64_t)bytes_total);
        sqlite3_bind_int64(st, 3, job_id);
        bind_text(st, 4, catalog->lease_owner);
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

/* queued or running -> failed, and its job_files rows go; detail NULL keeps the
 * stored one (a cancel's). Caller holds k inside a transaction. */
static tg_cat_status fail_job(conn *k, int64_t job_id, const char *reason, const char *detail)
{
    static const char fail_sql[] = TG_CAT_SQL_JOB_FAIL;
    static const char drop_sql[] = TG_CAT_SQL_JOB_FILES_DROP;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    sqlite3_stmt *st = statement(k, fail_sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    bind_text(st, 1, now);
    bind_text(st, 2, reason);
    bind_text(st, 3, detail);
    sqlite3_bind_int64(st, 4, job_id);
    tg_cat_status status = run_write(k, st);
    if (status != TG_CAT_OK)
        return status;
    st = statement(k, drop_sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, job_id);
    return step_done(st) ? TG_CAT_OK : TG_CAT_ERROR;
}

/* Ends the transaction: COMMIT when status is OK, else ROLLBACK. Caller holds k. */
static tg_cat_status finish_transaction(conn *k, tg_cat_status status)
{
    if (status == TG_CAT_OK && exec(k, "COMMIT") == SQLITE_OK)
        return TG_CAT_OK;
    /* a full disk is told before the ROLLBACK clears SQLite's error */
    status = full_or(k, status == TG_CAT_OK ? TG_CAT_ERROR : status);
    exec(k, "ROLLBACK");
    return status;
}

/* Caller holds k: TG_CAT_OK unless the job is running under another handle's
 * lease (TG_CAT_NOT_FOUND then; a job gone is NOT_FOUND too). */
static tg_cat_status check_holder(conn *k, tg_catalog *catalog, int64_t job_id)
{
    static const char sql[] = "SELECT 1 FROM jobs WHERE id = ? AND (state <> 'running'"
                              " OR lease_owner IS NULL OR lease_owner = ?)";
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, job_id);
    bind_text(st, 2, catalog->lease_owner);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? TG_CAT_OK : rc == SQLITE_DONE ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
}

static tg_cat_status sq_job_fail(tg_catalog *catalog, int64_t job_id, const char *reason,
                                 const char *detail)
{
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") == SQLITE_OK) {
        /* a running job is failed only by its lease holder */
        status = check_holder(k, catalog, job_id);
        if (status == TG_CAT_OK)
            status = fail_job(k, job_id, reason, detail);
        status = finish_transaction(k, status);
    }
    return write_end(catalog, k, status);
}

/* Marks a running job for the worker to stop; caller holds k. */
static tg_cat_status mark_cancelled(conn *k, int64_t job_id)
{
    static const char sql[] = TG_CAT_SQL_JOB_CANCEL_RUNNING;
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    sqlite3_bind_int64(st, 1, job_id);
    return run_write(k, st);
}

static tg_cat_status sq_job_cancel(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                   tg_job *out)
{
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    /* read and change in one transaction: the worker's claim cannot come between */
    status = job_by_id(k, job_id, out);
    if (status == TG_CAT_OK) {
        *was = out->state;
        if (out->state == TG_JOB_QUEUED)
            status = fail_job(k, job_id, "cancelled", "cancelled before it started");
        else if (out->state == TG_JOB_RUNNING && !out->cancel_requested)
            status = mark_cancelled(k, job_id);
    }
    if (status == TG_CAT_OK)
        status = job_by_id(k, job_id, out);
    status = finish_transaction(k, status);
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_file_put(tg_catalog *catalog, int64_t job_id,
                                     const tg_file_record *file, const char *tensor_stats)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO job_files(job_id, path, kind, size, sha256, tensors, parameters,"
        " nan, inf, tensor_stats) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10"
        " FROM jobs WHERE id = ?1 AND state = 'running' AND error_reason IS NULL"
        " AND (lease_owner IS NULL OR lease_owner = ?11)";
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, job_id);
        bind_text(st, 2, file->path);
        bind_text(st, 3, file->kind);
        sqlite3_bind_int64(st, 4, (int64_t)file->size);
        bind_text(st, 5, file->sha256);
        sqlite3_bind_int64(st, 6, (int64_t)file->tensors);
        sqlite3_bind_int64(st, 7, (int64_t)file->parameters);
        sqlite3_bind_int64(st, 8, (int64_t)file->nan);
        sqlite3_bind_int64(st, 9, (int64_t)file->inf);
        bind_text(st, 10, tensor_stats ? tensor_stats : "[]");
        bind_text(st, 11, catalog->lease_owner);
        /* no row inserted: the job is gone, no longer running, or being cancelled */
        status = run_write(k, st);
    }
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_file_list(tg_catalog *catalog, int64_t job_id,
                                      void (*visit)(void *ctx, const tg_file_record *file),
                                      void *ctx)
{
    static const char sql[] = TG_CAT_SQL_JOB_FILE_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, job_id);
        int rc;
        tg_file_record file;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_file(sq_row(st), &file);
            visit(ctx, &file);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

static tg_cat_status sq_job_commit(tg_catalog *catalog, int64_t job_id, const char *digest,
                                   tg_version *out)
{
    static const char version_sql[] =
        "INSERT INTO versions(model_id, number, state, created_at, published_at, digest,"
        " derived_from, derived_dtype)"
        " SELECT ?1, coalesce(max(number), 0) + 1, 'published', ?2, ?2, ?3, ?4, ?5"
        " FROM versions WHERE model_id = ?1";
    /* carried over: the source's files that the job did not replace (same blobs) */
    static const char carried_sql[] = TG_CAT_SQL_JOB_COMMIT_CARRIED;
    static const char made_sql[] = TG_CAT_SQL_JOB_COMMIT_MADE;
    static const char hub_tags_sql[] = TG_CAT_SQL_HUB_TAGS_COPY;
    static const char done_sql[] = TG_CAT_SQL_JOB_COMMIT_DONE;
    static const char drop_sql[] = TG_CAT_SQL_JOB_FILES_DROP;
    static const char select_sql[] = "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE id = ?";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    tg_job *job = malloc(sizeof *job);
    if (job == NULL)
        goto rollback;
    status = job_by_id(k, job_id, job);
    if (status == TG_CAT_OK && (job->state != TG_JOB_RUNNING || job->cancel_requested))
        status = TG_CAT_CONFLICT;
    /* only the lease holder commits: a job taken over after its lease expired is
     * the new holder's to finish, and its version is made once */
    if (status == TG_CAT_OK && check_holder(k, catalog, job_id) != TG_CAT_OK)
        status = TG_CAT_CONFLICT;
    if (status != TG_CAT_OK) {
        free(job);
        goto rollback;
    }
    /* the token that asked for the job must still exist and cover the model: a
     * revoked token's job fails here rather than publish under a dead grant */
    const char *why = NULL;
    if (job->token_id > 0) {
        status = check_token_covers(k, NULL, job->token_id, job->org, &why);
        if (status == TG_CAT_NOT_FOUND) {
            status =
                fail_job(k, job_id, why,
                         strcmp(why, "token_revoked") == 0
                             ? "the token that asked for the job was revoked before it finished"
                             : "the token that asked for the job no longer covers its model");
            free(job);
            if (status == TG_CAT_OK && exec(k, "COMMIT") == SQLITE_OK) {
                status = TG_CAT_CONFLICT;
                goto out;
            }
            status = TG_CAT_ERROR;
            goto rollback;
        }
        if (status != TG_CAT_OK) {
            free(job);
            goto rollback;
        }
    }
    status = TG_CAT_ERROR;
    sqlite3_stmt *st = statement(k, version_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, job->model_id);
    bind_text(st, 2, now);
    bind_text(st, 3, digest);
    sqlite3_bind_int64(st, 4, job->source_number);
    bind_text(st, 5, job->dtype);
    if (!step_done(st))
        goto rollback_job;
    int64_t version_id = sqlite3_last_insert_rowid(k->db);
    st = statement(k, carried_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, version_id);
    bind_text(st, 2, now);
    sqlite3_bind_int64(st, 3, job->source_version_id);
    sqlite3_bind_int64(st, 4, job_id);
    if (!step_done(st))
        goto rollback_job;
    st = statement(k, hub_tags_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, version_id);
    sqlite3_bind_int64(st, 2, job->source_version_id);
    if (!step_done(st))
        goto rollback_job;
    st = statement(k, made_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, version_id);
    bind_text(st, 2, now);
    sqlite3_bind_int64(st, 3, job_id);
    if (!step_done(st))
        goto rollback_job;
    st = statement(k, select_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, version_id);
    if (one_version(st, out) != TG_CAT_OK)
        goto rollback_job;
    st = statement(k, done_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, out->number);
    bind_text(st, 2, now);
    sqlite3_bind_int64(st, 3, job_id);
    if (!step_done(st))
        goto rollback_job;
    st = statement(k, drop_sql);
    if (st == NULL)
        goto rollback_job;
    sqlite3_bind_int64(st, 1, job_id);
    if (!step_done(st))
        goto rollback_job;
    free(job);
    if (exec(k, "COMMIT") == SQLITE_OK) {
        status = TG_CAT_OK;
        goto out;
    }
    goto rollback;
rollback_job:
    free(job);
rollback:
    exec(k, "ROLLBACK");
out:
    return write_end(catalog, k, status);
}

/* ---- imports (schema 6) ---- */

static tg_cat_status sq_import_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                          int64_t version_id, const char *path, const char *url,
                                          tg_job *out, bool *existing)
{
    static const char same_sql[] = TG_CAT_SQL_IMPORT_JOB_ACTIVE;
    static const char sql[] =
        "INSERT INTO jobs(kind, state, model_id, source_version_id, dtype, tensors, created_at,"
        " token_id, url, path) VALUES ('import', 'queued', ?, ?, '', '[]', ?, ?, ?, ?)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    *existing = false;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    sqlite3_stmt *st = statement(k, same_sql);
    if (st == NULL)
        goto out;
    sqlite3_bind_int64(st, 1, version_id);
    bind_text(st, 2, path);
    bind_text(st, 3, url);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (rc == SQLITE_ROW) {
        status = job_by_id(k, id, out);
        *existing = status == TG_CAT_OK;
        goto out;
    }
    if (rc != SQLITE_DONE || (st = statement(k, sql)) == NULL)
        goto out;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int64(st, 2, version_id);
    bind_text(st, 3, now);
    if (token_id > 0)
        sqlite3_bind_int64(st, 4, token_id);
    else
        sqlite3_bind_null(st, 4);
    bind_text(st, 5, url);
    bind_text(st, 6, path);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        status = job_by_id(k, sqlite3_last_insert_rowid(k->db), out);
    else if (sqlite3_extended_errcode(k->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
        status = TG_CAT_NOT_FOUND;
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_import_commit(tg_catalog *catalog, int64_t job_id,
                                      const tg_commit_guard *guard, int64_t version_id,
                                      const tg_file_record *file, const char *tensor_stats,
                                      const char **why)
{
    static const char job_sql[] = "SELECT state, error_reason, token_id, lease_owner FROM jobs"
                                  " WHERE id = ? AND kind = 'import'";
    static const char file_sql[] =
        "INSERT OR REPLACE INTO files(version_id, path, kind, size, sha256, tensors, parameters,"
        " nan, inf, tensor_stats, created_at, source_url, code_reason)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char done_sql[] =
        "UPDATE jobs SET state = 'done', finished_at = ?, bytes_done = ?, bytes_total = ?,"
        " result_version = (SELECT number FROM versions WHERE id = source_version_id)"
        " WHERE id = ?";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    *why = NULL;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    sqlite3_stmt *st = statement(k, job_sql);
    int64_t token_id = 0;
    if (st != NULL) {
        sqlite3_bind_int64(st, 1, job_id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            status = TG_CAT_NOT_FOUND;
            *why = "job_not_found";
        } else if (rc == SQLITE_ROW) {
            const char *state = (const char *)sqlite3_column_text(st, 0);
            status = TG_CAT_OK;
            if (state == NULL || strcmp(state, "running") != 0 ||
                sqlite3_column_type(st, 1) != SQLITE_NULL) {
                status = TG_CAT_CONFLICT;
                *why = "cancelled";
            } else if (sqlite3_column_type(st, 3) != SQLITE_NULL &&
                       strcmp((const char *)sqlite3_column_text(st, 3), catalog->lease_owner) !=
                           0) {
                status = TG_CAT_CONFLICT; /* another handle took it over */
                *why = "lease_lost";
            }
            token_id = sqlite3_column_int64(st, 2);
        }
        sqlite3_reset(st);
    }
    if (status == TG_CAT_OK)
        status = check_guard(k, guard, version_id, why);
    if (status == TG_CAT_OK && token_id > 0)
        status = check_token_covers(k, NULL, token_id, guard->org, why);
    if (status == TG_CAT_OK)
        status = insert_file(k, file_sql, version_id, file, tensor_stats, now);
    if (status == TG_CAT_OK) {
        status = TG_CAT_ERROR;
        if ((st = statement(k, done_sql)) != NULL) {
            bind_text(st, 1, now);
            sqlite3_bind_int64(st, 2, (int64_t)file->size);
            sqlite3_bind_int64(st, 3, (int64_t)file->size);
            sqlite3_bind_int64(st, 4, job_id);
            status = run_write(k, st);
        }
    }
    status = finish_transaction(k, status);
out:
    return write_end(catalog, k, status);
}

/* The ended import jobs whose url may hold credentials (tg_catalog_job_scrub_urls).
 * Rare calls, so their statements are prepared each time (not cached). */
#define ENDED_URLS                                                                                 \
    "kind IN ('import', 'mirror') AND state IN ('done', 'failed') AND url IS NOT NULL"             \
    " AND (instr(url, '@') > 0 OR instr(url, '#') > 0"                                             \
    " OR (instr(url, '?') > 0 AND substr(url, instr(url, '?')) <> '?REDACTED'))"

static tg_cat_status sq_job_ended_urls(tg_catalog *catalog, int64_t job_id, int64_t after_id,
                                       unsigned limit,
                                       void (*visit)(void *ctx, int64_t id, const char *url),
                                       void *ctx)
{
    static const char sql[] = "SELECT id, url FROM jobs WHERE (?1 = 0 OR id = ?1) AND id > ?2"
                              " AND " ENDED_URLS " ORDER BY id LIMIT ?3";
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = NULL;
    tg_cat_status status = TG_CAT_ERROR;
    if (sqlite3_prepare_v2(k->db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, job_id);
        sqlite3_bind_int64(st, 2, after_id);
        sqlite3_bind_int64(st, 3, limit);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const unsigned char *url = sqlite3_column_text(st, 1);
            visit(ctx, sqlite3_column_int64(st, 0), url ? (const char *)url : "");
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
    }
    sqlite3_finalize(st);
    return write_end(catalog, k, status);
}

static tg_cat_status sq_job_set_ended_url(tg_catalog *catalog, int64_t job_id, const char *url)
{
    static const char sql[] = TG_CAT_SQL_JOB_SET_ENDED_URL;
    conn *k = write_begin(catalog);
    sqlite3_stmt *st = NULL;
    tg_cat_status status = TG_CAT_ERROR;
    if (sqlite3_prepare_v2(k->db, sql, -1, &st, NULL) == SQLITE_OK) {
        bind_text(st, 1, url);
        sqlite3_bind_int64(st, 2, job_id);
        status = sqlite3_step(st) == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
    }
    sqlite3_finalize(st);
    return write_end(catalog, k, status);
}

/* ---- mirrors (schema 14): catalog_mirror.c's statements ---- */

static tg_cat_status
sq_mirror_exec(tg_catalog *catalog, bool write, const char *sql, int n, const char *const *params,
               void (*visit)(void *ctx, int columns, const char *const *values), void *ctx)
{
    conn *k = write ? write_begin(catalog) : read_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    sqlite3_stmt *st = statement(k, sql);
    if (st != NULL) {
        for (int i = 0; i < n; i++)
            bind_text(st, i + 1, params[i]);
        int columns = sqlite3_column_count(st);
        const char *values[16];
        if (columns > 16)
            columns = 16;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            for (int c = 0; c < columns; c++)
                values[c] = (const char *)sqlite3_column_text(st, c);
            if (visit != NULL)
                visit(ctx, columns, values);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        if (rc != SQLITE_DONE)
            tg_log(TG_LOG_ERROR, "catalog: %s", sqlite3_errmsg(k->db));
        sqlite3_reset(st);
    }
    return write ? write_end(catalog, k, status) : read_end(catalog, k, status);
}

/* ---- versions by commit id (issue 21: a query, not a walk of every version) ---- */

static tg_cat_status sq_version_by_commit(tg_catalog *catalog, int64_t model_id, const char *commit,
                                          tg_version *out)
{
    static const char sql[] = TG_CAT_SQL_VERSION_BY_COMMIT;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, model_id);
        bind_text(st, 2, commit);
        status = one_version(st, out);
    }
    return read_end(catalog, k, status);
}

/* ---- the audit log ---- */

/* Caller holds k inside a transaction: fills the token's id and namespace (hash NULL
 * or unknown: anonymous). */
static tg_cat_status audit_token(conn *k, const char *hash, tg_audit_record *r)
{
    r->token_id = 0;
    r->namespace_name[0] = '\0';
    if (hash == NULL)
        return TG_CAT_OK;
    static const char sql[] = TG_CAT_SQL_AUDIT_TOKEN;
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    bind_text(st, 1, hash);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r->token_id = sqlite3_column_int64(st, 0);
        copy_text(r->namespace_name, sizeof r->namespace_name, st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
}

/* Caller holds k inside a transaction: the chain's last seq and hash (0 and the
 * genesis hash when the log is empty). */
static tg_cat_status audit_last(conn *k, int64_t *seq, char hash[65])
{
    static const char sql[] = TG_CAT_SQL_AUDIT_LAST;
    sqlite3_stmt *st = statement(k, sql);
    if (st == NULL)
        return TG_CAT_ERROR;
    *seq = 0;
    snprintf(hash, 65, "%s", TG_AUDIT_GENESIS);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *seq = sqlite3_column_int64(st, 0);
        copy_text(hash, 65, st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
}

static tg_cat_status sq_audit_append(tg_catalog *catalog, const char *token_hash,
                                     tg_audit_record *r)
{
    static const char sql[] = TG_CAT_SQL_AUDIT_INSERT;
    conn *k = write_begin(catalog);
    tg_cat_status status = TG_CAT_ERROR;
    /* BEGIN IMMEDIATE: the write lock of the file from the read of the last row to
     * the insert (one process per file, and the writer is already serialised) */
    if (exec(k, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto out;
    int64_t last = 0;
    status = audit_token(k, token_hash, r);
    if (status == TG_CAT_OK)
        status = audit_last(k, &last, r->prev_hash);
    if (status == TG_CAT_OK) {
        r->seq = last + 1;
        tg_audit_time_now(r->time);
        status = tg_audit_hash(r, r->hash) == 0 ? TG_CAT_OK : TG_CAT_ERROR;
    }
    sqlite3_stmt *st = status == TG_CAT_OK ? statement(k, sql) : NULL;
    if (st != NULL) {
        sqlite3_bind_int64(st, 1, r->seq);
        bind_text(st, 2, r->time);
        if (r->token_id > 0)
            sqlite3_bind_int64(st, 3, r->token_id);
        else
            sqlite3_bind_null(st, 3);
        bind_text(st, 4, r->namespace_name);
        bind_text(st, 5, r->action);
        bind_text(st, 6, r->resource);
        sqlite3_bind_int64(st, 7, r->status);
        bind_text(st, 8, r->reason);
        bind_text(st, 9, r->request_id);
        bind_text(st, 10, r->client);
        bind_text(st, 11, r->user_agent);
        bind_text(st, 12, r->prev_hash);
        bind_text(st, 13, r->hash);
        status = run_write(k, st);
    } else {
        status = TG_CAT_ERROR;
    }
    status = finish_transaction(k, status);
out:
    return write_end(catalog, k, status);
}

static tg_cat_status sq_audit_list(tg_catalog *catalog, const tg_audit_filter *f, unsigned limit,
                                   void (*visit)(void *ctx, const tg_audit_record *record),
                                   void *ctx)
{
    static const char sql[] = TG_CAT_SQL_AUDIT_LIST;
    conn *k = read_begin(catalog);
    sqlite3_stmt *st = statement(k, sql);
    tg_cat_status status = TG_CAT_ERROR;
    if (st) {
        sqlite3_bind_int64(st, 1, f->after_seq);
        bind_text(st, 2, f->since);
        bind_text(st, 3, f->until);
        sqlite3_bind_int64(st, 4, f->token_id);
        bind_text(st, 5, f->namespace_name);
        bind_text(st, 6, f->action);
        bind_text(st, 7, f->resource_prefix);
        sqlite3_bind_int64(st, 8, f->status);
        sqlite3_bind_int64(st, 9, f->outcome);
        sqlite3_bind_int64(st, 10, limit);
        int rc;
        tg_audit_record r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            tg_cat_read_audit(sq_row(st), &r);
            visit(ctx, &r);
        }
        status = rc == SQLITE_DONE ? TG_CAT_OK : TG_CAT_ERROR;
        sqlite3_reset(st);
    }
    return read_end(catalog, k, status);
}

/* ---- generic steps (catalog_webhooks.c) ---- */

/* One step on k: prepared for this call only (the webhook statements are few and
 * rare, and stay out of the per-connection cache). */
static tg_cat_status run_step(conn *k, tg_cat_step *step)
{
    sqlite3_stmt *st = NULL;
    if (k == NULL || sqlite3_prepare_v2(k->db, step->sql, -1, &st, NULL) != SQLITE_OK) {
        if (k != NULL)
            tg_log(TG_LOG_ERROR, "catalog: %s", sqlite3_errmsg(k->db));
        return TG_CAT_ERROR;
    }
    for (int i = 0; i < step->n; i++)
        bind_text(st, i + 1, step->params[i]);
    bool returns = sqlite3_column_count(st) > 0;
    int rc;
    step->rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        step->rows++;
        if (step->row != NULL)
            step->row(step->ctx, sq_row(st));
    }
    tg_cat_status status = TG_CAT_OK;
    if (rc != SQLITE_DONE) {
        int code = sqlite3_extended_errcode(k->db);
        status = code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY
                     ? TG_CAT_EXISTS
                 : code == SQLITE_CONSTRAINT_FOREIGNKEY ? TG_CAT_NOT_FOUND
                                                        : TG_CAT_ERROR;
        if (status == TG_CAT_ERROR)
            tg_log(TG_LOG_ERROR, "catalog: %s", sqlite3_errmsg(k->db));
    } else if (!returns) {
        step->rows = sqlite3_changes(k->db);
    }
    sqlite3_finalize(st);
    if (status == TG_CAT_OK && step->required && step->rows == 0)
        status = TG_CAT_NOT_FOUND;
    return status;
}

static tg_cat_status sq_run_steps(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count)
{
    tg_cat_status status = TG_CAT_ERROR;
    if (!write) {
        conn *k = read_begin(catalog);
        status = TG_CAT_OK;
        for (size_t i = 0; i < count && status == TG_CAT_OK; i++)
            status = run_step(k, &steps[i]);
        if (k == NULL)
            status = TG_CAT_ERROR;
        return read_end(catalog, k, status);
    }
    conn *k = write_begin(catalog);
    if (exec(k, "BEGIN IMMEDIATE") == SQLITE_OK) {
        status = TG_CAT_OK;
        for (size_t i = 0; i < count && status == TG_CAT_OK; i++)
            status = run_step(k, &steps[i]);
        status = commit_or_rollback(k, status);
    }
    return write_end(catalog, k, status);
}

static const tg_catalog_ops sqlite_ops = {
    .audit_append = sq_audit_append,
    .audit_list = sq_audit_list,
    .name = "sqlite",
    .close = sq_close,
    .ping = sq_ping,
    .schema_version = sq_schema_version,
    .model_create = sq_model_create,
    .model_get = sq_model_get,
    .model_list = sq_model_list,
    .model_delete = sq_model_delete,
    .tag_list = sq_tag_list,
    .version_description = sq_version_description,
    .meta_update = sq_meta_update,
    .version_hub_tags_set = sq_version_hub_tags_set,
    .hub_tag_list = sq_hub_tag_list,
    .downloads_add = sq_downloads_add,
    .model_search = sq_model_search,
    .version_create = sq_version_create,
    .version_get = sq_version_get,
    .version_by_digest = sq_version_by_digest,
    .version_latest_published = sq_version_latest_published,
    .version_list = sq_version_list,
    .version_publish = sq_version_publish,
    .code_files = sq_code_files,
    .namespace_get = sq_namespace_get,
    .namespace_set_code = sq_namespace_set_code,
    .alias_set = sq_alias_set,
    .alias_delete = sq_alias_delete,
    .version_delete_draft = sq_version_delete_draft,
    .alias_get = sq_alias_get,
    .signing_set = sq_signing_set,
    .signing_get = sq_signing_get,
    .alias_list = sq_alias_list,
    .file_put_guarded = sq_file_put_guarded,
    .guard_check = sq_guard_check,
    .file_get = sq_file_get,
    .file_stats = sq_file_stats,
    .file_delete = sq_file_delete,
    .file_list = sq_file_list,
    .rejection_add = sq_rejection_add,
    .rejection_list = sq_rejection_list,
    .token_add = sq_token_add,
    .token_lookup = sq_token_lookup,
    .token_each = sq_token_each,
    .token_id = sq_token_id,
    .token_revoke = sq_token_revoke,
    .blob_each = sq_blob_each,
    .model_blobs = sq_model_blobs,
    .blob_referenced = sq_blob_referenced,
    .job_create_by = sq_job_create_by,
    .job_get = sq_job_get,
    .job_list = sq_job_list,
    .job_counts = sq_job_counts,
    .job_cancel = sq_job_cancel,
    .job_claim = sq_job_claim,
    .job_recover = sq_job_recover,
    .job_progress = sq_job_progress,
    .job_fail = sq_job_fail,
    .job_file_put = sq_job_file_put,
    .job_file_list = sq_job_file_list,
    .job_commit = sq_job_commit,
    .job_renew = sq_job_renew,
    .job_release = sq_job_release,
    .version_publish_files = sq_version_publish_files,
    .import_job_create = sq_import_job_create,
    .import_commit = sq_import_commit,
    .job_ended_urls = sq_job_ended_urls,
    .job_set_ended_url = sq_job_set_ended_url,
    .run_steps = sq_run_steps,
    /* versions by commit id */
    .version_by_commit = sq_version_by_commit,
    .mirror_exec = sq_mirror_exec,
};
