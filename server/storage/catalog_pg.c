/* The PostgreSQL catalog backend (catalog_backend.h; the API is catalog.h).
 *
 * Several server processes (replicas) share one PostgreSQL database: nothing a
 * call needs lives in this process, and every rule that must hold across
 * replicas is a transaction with row locks or a constraint, never a lock of this
 * process:
 *  - the version-number sequence: version_create and job_commit lock the model's
 *    row (FOR NO KEY UPDATE) before taking max(number) + 1, and (model_id,
 *    number) is unique;
 *  - publish: one UPDATE ... WHERE state = 'draft'; of two at once the second
 *    waits for the first and then finds no draft (TG_CAT_CONFLICT, the routes' 409);
 *  - a file put or delete locks its version row (FOR SHARE) for its draft check,
 *    so a publish cannot slip between the check and the write;
 *  - job claims take a queued job, or a running one whose lease expired, with
 *    FOR UPDATE SKIP LOCKED; progress, job files, the commit and a failure are
 *    accepted only from the lease holder (this handle's lease owner).
 *
 * Connections: a bounded pool (POOL_MAX) shared by the server's threads. A call
 * checks one out, runs its statements (parameterised, text format) and gives it
 * back before any visitor runs (visitors see rows copied out of the result), so no
 * connection is held while a visitor runs. A pooled connection that the server
 * closed (a restart: PostgreSQL tells each idle client) is noticed at checkout
 * and reset before use; a read whose connection broke is retried once on a fresh
 * one; a write is never sent twice. Every connection has connect_timeout, TCP
 * keepalives, tcp_user_timeout, statement_timeout and lock_timeout, so no call
 * waits forever on a dead server: it fails with TG_CAT_UNAVAILABLE (the HTTP
 * layer answers 503 catalog_unavailable).
 *
 * Migrations: migrations/postgresql/NNNN_*.sql (tg_migrations_pg), the same
 * numbers as the SQLite files, applied at open under a session advisory lock so
 * that replicas starting at once migrate once; a catalog newer than this binary
 * is refused. */
#include "catalog.h"
#include "catalog_backend.h"
#include "catalog_sql.h"
#include "embedded.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Connections per process: the server's threads, the job worker and its renewer
 * need at most one each at a time (a visitor runs with none held). With Debian's
 * default max_connections (100), four replicas fit. */
#define POOL_MAX 20
/* How long a call waits for a pooled connection before it fails. */
#define POOL_WAIT_SECONDS 10
/* The advisory lock key that serialises migrations across replicas ("tgcatalo"). */
#define MIGRATION_LOCK_KEY "8387236014254206063"
/* Rows per page of blob_each (its memory stays bounded on a large catalog). */
#define BLOB_PAGE 1000

typedef struct pconn {
    PGconn *db;
    struct pconn *next;
} pconn;

typedef struct pg_catalog {
    tg_catalog base; /* first: a tg_catalog * points here */
    char *conninfo;
    pthread_mutex_t lock; /* guards the pool fields below */
    pthread_cond_t freed;
    pconn *idle;
    unsigned open; /* connections open, idle or checked out */
    int schema_version;
} pg_catalog;

static const tg_catalog_ops pg_ops;

static pg_catalog *pg(tg_catalog *catalog)
{
    assert(catalog->ops == &pg_ops);
    return (pg_catalog *)catalog;
}

/* ---- connections ---- */

/* True at most once a second (per process): while the server is down every
 * request fails to connect, and one line a second says so without flooding the log. */
static bool log_unreachable_now(void)
{
    static int64_t last_second;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t second = (int64_t)ts.tv_sec;
    int64_t seen = __atomic_load_n(&last_second, __ATOMIC_RELAXED);
    return second != seen && __atomic_compare_exchange_n(&last_second, &seen, second, false,
                                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* libpq's notices (a FATAL a closing server sends an idle client) go to the log. */
static void log_notice(void *arg, const char *message)
{
    (void)arg;
    tg_log(TG_LOG_DEBUG, "catalog: PostgreSQL: %s", message);
}

/* A new connection, configured; NULL with err set when the server cannot be
 * reached (or refuses). */
static PGconn *connect_db(const char *conninfo, char *err, size_t err_len)
{
    /* Defaults first: the catalog URL's own settings (expanded at dbname) win. */
    const char *const keys[] = {"connect_timeout",     "keepalives",       "keepalives_idle",
                                "keepalives_interval", "keepalives_count", "tcp_user_timeout",
                                "application_name",    "dbname",           NULL};
    const char *const values[] = {"5", "1", "10", "3", "3", "15000", "tensorgate", conninfo, NULL};
    PGconn *db = PQconnectdbParams(keys, values, 1);
    if (db == NULL) {
        snprintf(err, err_len, "out of memory connecting to PostgreSQL");
        return NULL;
    }
    PQsetNoticeProcessor(db, log_notice, NULL);
    if (PQstatus(db) != CONNECTION_OK) {
        snprintf(err, err_len, "cannot connect to the PostgreSQL catalog: %s", PQerrorMessage(db));
        /* libpq's messages end with a newline */
        size_t len = strlen(err);
        while (len > 0 && (err[len - 1] == '\n' || err[len - 1] == ' '))
            err[--len] = '\0';
        PQfinish(db);
        return NULL;
    }
    /* A statement never runs, nor waits on a lock, without end; a transaction left
     * open by a vanished client does not hold its locks for long. */
    PGresult *r = PQexec(db, "SET statement_timeout = 30000; SET lock_timeout = 15000;"
                             " SET idle_in_transaction_session_timeout = 60000;"
                             " SET client_min_messages = warning");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, err_len, "cannot configure the PostgreSQL session: %s",
                 PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) {
        PQfinish(db);
        return NULL;
    }
    return db;
}

/* True when an idle connection has input waiting or is closed: the server ended
 * it (a restart or an administrator sends each idle client an error, then
 * closes). The catalog listens for nothing, so any input on an idle connection
 * means it is going away; it is reset before use. */
static bool idle_connection_broken(PGconn *db)
{
    if (PQstatus(db) != CONNECTION_OK)
        return true;
    int fd = PQsocket(db);
    if (fd < 0)
        return true;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

/* A connection for one call, or NULL (the catalog is unreachable, or every
 * connection stayed busy for POOL_WAIT_SECONDS: TG_CAT_UNAVAILABLE). */
static pconn *acquire(pg_catalog *c)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += POOL_WAIT_SECONDS;
    pthread_mutex_lock(&c->lock);
    while (c->idle == NULL && c->open >= POOL_MAX) {
        if (pthread_cond_timedwait(&c->freed, &c->lock, &until) == ETIMEDOUT)
            break;
    }
    pconn *k = c->idle;
    bool fresh = false;
    if (k != NULL) {
        c->idle = k->next;
    } else if (c->open < POOL_MAX) {
        c->open++; /* counted before it connects */
        fresh = true;
    }
    pthread_mutex_unlock(&c->lock);
    if (k == NULL && !fresh) {
        tg_log(TG_LOG_ERROR, "catalog: every PostgreSQL connection stayed busy for %d s",
               POOL_WAIT_SECONDS);
        return NULL;
    }
    if (k != NULL && idle_connection_broken(k->db)) {
        tg_log(TG_LOG_INFO, "catalog: a pooled PostgreSQL connection was closed; reconnecting");
        PQreset(k->db);
        if (PQstatus(k->db) != CONNECTION_OK) {
            if (log_unreachable_now())
                tg_log(TG_LOG_ERROR, "catalog: PostgreSQL connection lost: %s",
                       PQerrorMessage(k->db));
            PQfinish(k->db);
            free(k);
            pthread_mutex_lock(&c->lock);
            c->open--;
            pthread_cond_signal(&c->freed);
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        /* the session settings are gone with the old session */
        PGresult *r = PQexec(k->db, "SET statement_timeout = 30000; SET lock_timeout = 15000;"
                                    " SET idle_in_transaction_session_timeout = 60000");
        PQclear(r);
    }
    if (k != NULL)
        return k;
    char err[512];
    k = calloc(1, sizeof *k);
    if (k != NULL && (k->db = connect_db(c->conninfo, err, sizeof err)) == NULL) {
        if (log_unreachable_now())
            tg_log(TG_LOG_ERROR, "catalog: %s (further failures this second not logged)", err);
        free(k);
        k = NULL;
    }
    if (k == NULL) {
        pthread_mutex_lock(&c->lock);
        c->open--;
        pthread_cond_signal(&c->freed);
        pthread_mutex_unlock(&c->lock);
    }
    return k;
}

/* Gives k back: kept when healthy and outside any transaction, else closed. */
static void release(pg_catalog *c, pconn *k)
{
    if (k == NULL)
        return;
    bool keep = PQstatus(k->db) == CONNECTION_OK && PQtransactionStatus(k->db) == PQTRANS_IDLE;
    if (!keep) {
        PQfinish(k->db);
        free(k);
    }
    pthread_mutex_lock(&c->lock);
    if (keep) {
        k->next = c->idle;
        c->idle = k;
    } else {
        c->open--;
    }
    pthread_cond_signal(&c->freed);
    pthread_mutex_unlock(&c->lock);
}

/* ---- statements ---- */

/* The status a failed statement maps to: TG_CAT_FULL for a full disk (53100, as
 * SQLite's), TG_CAT_UNAVAILABLE when the catalog could not be reached (a
 * connection lost, the server shutting down or starting, a statement or lock
 * timeout, too many connections). */
static tg_cat_status failure_status(PGconn *db, const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state != NULL && strcmp(state, "23505") == 0)
        return TG_CAT_EXISTS;
    if (state != NULL && strcmp(state, "23503") == 0)
        return TG_CAT_NOT_FOUND;
    tg_log(TG_LOG_ERROR, "catalog: PostgreSQL: %s",
           r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(db));
    bool unreachable =
        PQstatus(db) != CONNECTION_OK || state == NULL || strncmp(state, "08", 2) == 0 ||
        strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0 ||
        strcmp(state, "57014") == 0 || strcmp(state, "53300") == 0 || strcmp(state, "55P03") == 0;
    if (state != NULL && strcmp(state, "53100") == 0)
        return TG_CAT_FULL;
    return unreachable ? TG_CAT_UNAVAILABLE : TG_CAT_ERROR;
}

/* Runs sql with n text parameters (NULL: SQL NULL) on k. The result (command or
 * rows), or NULL with *status set. */
static PGresult *exec_on(PGconn *db, const char *sql, int n, const char *const *params,
                         tg_cat_status *status)
{
    /* the shared statements (catalog_sql.h) come with "?" placeholders */
    char numbered[8192];
    if (!tg_cat_sql_numbered(sql, numbered, sizeof numbered)) {
        tg_log(TG_LOG_ERROR, "catalog: a statement is longer than %zu bytes", sizeof numbered);
        *status = TG_CAT_ERROR;
        return NULL;
    }
    PGresult *r = PQexecParams(db, numbered, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK))
        return r;
    *status = failure_status(db, r);
    PQclear(r);
    return NULL;
}

/* One statement in autocommit on a pooled connection. retry: the statement may be
 * sent again on a fresh connection when the first one broke (reads, and writes
 * whose repeat changes nothing). */
static PGresult *query(pg_catalog *c, bool retry, const char *sql, int n, const char *const *params,
                       tg_cat_status *status)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        *status = TG_CAT_UNAVAILABLE; /* no connection to be had */
        pconn *k = acquire(c);
        if (k == NULL)
            return NULL;
        PGresult *r = exec_on(k->db, sql, n, params, status);
        bool broken = PQstatus(k->db) != CONNECTION_OK;
        release(c, k);
        if (r != NULL || !broken || !retry)
            return r;
        tg_log(TG_LOG_WARN, "catalog: PostgreSQL connection broke; retrying once");
    }
    return NULL;
}

/* One transaction on one connection. */
typedef struct tx {
    pg_catalog *c;
    pconn *k;
    tg_cat_status status; /* the first failure's status */
} tx;

static bool tx_begin(pg_catalog *c, tx *t)
{
    t->c = c;
    for (int attempt = 0; attempt < 2; attempt++) {
        t->status = TG_CAT_UNAVAILABLE; /* no connection to be had */
        t->k = acquire(c);
        if (t->k == NULL)
            return false;
        PGresult *r = exec_on(t->k->db, "BEGIN", 0, NULL, &t->status);
        if (r != NULL) {
            PQclear(r);
            t->status = TG_CAT_ERROR;
            return true;
        }
        release(c, t->k); /* nothing was done yet: BEGIN may be sent again */
        t->k = NULL;
    }
    return false;
}

/* A statement of t; NULL (t->status set) when it fails. */
static PGresult *tx_q(tx *t, const char *sql, int n, const char *const *params)
{
    tg_cat_status status = TG_CAT_ERROR;
    PGresult *r = exec_on(t->k->db, sql, n, params, &status);
    if (r == NULL)
        t->status = status;
    return r;
}

/* Runs a statement of t for its effect: the number of rows it touched, or -1. */
static long tx_run(tx *t, const char *sql, int n, const char *const *params)
{
    PGresult *r = tx_q(t, sql, n, params);
    if (r == NULL)
        return -1;
    long rows =
        PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : strtol(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return rows;
}

/* Ends t: COMMIT when status is OK (an error then if the commit fails), else
 * ROLLBACK. Returns the call's status. */
static tg_cat_status tx_end(tx *t, tg_cat_status status)
{
    if (t->k == NULL)
        return status == TG_CAT_OK ? TG_CAT_ERROR : status;
    tg_cat_status ignored;
    PGresult *r = exec_on(t->k->db, status == TG_CAT_OK ? "COMMIT" : "ROLLBACK", 0, NULL,
                          status == TG_CAT_OK ? &status : &ignored);
    if (r != NULL && status == TG_CAT_OK && strcmp(PQcmdStatus(r), "COMMIT") != 0)
        status = TG_CAT_ERROR; /* an aborted transaction answers ROLLBACK to COMMIT */
    PQclear(r);
    if (r == NULL && status == TG_CAT_OK)
        status = TG_CAT_ERROR;
    release(t->c, t->k);
    t->k = NULL;
    return status;
}

/* ---- values ---- */

typedef struct num {
    char s[24];
} num;

static num n64(int64_t v)
{
    num out;
    snprintf(out.s, sizeof out.s, "%" PRId64, v);
    return out;
}

static int64_t get_i64(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return 0;
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void get_text(char *dst, size_t len, const PGresult *r, int row, int col)
{
    snprintf(dst, len, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

static int64_t row_integer(const tg_cat_row *row, int column)
{
    return get_i64(row->result, row->index, column);
}

static void row_text(const tg_cat_row *row, int column, char *dst, size_t len)
{
    get_text(dst, len, row->result, row->index, column);
}

/* Row i of r, for the shared decoders (catalog_sql.h). */
static tg_cat_row pg_row(const PGresult *r, int i)
{
    return (tg_cat_row){.integer = row_integer, .text = row_text, .result = r, .index = i};
}

/* The single row of r: TG_CAT_OK, TG_CAT_NOT_FOUND (none), or TG_CAT_ERROR (r NULL). */
static tg_cat_status one_row(const PGresult *r, tg_cat_status failed)
{
    if (r == NULL)
        return failed;
    return PQntuples(r) > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
}

/* ---- open, migrations, close ---- */

static int pg_schema_version(tg_catalog *catalog)
{
    return pg(catalog)->schema_version;
}

static void pg_close(tg_catalog *catalog)
{
    pg_catalog *c = pg(catalog);
    while (c->idle != NULL) {
        pconn *k = c->idle;
        c->idle = k->next;
        c->open--;
        PQfinish(k->db);
        free(k);
    }
    if (c->open != 0)
        tg_log(TG_LOG_ERROR, "catalog: closed with %u PostgreSQL calls in flight", c->open);
    pthread_cond_destroy(&c->freed);
    pthread_mutex_destroy(&c->lock);
    free(c->conninfo);
    free(c);
}

/* Runs one statement for its effect on db during open; false with err set. */
static bool open_exec(PGconn *db, const char *sql, int n, const char *const *params,
                      const char *what, char *err, size_t err_len)
{
    PGresult *r = n > 0 ? PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0) : PQexec(db, sql);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) {
        snprintf(err, err_len, "%s: %s", what,
                 r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(db));
        size_t len = strlen(err);
        while (len > 0 && (err[len - 1] == '\n' || err[len - 1] == ' '))
            err[--len] = '\0';
    }
    PQclear(r);
    return ok;
}

static int pg_migration_version(void *ctx, int *version, char *err, size_t err_len)
{
    PGconn *db = ctx;
    if (!open_exec(db,
                   "CREATE TABLE IF NOT EXISTS schema_migrations ("
                   "version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)",
                   0, NULL, "cannot create schema_migrations", err, err_len))
        return -1;
    PGresult *r = PQexec(db, TG_CAT_SQL_SCHEMA_VERSION);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        snprintf(err, err_len, "cannot read schema_migrations: %s", PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    *version = (int)get_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

static int pg_migration_apply(void *ctx, int number, char *err, size_t err_len)
{
    PGconn *db = ctx;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num v = n64(number);
    const char *record[] = {v.s, now};
    char what[64];
    snprintf(what, sizeof what, "migration %d failed", number);
    if (!open_exec(db, "BEGIN", 0, NULL, what, err, err_len))
        return -1;
    if (!open_exec(db, tg_migrations_pg[number - 1].sql, 0, NULL, what, err, err_len) ||
        !open_exec(db, "INSERT INTO schema_migrations(version, applied_at) VALUES ($1, $2)", 2,
                   record, what, err, err_len) ||
        !open_exec(db, "COMMIT", 0, NULL, what, err, err_len)) {
        PQclear(PQexec(db, "ROLLBACK"));
        return -1;
    }
    tg_log(TG_LOG_INFO, "catalog: PostgreSQL schema migrated to version %d", number);
    return 0;
}

/* Brings the database to the newest schema this binary knows, under the migration
 * advisory lock (a second replica waits, then finds nothing left to do). */
static tg_cat_status apply_migrations(pg_catalog *c, PGconn *db, char *err, size_t err_len)
{
    const char *lock_params[] = {MIGRATION_LOCK_KEY};
    if (!open_exec(db, "SELECT pg_advisory_lock($1::bigint)", 1, lock_params,
                   "cannot take the catalog's migration lock", err, err_len))
        return TG_CAT_ERROR;
    int known = (int)tg_migrations_pg_count;
    tg_cat_migrator migrator = {db, pg_migration_version, pg_migration_apply};
    tg_cat_status status = tg_cat_migrate(&migrator, known, err, err_len);
    if (status == TG_CAT_OK)
        c->schema_version = known;
    if (!open_exec(db, "SELECT pg_advisory_unlock($1::bigint)", 1, lock_params,
                   "cannot release the migration lock", err, err_len) &&
        status == TG_CAT_OK)
        status = TG_CAT_ERROR;
    return status;
}

tg_cat_status tg_catalog_pg_open(const char *conninfo, tg_catalog **out, char *err, size_t err_len)
{
    *out = NULL;
    if ((size_t)tg_migrations_pg_count != (size_t)tg_catalog_known_schema_version()) {
        snprintf(err, err_len,
                 "this tensorgate was built with %zu PostgreSQL migrations for %d SQLite ones",
                 tg_migrations_pg_count, tg_catalog_known_schema_version());
        return TG_CAT_ERROR;
    }
    pg_catalog *c = calloc(1, sizeof *c);
    if (c == NULL || (c->conninfo = strdup(conninfo)) == NULL) {
        free(c);
        snprintf(err, err_len, "out of memory");
        return TG_CAT_ERROR;
    }
    c->base.ops = &pg_ops;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->conninfo);
        free(c);
        snprintf(err, err_len, "cannot create the catalog's lock");
        return TG_CAT_ERROR;
    }
    if (pthread_cond_init(&c->freed, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c->conninfo);
        free(c);
        snprintf(err, err_len, "cannot create the catalog's condition");
        return TG_CAT_ERROR;
    }
    PGconn *db = connect_db(conninfo, err, err_len);
    if (db == NULL) {
        pg_close(&c->base);
        return TG_CAT_ERROR;
    }
    if (apply_migrations(c, db, err, err_len) != TG_CAT_OK) {
        PQfinish(db);
        pg_close(&c->base);
        return TG_CAT_ERROR;
    }
    /* the first pooled connection */
    pconn *k = calloc(1, sizeof *k);
    if (k == NULL) {
        PQfinish(db);
        pg_close(&c->base);
        snprintf(err, err_len, "out of memory");
        return TG_CAT_ERROR;
    }
    k->db = db;
    c->open = 1;
    c->idle = k;
    *out = &c->base;
    return TG_CAT_OK;
}

static tg_cat_status pg_ping(tg_catalog *catalog)
{
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_PING, 0, NULL, &status);
    status = one_row(r, status);
    PQclear(r);
    return status == TG_CAT_OK ? TG_CAT_OK : TG_CAT_ERROR;
}

/* ---- models ---- */

static tg_cat_status pg_model_create(tg_catalog *catalog, const char *org, const char *name,
                                     const char *description, tg_model *out)
{
    static const char sql[] = "INSERT INTO models(org, name, description, created_at)"
                              " VALUES ($1, $2, $3, $4) RETURNING " TG_CAT_MODEL_COLUMNS;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    const char *params[] = {org, name, description ? description : "", now};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), false, sql, 4, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK) {
        memset(out, 0, sizeof *out);
        tg_cat_read_model(pg_row(r, 0), out);
    } else if (status == TG_CAT_NOT_FOUND) {
        status = TG_CAT_ERROR;
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_model_get(tg_catalog *catalog, const char *org, const char *name,
                                  tg_model *out)
{
    static const char sql[] = TG_CAT_SQL_MODEL_GET;
    const char *params[] = {org, name};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 2, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        tg_cat_read_model(pg_row(r, 0), out);
    PQclear(r);
    return status;
}

static tg_cat_status pg_model_list(tg_catalog *catalog, const char *org, const char *query_text,
                                   const char *after_org, const char *after_name, unsigned limit,
                                   void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    static const char sql[] =
        "SELECT " TG_CAT_MODEL_COLUMNS " FROM models"
        " WHERE ($1::text IS NULL OR (org, name) > ($1::text, $2::text))"
        "   AND ($3::text IS NULL OR strpos(org || '/' || name, $3::text) > 0)"
        "   AND ($5::text IS NULL OR org = $5::text)"
        " ORDER BY org, name LIMIT $4::bigint";
    num lim = n64(limit);
    const char *params[] = {after_org, after_name ? after_name : "",
                            (query_text && query_text[0]) ? query_text : NULL, lim.s, org};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 5, params, &status);
    if (r == NULL)
        return status;
    tg_model *model = malloc(sizeof *model);
    for (int i = 0; model != NULL && i < PQntuples(r); i++) {
        tg_cat_read_model(pg_row(r, i), model);
        visit(ctx, model);
    }
    status = model != NULL ? TG_CAT_OK : TG_CAT_ERROR;
    free(model);
    PQclear(r);
    return status;
}

/* A write's status from its result: OK when it touched a row, else NOT_FOUND. */
static tg_cat_status touched(PGresult *r, tg_cat_status failed)
{
    if (r == NULL)
        return failed;
    long rows =
        PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : strtol(PQcmdTuples(r), NULL, 10);
    return rows > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
}

/* One statement that changes rows: OK when it touched at least one (touched()). */
static tg_cat_status write_touched(pg_catalog *c, bool retry, const char *sql, int n,
                                   const char *const *params)
{
    tg_cat_status status;
    PGresult *r = query(c, retry, sql, n, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_model_delete(tg_catalog *catalog, int64_t model_id)
{
    num id = n64(model_id);
    const char *params[] = {id.s};
    return write_touched(pg(catalog), false, TG_CAT_SQL_MODEL_DELETE, 1, params);
}

/* ---- registry metadata (schema 15) ---- */

static tg_cat_status pg_tag_list(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                 void (*visit)(void *ctx, const char *key, const char *value),
                                 void *ctx)
{
    num id = n64(version_id > 0 ? version_id : model_id);
    const char *params[] = {id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true,
                        version_id > 0 ? TG_CAT_SQL_VERSION_TAG_LIST : TG_CAT_SQL_MODEL_TAG_LIST, 1,
                        params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++)
        visit(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_version_description(tg_catalog *catalog, int64_t version_id,
                                            char out[TG_DESCRIPTION_MAX + 1])
{
    num id = n64(version_id);
    const char *params[] = {id.s};
    tg_cat_status status;
    out[0] = '\0';
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_VERSION_DESCRIPTION, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        get_text(out, TG_DESCRIPTION_MAX + 1, r, 0, 0);
    PQclear(r);
    return status;
}

static tg_cat_status pg_meta_update(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                    const char *description, const tg_tag_change *changes,
                                    size_t count, unsigned max_tags, const char **why)
{
    bool of_version = version_id > 0;
    num object = n64(of_version ? version_id : model_id), model = n64(model_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status = TG_CAT_ERROR;
    /* the row lock makes the count below hold against a concurrent update */
    const char *lock_params[] = {object.s, model.s};
    long rows =
        of_version
            ? tx_run(&t, "SELECT 1 FROM versions WHERE id = $1 AND model_id = $2 FOR NO KEY UPDATE",
                     2, lock_params)
            : tx_run(&t, "SELECT 1 FROM models WHERE id = $1 FOR NO KEY UPDATE", 1, lock_params);
    if (rows < 0)
        return tx_end(&t, t.status);
    if (rows == 0) {
        *why = of_version ? "version_not_found" : "model_not_found";
        return tx_end(&t, TG_CAT_NOT_FOUND);
    }
    if (description != NULL) {
        const char *params[] = {description, object.s};
        if (tx_run(&t, of_version ? TG_CAT_SQL_VERSION_DESCRIBE : TG_CAT_SQL_MODEL_DESCRIBE, 2,
                   params) < 0)
            return tx_end(&t, t.status);
    }
    for (size_t i = 0; i < count; i++) {
        const char *params[] = {object.s, changes[i].key, changes[i].value};
        long done =
            changes[i].value != NULL
                ? tx_run(&t, of_version ? TG_CAT_SQL_VERSION_TAG_SET : TG_CAT_SQL_MODEL_TAG_SET, 3,
                         params)
                : tx_run(&t,
                         of_version ? TG_CAT_SQL_VERSION_TAG_DELETE : TG_CAT_SQL_MODEL_TAG_DELETE,
                         2, params);
        if (done < 0)
            return tx_end(&t, t.status);
    }
    const char *count_params[] = {object.s};
    PGresult *r = tx_q(&t, of_version ? TG_CAT_SQL_VERSION_TAG_COUNT : TG_CAT_SQL_MODEL_TAG_COUNT,
                       1, count_params);
    status = one_row(r, t.status);
    if (status == TG_CAT_OK && get_i64(r, 0, 0) > (int64_t)max_tags) {
        status = TG_CAT_CONFLICT;
        *why = "too_many_tags";
    } else if (status == TG_CAT_NOT_FOUND) {
        status = TG_CAT_ERROR;
    }
    PQclear(r);
    return tx_end(&t, status);
}

static tg_cat_status pg_version_hub_tags_set(tg_catalog *catalog, int64_t version_id,
                                             const char *const *tags, size_t count)
{
    num id = n64(version_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    const char *params[] = {id.s, NULL};
    if (tx_run(&t, TG_CAT_SQL_HUB_TAGS_DROP, 1, params) < 0)
        return tx_end(&t, t.status);
    for (size_t i = 0; i < count; i++) {
        params[1] = tags[i];
        if (tx_run(&t, TG_CAT_SQL_HUB_TAG_ADD, 2, params) < 0)
            return tx_end(&t, t.status == TG_CAT_NOT_FOUND ? TG_CAT_NOT_FOUND : t.status);
    }
    return tx_end(&t, TG_CAT_OK);
}

static tg_cat_status pg_hub_tag_list(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const char *tag), void *ctx)
{
    num id = n64(model_id);
    const char *params[] = {id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_HUB_TAG_LIST, 1, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++)
        visit(ctx, PQgetvalue(r, i, 0));
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_downloads_add(tg_catalog *catalog, const int64_t *model_ids,
                                      const uint64_t *counts, size_t n)
{
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    for (size_t i = 0; i < n; i++) {
        num count = n64(counts[i] > INT64_MAX ? INT64_MAX : (int64_t)counts[i]);
        num id = n64(model_ids[i]);
        const char *params[] = {count.s, id.s};
        if (tx_run(&t, TG_CAT_SQL_DOWNLOADS_ADD, 2, params) < 0)
            return tx_end(&t, t.status);
    }
    return tx_end(&t, TG_CAT_OK);
}

static tg_cat_status pg_model_search(tg_catalog *catalog, const tg_model_search *search,
                                     void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    char sql[8192];
    const char *binds[TG_CAT_SEARCH_BINDS];
    int bind_count = 0;
    if (!tg_cat_sql_model_search(search, true, sql, sizeof sql, binds, &bind_count))
        return TG_CAT_ERROR;
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, bind_count, binds, &status);
    if (r == NULL)
        return status;
    tg_model *model = malloc(sizeof *model);
    for (int i = 0; model != NULL && i < PQntuples(r); i++) {
        tg_cat_read_model(pg_row(r, i), model);
        visit(ctx, model);
    }
    status = model != NULL ? TG_CAT_OK : TG_CAT_ERROR;
    free(model);
    PQclear(r);
    return status;
}

/* ---- versions ---- */

/* One version from a single-row query (read, retried). */
static tg_cat_status version_query(tg_catalog *catalog, const char *sql, int n,
                                   const char *const *params, tg_version *out)
{
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, n, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        tg_cat_read_version(pg_row(r, 0), out);
    PQclear(r);
    return status;
}

/* Locks the model's row inside t (the version-number sequence is per model): OK,
 * NOT_FOUND (no such model) or an error. */
static tg_cat_status lock_model(tx *t, const char *model_id)
{
    const char *params[] = {model_id};
    long rows = tx_run(t, "SELECT 1 FROM models WHERE id = $1 FOR NO KEY UPDATE", 1, params);
    return rows < 0 ? t->status : rows > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
}

static tg_cat_status pg_version_create(tg_catalog *catalog, int64_t model_id, tg_version *out)
{
    static const char sql[] =
        "INSERT INTO versions(model_id, number, state, created_at)"
        " SELECT $1, coalesce(max(number), 0) + 1, 'draft', $2 FROM versions WHERE model_id = $1"
        " RETURNING " TG_CAT_VERSION_COLUMNS;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num id = n64(model_id);
    const char *params[] = {id.s, now};
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status = lock_model(&t, id.s);
    if (status == TG_CAT_OK) {
        PGresult *r = tx_q(&t, sql, 2, params);
        status = one_row(r, t.status);
        if (status == TG_CAT_OK)
            tg_cat_read_version(pg_row(r, 0), out);
        else if (status == TG_CAT_NOT_FOUND)
            status = TG_CAT_ERROR;
        PQclear(r);
    }
    return tx_end(&t, status);
}

static tg_cat_status pg_version_get(tg_catalog *catalog, int64_t model_id, int64_t number,
                                    tg_version *out)
{
    num m = n64(model_id), v = n64(number);
    const char *params[] = {m.s, v.s};
    return version_query(catalog, TG_CAT_SQL_VERSION_GET, 2, params, out);
}

static tg_cat_status pg_version_by_digest(tg_catalog *catalog, int64_t model_id, const char *digest,
                                          tg_version *out)
{
    num m = n64(model_id);
    const char *params[] = {m.s, digest};
    return version_query(catalog, TG_CAT_SQL_VERSION_BY_DIGEST, 2, params, out);
}

static tg_cat_status pg_version_latest_published(tg_catalog *catalog, int64_t model_id,
                                                 tg_version *out)
{
    num m = n64(model_id);
    const char *params[] = {m.s};
    return version_query(catalog, TG_CAT_SQL_VERSION_LATEST_PUBLISHED, 1, params, out);
}

static tg_cat_status pg_version_list(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const tg_version *version), void *ctx)
{
    num m = n64(model_id);
    const char *params[] = {m.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_VERSION_LIST, 1, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++) {
        tg_version version;
        tg_cat_read_version(pg_row(r, i), &version);
        visit(ctx, &version);
    }
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_version_publish(tg_catalog *catalog, int64_t version_id, const char *digest,
                                        tg_version *out)
{
    /* Of two publishes at once, the second waits for the first's row lock, then
     * re-reads the row: no longer a draft, it changes nothing (CONFLICT). */
    static const char sql[] = "UPDATE versions SET state = 'published', published_at = $1,"
                              " digest = $2 WHERE id = $3 AND state = 'draft'"
                              " RETURNING " TG_CAT_VERSION_COLUMNS;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num id = n64(version_id);
    const char *params[] = {now, digest, id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), false, sql, 3, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        tg_cat_read_version(pg_row(r, 0), out);
    else if (status == TG_CAT_NOT_FOUND)
        status = TG_CAT_CONFLICT; /* already published (or gone) */
    PQclear(r);
    return status;
}

/* ---- aliases ---- */

static tg_cat_status pg_code_files(tg_catalog *catalog, int64_t model_id, int64_t number,
                                   void (*visit)(void *ctx, int64_t number, const char *path,
                                                 const char *code_reason),
                                   void *ctx)
{
    num m = n64(model_id), n = n64(number);
    const char *params[] = {m.s, n.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_CODE_FILES, 2, params, &status);
    if (r == NULL)
        return status;
    char path[TG_PATH_MAX + 1], reason[32];
    for (int i = 0; i < PQntuples(r); i++) {
        get_text(path, sizeof path, r, i, 1);
        get_text(reason, sizeof reason, r, i, 2);
        visit(ctx, get_i64(r, i, 0), path, reason);
    }
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- namespace settings ---- */

static tg_cat_status pg_namespace_get(tg_catalog *catalog, const char *org,
                                      tg_namespace_settings *out)
{
    const char *params[] = {org};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_NAMESPACE_GET, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK) {
        out->allow_code = get_i64(r, 0, 0) != 0;
        get_text(out->updated_at, sizeof out->updated_at, r, 0, 1);
        out->quota_bytes = get_i64(r, 0, 2);
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_namespace_set_code(tg_catalog *catalog, const char *org, bool allow_code,
                                           const char *now)
{
    const char *params[] = {org, allow_code ? "1" : "0", now};
    tg_cat_status status;
    /* an upsert of one value: the same twice is the same as once, safe to send again */
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_NAMESPACE_SET_CODE, 3, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_alias_set(tg_catalog *catalog, int64_t model_id, const char *alias,
                                  int64_t number)
{
    static const char sql[] = TG_CAT_SQL_ALIAS_SET;
    num m = n64(model_id), v = n64(number);
    const char *params[] = {m.s, alias, v.s};
    tg_cat_status status;
    /* setting the same alias twice is the same as once: safe to send again */
    PGresult *r = query(pg(catalog), true, sql, 3, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_alias_delete(tg_catalog *catalog, int64_t model_id, const char *alias)
{
    num m = n64(model_id);
    const char *params[] = {m.s, alias};
    tg_cat_status status;
    /* deleting twice is the same as once: safe to send again */
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_ALIAS_DELETE, 2, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_version_delete_draft(tg_catalog *catalog, int64_t version_id)
{
    num id = n64(version_id);
    const char *params[] = {id.s};
    return write_touched(pg(catalog), true, TG_CAT_SQL_VERSION_DELETE_DRAFT, 1, params);
}

static tg_cat_status pg_alias_get(tg_catalog *catalog, int64_t model_id, const char *alias,
                                  int64_t *number)
{
    num m = n64(model_id);
    const char *params[] = {m.s, alias};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_ALIAS_GET, 2, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        *number = get_i64(r, 0, 0);
    PQclear(r);
    return status;
}

static tg_cat_status pg_signing_set(tg_catalog *catalog, const char *org, const char *policy)
{
    static const char sql[] = TG_CAT_SQL_SIGNING_SET;
    const char *params[] = {org, policy};
    tg_cat_status status;
    /* setting the same policy twice is the same as once: safe to send again */
    PGresult *r = query(pg(catalog), true, sql, 2, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_signing_get(tg_catalog *catalog, const char *org, char **policy)
{
    const char *params[] = {org};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_SIGNING_GET, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK) {
        *policy = strdup(PQgetvalue(r, 0, 0));
        if (*policy == NULL)
            status = TG_CAT_ERROR;
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_alias_list(tg_catalog *catalog, int64_t model_id,
                                   void (*visit)(void *ctx, const char *alias, int64_t number),
                                   void *ctx)
{
    num m = n64(model_id);
    const char *params[] = {m.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_ALIAS_LIST, 1, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++)
        visit(ctx, PQgetvalue(r, i, 0), get_i64(r, i, 1));
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- files ---- */

/* Inside t: the version exists and is a draft, its row share-locked until the
 * end of t (a publish waits). */
static tg_cat_status check_draft(tx *t, const char *version_id)
{
    const char *params[] = {version_id};
    PGresult *r = tx_q(t, "SELECT state FROM versions WHERE id = $1 FOR SHARE", 1, params);
    tg_cat_status status = one_row(r, t->status);
    if (status == TG_CAT_OK && strcmp(PQgetvalue(r, 0, 0), "draft") != 0)
        status = TG_CAT_CONFLICT;
    PQclear(r);
    return status;
}

/* The token rule of check_token_covers in catalog_sqlite.c, on a (scope,
 * namespace) row or none. */
static tg_cat_status token_covers(const PGresult *r, int row, bool exists, const char *org,
                                  const char **why)
{
    if (!exists) {
        *why = "token_revoked";
        return TG_CAT_NOT_FOUND;
    }
    const char *scope = PQgetvalue(r, row, 0);
    bool ns_null = PQgetisnull(r, row, 1);
    if (strcmp(scope, "read") == 0 || (!ns_null && strcmp(PQgetvalue(r, row, 1), org) != 0)) {
        *why = "forbidden";
        return TG_CAT_NOT_FOUND;
    }
    return TG_CAT_OK;
}

/* Inside t: the token (by hash, or by id when hash is NULL) still exists, has
 * write scope and covers org; its row share-locked (a revoke waits). */
static tg_cat_status check_token(tx *t, const char *hash, int64_t id, const char *org,
                                 const char **why)
{
    num i = n64(id);
    const char *params[] = {hash != NULL ? hash : i.s};
    PGresult *r =
        tx_q(t,
             hash != NULL ? "SELECT scope, namespace FROM tokens WHERE hash = $1 FOR SHARE"
                          : "SELECT scope, namespace FROM tokens WHERE id = $1 FOR SHARE",
             1, params);
    if (r == NULL)
        return TG_CAT_ERROR;
    tg_cat_status status = token_covers(r, 0, PQntuples(r) > 0, org, why);
    PQclear(r);
    return status;
}

static tg_cat_status pg_file_put_guarded(tg_catalog *catalog, const tg_commit_guard *guard,
                                         int64_t version_id, const tg_file_record *file,
                                         const char *tensor_stats, const char **why)
{
    static const char guard_sql[] =
        "SELECT v.state FROM versions v JOIN models m ON m.id = v.model_id"
        " WHERE v.id = $1 AND m.id = $2 AND m.org = $3 AND m.name = $4 FOR SHARE OF v";
    static const char put_sql[] =
        "INSERT INTO files(version_id, path, kind, size, sha256, tensors, parameters, nan, inf,"
        " tensor_stats, created_at, code_reason)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        " ON CONFLICT (version_id, path) DO UPDATE SET kind = excluded.kind,"
        " size = excluded.size, sha256 = excluded.sha256, tensors = excluded.tensors,"
        " parameters = excluded.parameters, nan = excluded.nan, inf = excluded.inf,"
        " tensor_stats = excluded.tensor_stats, created_at = excluded.created_at,"
        " source_url = NULL, code_reason = excluded.code_reason";
    const char *why_local = NULL;
    if (why == NULL)
        why = &why_local;
    *why = NULL;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num vid = n64(version_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status;
    if (guard != NULL) {
        num mid = n64(guard->model_id);
        const char *params[] = {vid.s, mid.s, guard->org, guard->name};
        PGresult *r = tx_q(&t, guard_sql, 4, params);
        status = one_row(r, t.status);
        if (status == TG_CAT_NOT_FOUND)
            *why = "version_not_found";
        else if (status == TG_CAT_OK && strcmp(PQgetvalue(r, 0, 0), "draft") != 0) {
            status = TG_CAT_CONFLICT;
            *why = "version_published";
        }
        PQclear(r);
        if (status == TG_CAT_OK && guard->token_hash != NULL)
            status = check_token(&t, guard->token_hash, 0, guard->org, why);
    } else {
        status = check_draft(&t, vid.s);
    }
    if (status == TG_CAT_OK) {
        num size = n64((int64_t)file->size), tensors = n64((int64_t)file->tensors),
            parameters = n64((int64_t)file->parameters), nan = n64((int64_t)file->nan),
            inf = n64((int64_t)file->inf);
        const char *params[] = {vid.s,        file->path,
                                file->kind,   size.s,
                                file->sha256, tensors.s,
                                parameters.s, nan.s,
                                inf.s,        tensor_stats ? tensor_stats : "[]",
                                now,          file->code_reason[0] ? file->code_reason : NULL};
        status = tx_run(&t, put_sql, 12, params) < 0 ? t.status : TG_CAT_OK;
    }
    return tx_end(&t, status);
}

static tg_cat_status pg_guard_check(tg_catalog *catalog, const tg_commit_guard *guard,
                                    int64_t version_id, const char **why)
{
    /* one statement, one snapshot: the three answers come from the same state */
    static const char sql[] =
        "SELECT EXISTS (SELECT 1 FROM models WHERE id = $1 AND org = $2 AND name = $3),"
        " EXISTS (SELECT 1 FROM versions WHERE id = $4 AND model_id = $1),"
        " t.scope, t.namespace, t.hash IS NOT NULL"
        " FROM (SELECT 1) one LEFT JOIN tokens t ON t.hash = $5";
    *why = NULL;
    num mid = n64(guard->model_id), vid = n64(version_id);
    const char *params[] = {mid.s, guard->org, guard->name, vid.s,
                            guard->token_hash ? guard->token_hash : ""};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 5, params, &status);
    if (r == NULL)
        return status;
    if (PQntuples(r) < 1) {
        PQclear(r);
        return TG_CAT_ERROR;
    }
    status = TG_CAT_OK;
    if (strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
        *why = "model_deleted";
        status = TG_CAT_NOT_FOUND;
    } else if (strcmp(PQgetvalue(r, 0, 1), "t") != 0) {
        *why = "version_deleted";
        status = TG_CAT_NOT_FOUND;
    } else if (guard->token_hash != NULL) {
        /* columns 2 and 3 are scope and namespace */
        bool exists = strcmp(PQgetvalue(r, 0, 4), "t") == 0;
        if (!exists) {
            *why = "token_revoked";
            status = TG_CAT_NOT_FOUND;
        } else if (strcmp(PQgetvalue(r, 0, 2), "read") == 0 ||
                   (!PQgetisnull(r, 0, 3) && strcmp(PQgetvalue(r, 0, 3), guard->org) != 0)) {
            *why = "forbidden";
            status = TG_CAT_NOT_FOUND;
        }
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_file_get(tg_catalog *catalog, int64_t version_id, const char *path,
                                 tg_file_record *out)
{
    num vid = n64(version_id);
    const char *params[] = {vid.s, path};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_FILE_GET, 2, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        tg_cat_read_file(pg_row(r, 0), out);
    PQclear(r);
    return status;
}

static tg_cat_status pg_file_stats(tg_catalog *catalog, int64_t version_id, const char *path,
                                   char **tensor_stats)
{
    *tensor_stats = NULL;
    num vid = n64(version_id);
    const char *params[] = {vid.s, path};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_FILE_STATS, 2, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK) {
        *tensor_stats = strdup(PQgetisnull(r, 0, 0) ? "[]" : PQgetvalue(r, 0, 0));
        if (*tensor_stats == NULL)
            status = TG_CAT_ERROR;
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_file_delete(tg_catalog *catalog, int64_t version_id, const char *path)
{
    num vid = n64(version_id);
    const char *params[] = {vid.s, path};
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status = check_draft(&t, vid.s);
    if (status == TG_CAT_OK) {
        long rows = tx_run(&t, TG_CAT_SQL_FILE_DELETE, 2, params);
        status = rows < 0 ? t.status : rows > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
    }
    return tx_end(&t, status);
}

static tg_cat_status pg_file_list(tg_catalog *catalog, int64_t version_id, const char *after_path,
                                  unsigned limit,
                                  void (*visit)(void *ctx, const tg_file_record *file), void *ctx)
{
    num vid = n64(version_id), lim = n64(limit);
    const char *params[] = {vid.s, after_path, limit == 0 ? NULL : lim.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true,
                        "SELECT " TG_CAT_FILE_COLUMNS " FROM files WHERE version_id = $1"
                        " AND ($2::text IS NULL OR path > $2::text) ORDER BY path LIMIT $3::bigint",
                        3, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++) {
        tg_file_record file;
        tg_cat_read_file(pg_row(r, i), &file);
        visit(ctx, &file);
    }
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_version_publish_files(tg_catalog *catalog, int64_t version_id,
                                              const char *digest, const tg_file_record *files,
                                              size_t count, tg_version *out, const char **why)
{
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num id = n64(version_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    /* The version's row lock: puts and deletes of its files (FOR SHARE) wait for
     * this transaction, and it waits for those already running. */
    const char *params[] = {id.s};
    PGresult *r = tx_q(&t, "SELECT state FROM versions WHERE id = $1 FOR UPDATE", 1, params);
    tg_cat_status status = one_row(r, t.status);
    if (status == TG_CAT_NOT_FOUND ||
        (status == TG_CAT_OK && strcmp(PQgetvalue(r, 0, 0), "draft") != 0)) {
        status = TG_CAT_CONFLICT;
        *why = "version_published";
    }
    PQclear(r);
    if (status == TG_CAT_OK) {
        r = tx_q(&t, "SELECT " TG_CAT_FILE_COLUMNS " FROM files WHERE version_id = $1", 1, params);
        tg_file_records stored = {0};
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            tg_file_record file;
            tg_cat_read_file(pg_row(r, i), &file);
            tg_file_records_collect(&stored, &file);
        }
        if (r == NULL || stored.failed)
            status = r == NULL ? t.status : TG_CAT_ERROR;
        else if (!tg_catalog_files_match(files, count, &stored)) {
            status = TG_CAT_CONFLICT;
            *why = "version_changed";
        }
        PQclear(r);
        free(stored.items);
    }
    if (status == TG_CAT_OK) {
        const char *update[] = {now, digest, id.s};
        r = tx_q(&t,
                 "UPDATE versions SET state = 'published', published_at = $1, digest = $2"
                 " WHERE id = $3 AND state = 'draft' RETURNING " TG_CAT_VERSION_COLUMNS,
                 3, update);
        status = one_row(r, t.status);
        if (status == TG_CAT_OK)
            tg_cat_read_version(pg_row(r, 0), out);
        else if (status == TG_CAT_NOT_FOUND)
            status = TG_CAT_ERROR;
        PQclear(r);
    }
    return tx_end(&t, status);
}

/* ---- rejections ---- */

static tg_cat_status pg_rejection_add(tg_catalog *catalog, const tg_rejection *rejection)
{
    static const char sql[] = TG_CAT_SQL_REJECTION_ADD;
    num version = n64(rejection->version), size = n64((int64_t)rejection->size);
    num token = n64(rejection->token_id), job = n64(rejection->job_id);
    const char *params[] = {rejection->time,
                            rejection->model[0] ? rejection->model : NULL,
                            rejection->version >= 0 ? version.s : NULL,
                            rejection->path[0] ? rejection->path : NULL,
                            rejection->reason,
                            rejection->format[0] ? rejection->format : NULL,
                            rejection->detail,
                            rejection->client[0] ? rejection->client : NULL,
                            size.s,
                            rejection->findings[0] ? rejection->findings : NULL,
                            rejection->sha256[0] ? rejection->sha256 : NULL,
                            rejection->namespace_name[0] ? rejection->namespace_name : NULL,
                            rejection->token_id > 0 ? token.s : NULL,
                            rejection->route[0] ? rejection->route : NULL,
                            rejection->job_id > 0 ? job.s : NULL,
                            rejection->outcome[0] ? rejection->outcome : "refused"};
    /* one transaction, so that what else a rejection records lands with it or not at all */
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    long rows = tx_run(&t, sql, 16, params);
    return tx_end(&t, rows == 1 ? TG_CAT_OK : t.status);
}

static tg_cat_status pg_rejection_list(tg_catalog *catalog, const tg_rejection_filter *filter,
                                       unsigned limit,
                                       void (*visit)(void *ctx, const tg_rejection *rejection),
                                       void *ctx)
{
    static const char sql[] = TG_CAT_SQL_REJECTION_LIST;
    num before = n64(filter->before_id), lim = n64(limit);
    const char *params[] = {before.s,      filter->reason, filter->namespace_name,
                            filter->since, filter->until,  filter->sha256,
                            lim.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 7, params, &status);
    if (r == NULL)
        return status;
    tg_rejection *j = malloc(sizeof *j);
    if (j == NULL) {
        PQclear(r);
        return TG_CAT_ERROR;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        tg_cat_read_rejection(pg_row(r, i), j);
        visit(ctx, j);
    }
    free(j);
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- tokens ---- */

static tg_cat_status pg_token_add(tg_catalog *catalog, const char *hash, tg_scope scope,
                                  const char *namespace_or_null)
{
    const char *scope_text = tg_cat_scope_name(scope);
    if (scope_text == NULL)
        return TG_CAT_ERROR;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    const char *params[] = {hash, scope_text, namespace_or_null, now};
    return write_touched(pg(catalog), false, TG_CAT_SQL_TOKEN_ADD, 4, params);
}

static tg_cat_status pg_token_lookup(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                     char *namespace_out, size_t namespace_len)
{
    const char *params[] = {hash};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_TOKEN_SCOPE, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK) {
        *scope = tg_cat_scope_from_name(PQgetvalue(r, 0, 0));
        get_text(namespace_out, namespace_len, r, 0, 1);
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_token_each(tg_catalog *catalog,
                                   void (*visit)(void *ctx, const tg_token_info *token), void *ctx)
{
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_TOKEN_EACH, 0, NULL, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++) {
        tg_token_info token;
        memset(&token, 0, sizeof token);
        token.id = get_i64(r, i, 0);
        token.scope = tg_cat_scope_from_name(PQgetvalue(r, i, 1));
        get_text(token.namespace_name, sizeof token.namespace_name, r, i, 2);
        get_text(token.created_at, sizeof token.created_at, r, i, 3);
        visit(ctx, &token);
    }
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_token_id(tg_catalog *catalog, const char *hash, int64_t *id)
{
    const char *params[] = {hash};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_TOKEN_ID, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        *id = get_i64(r, 0, 0);
    PQclear(r);
    return status;
}

static tg_cat_status pg_token_revoke(tg_catalog *catalog, int64_t id)
{
    num i = n64(id);
    const char *params[] = {i.s};
    return write_touched(pg(catalog), false, TG_CAT_SQL_TOKEN_REVOKE, 1, params);
}

/* ---- blobs ---- */

static tg_cat_status pg_blob_each(tg_catalog *catalog,
                                  int (*visit)(void *ctx, const char *sha256, uint64_t size),
                                  void *ctx)
{
    /* Paged by (sha256, size): a catalog of any size is walked in bounded memory. */
    static const char sql[] =
        "SELECT sha256, size FROM (SELECT sha256, size FROM files UNION"
        " SELECT sha256, size FROM job_files) b WHERE (sha256, size) > ($1::text, $2::bigint)"
        " ORDER BY sha256, size LIMIT 1000"; /* BLOB_PAGE */
    char after_sha[65] = "";
    num after_size = n64(-1);
    for (;;) {
        const char *params[] = {after_sha, after_size.s};
        tg_cat_status status;
        PGresult *r = query(pg(catalog), true, sql, 2, params, &status);
        if (r == NULL)
            return status;
        int rows = PQntuples(r);
        for (int i = 0; i < rows; i++) {
            if (visit(ctx, PQgetvalue(r, i, 0), (uint64_t)get_i64(r, i, 1)) != 0) {
                PQclear(r);
                return TG_CAT_OK;
            }
        }
        if (rows > 0) {
            get_text(after_sha, sizeof after_sha, r, rows - 1, 0);
            after_size = n64(get_i64(r, rows - 1, 1));
        }
        PQclear(r);
        if (rows < BLOB_PAGE)
            return TG_CAT_OK;
    }
}

static tg_cat_status pg_model_blobs(tg_catalog *catalog, int64_t model_id,
                                    void (*visit)(void *ctx, const char *sha256), void *ctx)
{
    static const char sql[] = TG_CAT_SQL_MODEL_BLOBS;
    num m = n64(model_id);
    const char *params[] = {m.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 1, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++)
        visit(ctx, PQgetvalue(r, i, 0));
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_blob_referenced(tg_catalog *catalog, const char *sha256, bool *referenced)
{
    const char *params[] = {sha256};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_BLOB_REFERENCED, 1, params, &status);
    if (r == NULL)
        return status;
    *referenced = PQntuples(r) > 0;
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- jobs ---- */

/* The database's clock in Unix milliseconds: every replica's leases use the same clock. */
#define DB_NOW "(extract(epoch from clock_timestamp()) * 1000)::bigint"

/* Inside t: the job (lock: FOR UPDATE OF its row). */
static tg_cat_status tx_job(tx *t, const char *job_id, bool lock, tg_job *out, bool *ours)
{
    const char *params[] = {job_id};
    PGresult *r =
        tx_q(t,
             lock ? "SELECT " TG_CAT_JOB_COLUMNS TG_CAT_JOB_FROM " WHERE j.id = $1 FOR UPDATE OF j"
                  : TG_CAT_SQL_JOB_GET,
             1, params);
    tg_cat_status status = one_row(r, t->status);
    if (status == TG_CAT_OK) {
        tg_cat_read_job(pg_row(r, 0), out);
        if (ours != NULL)
            *ours =
                PQgetisnull(r, 0, 19) || strcmp(PQgetvalue(r, 0, 19), t->c->base.lease_owner) == 0;
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_job_get(tg_catalog *catalog, int64_t job_id, tg_job *out)
{
    num id = n64(job_id);
    const char *params[] = {id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_JOB_GET, 1, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK)
        tg_cat_read_job(pg_row(r, 0), out);
    PQclear(r);
    return status;
}

/* Queues a job on a version once: under the model's and the version's row locks (a
 * model's delete takes them in that order: no deadlock), same_sql (3 parameters)
 * looks for an equal job queued or running, whose id comes back with *existing set;
 * else insert_sql (n parameters, RETURNING id) queues a new one. The row locks make
 * the look-up and the insert one step across replicas: two equal requests at once
 * queue one job. */
static tg_cat_status queue_job_once(tg_catalog *catalog, const char *model_id,
                                    const char *version_id, const char *same_sql,
                                    const char *const same_params[3], const char *insert_sql, int n,
                                    const char *const *insert_params, tg_job *out, bool *existing)
{
    static const char lock_sql[] = "SELECT 1 FROM versions WHERE id = $1 FOR NO KEY UPDATE";
    *existing = false;
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status = lock_model(&t, model_id);
    const char *lock_params[] = {version_id};
    long rows = status == TG_CAT_OK ? tx_run(&t, lock_sql, 1, lock_params) : 0;
    if (status == TG_CAT_OK)
        status = rows < 0 ? t.status : rows > 0 ? TG_CAT_OK : TG_CAT_NOT_FOUND;
    if (status != TG_CAT_OK)
        return tx_end(&t, status);
    PGresult *r = tx_q(&t, same_sql, 3, same_params);
    if (r == NULL)
        return tx_end(&t, t.status);
    char id[24];
    if (PQntuples(r) > 0) {
        *existing = true;
        get_text(id, sizeof id, r, 0, 0);
        PQclear(r);
        return tx_end(&t, tx_job(&t, id, false, out, NULL));
    }
    PQclear(r);
    r = tx_q(&t, insert_sql, n, insert_params);
    status = one_row(r, t.status);
    if (status == TG_CAT_OK)
        get_text(id, sizeof id, r, 0, 0);
    PQclear(r);
    if (status == TG_CAT_OK)
        status = tx_job(&t, id, false, out, NULL);
    return tx_end(&t, status);
}

static tg_cat_status pg_job_create_by(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                      int64_t source_version_id, const char *dtype,
                                      const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                      bool *existing)
{
    static const char same_sql[] =
        "SELECT id FROM jobs WHERE state IN ('queued', 'running') AND error_reason IS NULL"
        " AND source_version_id = $1 AND dtype = $2 AND tensors = $3 ORDER BY id LIMIT 1";
    static const char insert_sql[] =
        "INSERT INTO jobs(kind, state, model_id, source_version_id, dtype, tensors, bytes_total,"
        " created_at, token_id) VALUES ('convert', 'queued', $1, $2, $3, $4, $5, $6, $7)"
        " RETURNING id";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num mid = n64(model_id), vid = n64(source_version_id), total = n64((int64_t)bytes_total),
        tid = n64(token_id);
    const char *const same_params[] = {vid.s, dtype, tensors_json};
    const char *const params[] = {
        mid.s, vid.s, dtype, tensors_json, total.s, now, token_id > 0 ? tid.s : NULL};
    return queue_job_once(catalog, mid.s, vid.s, same_sql, same_params, insert_sql, 7, params, out,
                          existing);
}

/* ---- imports (schema 6): the meaning of catalog_sqlite.c's, with row locks ---- */

static tg_cat_status pg_import_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                          int64_t version_id, const char *path, const char *url,
                                          tg_job *out, bool *existing)
{
    static const char same_sql[] = TG_CAT_SQL_IMPORT_JOB_ACTIVE;
    static const char insert_sql[] =
        "INSERT INTO jobs(kind, state, model_id, source_version_id, dtype, tensors, created_at,"
        " token_id, url, path) VALUES ('import', 'queued', $1, $2, '', '[]', $3, $4, $5, $6)"
        " RETURNING id";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num mid = n64(model_id), vid = n64(version_id), tid = n64(token_id);
    const char *const same_params[] = {vid.s, path, url};
    const char *const params[] = {mid.s, vid.s, now, token_id > 0 ? tid.s : NULL, url, path};
    return queue_job_once(catalog, mid.s, vid.s, same_sql, same_params, insert_sql, 6, params, out,
                          existing);
}

static tg_cat_status pg_import_commit(tg_catalog *catalog, int64_t job_id,
                                      const tg_commit_guard *guard, int64_t version_id,
                                      const tg_file_record *file, const char *tensor_stats,
                                      const char **why)
{
    static const char job_sql[] = "SELECT state, error_reason IS NULL, token_id, lease_owner"
                                  " FROM jobs WHERE id = $1 AND kind = 'import' FOR UPDATE";
    static const char guard_sql[] =
        "SELECT v.state FROM versions v JOIN models m ON m.id = v.model_id"
        " WHERE v.id = $1 AND m.id = $2 AND m.org = $3 AND m.name = $4 FOR SHARE OF v";
    static const char put_sql[] =
        "INSERT INTO files(version_id, path, kind, size, sha256, tensors, parameters, nan, inf,"
        " tensor_stats, created_at, source_url, code_reason)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        " ON CONFLICT (version_id, path) DO UPDATE SET kind = excluded.kind,"
        " size = excluded.size, sha256 = excluded.sha256, tensors = excluded.tensors,"
        " parameters = excluded.parameters, nan = excluded.nan, inf = excluded.inf,"
        " tensor_stats = excluded.tensor_stats, created_at = excluded.created_at,"
        " source_url = excluded.source_url, code_reason = excluded.code_reason";
    static const char done_sql[] =
        "UPDATE jobs SET state = 'done', finished_at = $1, bytes_done = $2, bytes_total = $2,"
        " lease_owner = NULL, lease_expires = NULL,"
        " result_version = (SELECT number FROM versions WHERE id = source_version_id)"
        " WHERE id = $3";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    *why = NULL;
    num jid = n64(job_id), vid = n64(version_id), mid = n64(guard->model_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    /* the model's row first, in the order a model delete takes them */
    tg_cat_status status = lock_model(&t, mid.s);
    int64_t token_id = 0;
    if (status == TG_CAT_OK) {
        const char *params[] = {jid.s};
        PGresult *r = tx_q(&t, job_sql, 1, params);
        status = one_row(r, t.status);
        if (status == TG_CAT_NOT_FOUND)
            *why = "job_not_found";
        else if (status == TG_CAT_OK) {
            token_id = PQgetisnull(r, 0, 2) ? 0 : get_i64(r, 0, 2);
            bool held =
                PQgetisnull(r, 0, 3) || strcmp(PQgetvalue(r, 0, 3), catalog->lease_owner) == 0;
            if (strcmp(PQgetvalue(r, 0, 0), "running") != 0 ||
                strcmp(PQgetvalue(r, 0, 1), "t") != 0) {
                status = TG_CAT_CONFLICT;
                *why = "cancelled";
            } else if (!held) { /* another replica took it over: its fetch counts */
                status = TG_CAT_CONFLICT;
                *why = "lease_lost";
            }
        }
        PQclear(r);
    }
    if (status == TG_CAT_OK) {
        const char *params[] = {vid.s, mid.s, guard->org, guard->name};
        PGresult *r = tx_q(&t, guard_sql, 4, params);
        status = one_row(r, t.status);
        if (status == TG_CAT_NOT_FOUND)
            *why = "version_not_found";
        else if (status == TG_CAT_OK && strcmp(PQgetvalue(r, 0, 0), "draft") != 0) {
            status = TG_CAT_CONFLICT;
            *why = "version_published";
        }
        PQclear(r);
    }
    if (status == TG_CAT_OK && token_id > 0)
        status = check_token(&t, NULL, token_id, guard->org, why);
    if (status == TG_CAT_OK) {
        num size = n64((int64_t)file->size), tensors = n64((int64_t)file->tensors),
            parameters = n64((int64_t)file->parameters), nan = n64((int64_t)file->nan),
            inf = n64((int64_t)file->inf);
        const char *params[] = {vid.s,
                                file->path,
                                file->kind,
                                size.s,
                                file->sha256,
                                tensors.s,
                                parameters.s,
                                nan.s,
                                inf.s,
                                tensor_stats ? tensor_stats : "[]",
                                now,
                                file->source_url[0] ? file->source_url : NULL,
                                file->code_reason[0] ? file->code_reason : NULL};
        status = tx_run(&t, put_sql, 13, params) < 0 ? t.status : TG_CAT_OK;
    }
    if (status == TG_CAT_OK) {
        num done = n64((int64_t)file->size);
        const char *params[] = {now, done.s, jid.s};
        status = tx_run(&t, done_sql, 3, params) < 0 ? t.status : TG_CAT_OK;
    }
    return tx_end(&t, status);
}

static tg_cat_status pg_job_counts(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES])
{
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_JOB_COUNTS, 0, NULL, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++)
        tg_cat_read_job_count(pg_row(r, i), counts);
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_job_list(tg_catalog *catalog, const tg_job_filter *filter,
                                 int64_t before_id, unsigned limit,
                                 void (*visit)(void *ctx, const tg_job *job), void *ctx)
{
    static const char sql[] =
        "SELECT " TG_CAT_JOB_COLUMNS TG_CAT_JOB_FROM
        " WHERE ($1::text IS NULL OR j.state = $1::text) AND ($2::text IS NULL OR m.org = $2::text)"
        " AND ($3::text IS NULL OR m.name = $3::text) AND ($4::bigint <= 0 OR j.id < $4::bigint)"
        " ORDER BY j.id DESC LIMIT $5::bigint";
    num before = n64(before_id), lim = n64(limit);
    const char *params[] = {filter->has_state ? tg_job_state_name(filter->state) : NULL,
                            filter->org, filter->org ? filter->name : NULL, before.s, lim.s};
    tg_job *job = malloc(sizeof *job);
    if (job == NULL)
        return TG_CAT_ERROR;
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 5, params, &status);
    if (r != NULL) {
        for (int i = 0; i < PQntuples(r); i++) {
            tg_cat_read_job(pg_row(r, i), job);
            visit(ctx, job);
        }
        status = TG_CAT_OK;
    }
    PQclear(r);
    free(job);
    return status;
}

/* Inside t: queued or running -> failed (detail NULL keeps the stored one), its
 * job_files rows go. */
static tg_cat_status fail_job(tx *t, const char *job_id, const char *reason, const char *detail)
{
    char now[TG_TIME_LEN];
    tg_time_now(now);
    const char *params[] = {now, reason, detail, job_id};
    long rows = tx_run(t, TG_CAT_SQL_JOB_FAIL, 4, params);
    if (rows < 0)
        return t->status;
    if (rows == 0)
        return TG_CAT_NOT_FOUND;
    const char *drop_params[] = {job_id};
    return tx_run(t, TG_CAT_SQL_JOB_FILES_DROP, 1, drop_params) < 0 ? t->status : TG_CAT_OK;
}

static tg_cat_status pg_job_cancel(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                   tg_job *out)
{
    num id = n64(job_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    /* the row lock: a claim or a commit cannot come between the read and the change */
    tg_cat_status status = tx_job(&t, id.s, true, out, NULL);
    if (status == TG_CAT_OK) {
        *was = out->state;
        if (out->state == TG_JOB_QUEUED) {
            status = fail_job(&t, id.s, "cancelled", "cancelled before it started");
        } else if (out->state == TG_JOB_RUNNING && !out->cancel_requested) {
            const char *params[] = {id.s};
            status =
                tx_run(&t, TG_CAT_SQL_JOB_CANCEL_RUNNING, 1, params) < 0 ? t.status : TG_CAT_OK;
        }
    }
    if (status == TG_CAT_OK)
        status = tx_job(&t, id.s, false, out, NULL);
    return tx_end(&t, status);
}

/* Inside t: running jobs whose lease expired (or, with mine set, that this
 * handle holds) and that will not run again (a cancel was asked, or
 * max_attempts reached) fail, their job_files rows go. Rows another call holds
 * are skipped (SKIP LOCKED). The rows touched, or -1. */
static long expire_jobs(tx *t, int64_t max_attempts, const char *mine)
{
    static const char sql[] =
        "WITH gone AS (UPDATE jobs SET state = 'failed', finished_at = $1, lease_owner = NULL,"
        " error_reason = CASE WHEN error_reason = 'cancelled' THEN error_reason"
        "   ELSE 'interrupted' END,"
        " error_detail = CASE WHEN error_reason = 'cancelled' THEN error_detail"
        "   ELSE 'the server stopped during the job ' || attempts || ' times; given up' END"
        " WHERE id IN (SELECT id FROM jobs WHERE state = 'running'"
        "   AND (coalesce(lease_expires, 0) < " DB_NOW " OR lease_owner = $3::text)"
        "   AND (error_reason = 'cancelled' OR attempts >= $2::bigint) FOR UPDATE SKIP LOCKED)"
        " RETURNING id)"
        " DELETE FROM job_files WHERE job_id IN (SELECT id FROM gone)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num max = n64(max_attempts);
    const char *params[] = {now, max.s, mine};
    return tx_run(t, sql, 3, params);
}

/* The jobs of j's namespace (org) running under this handle's live leases ($1):
 * the fair pick's count (tg_catalog_job_claim_fair). */
#define PG_NAMESPACE_BUSY                                                                          \
    "(SELECT count(*) FROM jobs r JOIN models rm ON rm.id = r.model_id WHERE rm.org = m.org"       \
    " AND r.state = 'running' AND r.lease_owner = $1 AND coalesce(r.lease_expires, 0) >= " DB_NOW  \
    ")"

static tg_cat_status pg_job_claim(tg_catalog *catalog, unsigned namespace_limit, tg_job *out)
{
    /* the oldest job of the namespace running the fewest here, under the limit ($2) */
    static const char pick_sql[] =
        "SELECT j.id FROM jobs j JOIN models m ON m.id = j.model_id"
        " WHERE (j.state = 'queued' OR (j.state = 'running' AND j.error_reason IS NULL"
        " AND coalesce(j.lease_expires, 0) < " DB_NOW "))"
        " AND ($2::bigint = 0 OR " PG_NAMESPACE_BUSY " < $2::bigint)"
        " ORDER BY " PG_NAMESPACE_BUSY ", j.id LIMIT 1 FOR UPDATE OF j SKIP LOCKED";
    static const char claim_sql[] = "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
                                    " started_at = coalesce(started_at, $1), lease_owner = $2,"
                                    " lease_expires = " DB_NOW " + $3::bigint WHERE id = $4";
    pg_catalog *c = pg(catalog);
    char now[TG_TIME_LEN];
    tg_time_now(now);
    tx t;
    if (!tx_begin(c, &t))
        return t.status;
    if (expire_jobs(&t, catalog->job_max_attempts, NULL) < 0)
        return tx_end(&t, t.status);
    num limit = n64(namespace_limit);
    const char *pick_params[] = {catalog->lease_owner, limit.s};
    PGresult *r = tx_q(&t, pick_sql, 2, pick_params);
    tg_cat_status status = one_row(r, t.status);
    char id[24] = "";
    if (status == TG_CAT_OK)
        get_text(id, sizeof id, r, 0, 0);
    PQclear(r);
    if (status == TG_CAT_NOT_FOUND) /* none to claim; the expired jobs' failures stay */
        return tx_end(&t, TG_CAT_OK) == TG_CAT_OK ? TG_CAT_NOT_FOUND : TG_CAT_ERROR;
    if (status != TG_CAT_OK)
        return tx_end(&t, status);
    num lease = n64((int64_t)catalog->job_lease_seconds * 1000);
    const char *params[] = {now, catalog->lease_owner, lease.s, id};
    if (tx_run(&t, claim_sql, 4, params) < 0)
        return tx_end(&t, t.status);
    return tx_end(&t, tx_job(&t, id, false, out, NULL));
}

static tg_cat_status pg_job_recover(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                    unsigned *failed)
{
    /* Several replicas share the jobs: only those whose lease expired were left by
     * a stopped server (a live replica keeps renewing its own), and those this
     * handle holds (none at a start). */
    static const char requeue_sql[] =
        "UPDATE jobs SET state = 'queued', lease_owner = NULL WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'running' AND error_reason IS NULL AND (coalesce(lease_expires, 0) "
        "< " DB_NOW " OR lease_owner = $1) FOR UPDATE SKIP LOCKED)";
    *requeued = *failed = 0;
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    /* count the jobs failed: the statement deletes job_files rows, so count first */
    static const char count_sql[] =
        "SELECT count(*) FROM jobs WHERE state = 'running' AND (coalesce(lease_expires, 0) "
        "< " DB_NOW
        " OR lease_owner = $2) AND (error_reason = 'cancelled' OR attempts >= $1::bigint)";
    num max = n64(max_attempts);
    const char *params[] = {max.s, catalog->lease_owner};
    PGresult *r = tx_q(&t, count_sql, 2, params);
    if (r == NULL)
        return tx_end(&t, t.status);
    long fail_count = (long)get_i64(r, 0, 0);
    PQclear(r);
    if (expire_jobs(&t, max_attempts, catalog->lease_owner) < 0)
        return tx_end(&t, t.status);
    const char *mine[] = {catalog->lease_owner};
    long rows = tx_run(&t, requeue_sql, 1, mine);
    if (rows < 0)
        return tx_end(&t, t.status);
    tg_cat_status status = tx_end(&t, TG_CAT_OK);
    if (status == TG_CAT_OK) {
        *failed = (unsigned)fail_count;
        *requeued = (unsigned)rows;
    }
    return status;
}

static tg_cat_status pg_job_progress(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                     uint64_t bytes_total)
{
    num id = n64(job_id), done = n64((int64_t)bytes_done), total = n64((int64_t)bytes_total);
    const char *params[] = {done.s, total.s, id.s, catalog->lease_owner};
    tg_cat_status status;
    /* only the lease holder (or a job no one holds) */
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_JOB_PROGRESS, 4, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_job_renew(tg_catalog *catalog, int64_t job_id)
{
    num id = n64(job_id), lease = n64((int64_t)catalog->job_lease_seconds * 1000);
    const char *params[] = {id.s, catalog->lease_owner, lease.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true,
                        "UPDATE jobs SET lease_expires = " DB_NOW " + $3::bigint WHERE id = $1"
                        " AND state = 'running' AND lease_owner = $2 RETURNING error_reason",
                        3, params, &status);
    status = one_row(r, status);
    if (status == TG_CAT_OK && strcmp(PQgetvalue(r, 0, 0), "cancelled") == 0)
        status = TG_CAT_CONFLICT;
    PQclear(r);
    return status;
}

static tg_cat_status pg_job_release(tg_catalog *catalog, int64_t job_id)
{
    num id = n64(job_id);
    const char *params[] = {id.s, catalog->lease_owner};
    return write_touched(pg(catalog), true, TG_CAT_SQL_JOB_RELEASE, 2, params);
}

static tg_cat_status pg_job_fail(tg_catalog *catalog, int64_t job_id, const char *reason,
                                 const char *detail)
{
    num id = n64(job_id);
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_job *job = malloc(sizeof *job);
    bool ours = false;
    tg_cat_status status = job == NULL ? TG_CAT_ERROR : tx_job(&t, id.s, true, job, &ours);
    /* a running job is failed only by its lease holder */
    if (status == TG_CAT_OK && job->state == TG_JOB_RUNNING && !ours)
        status = TG_CAT_NOT_FOUND;
    free(job);
    if (status == TG_CAT_OK)
        status = fail_job(&t, id.s, reason, detail);
    return tx_end(&t, status);
}

static tg_cat_status pg_job_file_put(tg_catalog *catalog, int64_t job_id,
                                     const tg_file_record *file, const char *tensor_stats)
{
    static const char sql[] =
        "INSERT INTO job_files(job_id, path, kind, size, sha256, tensors, parameters, nan, inf,"
        " tensor_stats) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10"
        " FROM jobs WHERE id = $1 AND state = 'running' AND error_reason IS NULL"
        " AND (lease_owner IS NULL OR lease_owner = $11)"
        " ON CONFLICT (job_id, path) DO UPDATE SET kind = excluded.kind, size = excluded.size,"
        " sha256 = excluded.sha256, tensors = excluded.tensors, parameters = excluded.parameters,"
        " nan = excluded.nan, inf = excluded.inf, tensor_stats = excluded.tensor_stats";
    num id = n64(job_id), size = n64((int64_t)file->size), tensors = n64((int64_t)file->tensors),
        parameters = n64((int64_t)file->parameters), nan = n64((int64_t)file->nan),
        inf = n64((int64_t)file->inf);
    const char *params[] = {id.s,
                            file->path,
                            file->kind,
                            size.s,
                            file->sha256,
                            tensors.s,
                            parameters.s,
                            nan.s,
                            inf.s,
                            tensor_stats ? tensor_stats : "[]",
                            catalog->lease_owner};
    tg_cat_status status;
    /* no row inserted: the job is gone, no longer running or ours, or being cancelled */
    PGresult *r = query(pg(catalog), true, sql, 11, params, &status);
    status = touched(r, status);
    PQclear(r);
    return status;
}

static tg_cat_status pg_job_file_list(tg_catalog *catalog, int64_t job_id,
                                      void (*visit)(void *ctx, const tg_file_record *file),
                                      void *ctx)
{
    num id = n64(job_id);
    const char *params[] = {id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_JOB_FILE_LIST, 1, params, &status);
    if (r == NULL)
        return status;
    for (int i = 0; i < PQntuples(r); i++) {
        tg_file_record file;
        tg_cat_read_file(pg_row(r, i), &file);
        visit(ctx, &file);
    }
    PQclear(r);
    return TG_CAT_OK;
}

static tg_cat_status pg_job_commit(tg_catalog *catalog, int64_t job_id, const char *digest,
                                   tg_version *out)
{
    static const char version_sql[] =
        "INSERT INTO versions(model_id, number, state, created_at, published_at, digest,"
        " derived_from, derived_dtype)"
        " SELECT $1, coalesce(max(number), 0) + 1, 'published', $2, $2, $3, $4, $5"
        " FROM versions WHERE model_id = $1 RETURNING " TG_CAT_VERSION_COLUMNS;
    static const char carried_sql[] = TG_CAT_SQL_JOB_COMMIT_CARRIED;
    static const char made_sql[] = TG_CAT_SQL_JOB_COMMIT_MADE;
    static const char done_sql[] = TG_CAT_SQL_JOB_COMMIT_DONE;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num jid = n64(job_id);
    tg_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return TG_CAT_ERROR;
    tx t;
    if (!tx_begin(pg(catalog), &t)) {
        free(job);
        return t.status;
    }
    /* Locks in the order a model's delete takes them (model, then its jobs), so
     * the two never deadlock: the model's row first (it also orders the version
     * numbers), then the job's. Of two replicas that both think they run the job
     * (one's lease expired and the other took it over), only the holder gets past
     * the job's lock with the job still running; the version is made once. */
    bool ours = false;
    tg_cat_status status = tx_job(&t, jid.s, false, job, NULL);
    num model_id = n64(job->model_id);
    if (status == TG_CAT_OK)
        status = lock_model(&t, model_id.s);
    if (status == TG_CAT_OK)
        status = tx_job(&t, jid.s, true, job, &ours);
    if (status == TG_CAT_OK && (job->state != TG_JOB_RUNNING || job->cancel_requested || !ours))
        status = TG_CAT_CONFLICT;
    const char *why = NULL;
    if (status == TG_CAT_OK && job->token_id > 0) {
        status = check_token(&t, NULL, job->token_id, job->org, &why);
        if (status == TG_CAT_NOT_FOUND && why != NULL) {
            status =
                fail_job(&t, jid.s, why,
                         strcmp(why, "token_revoked") == 0
                             ? "the token that asked for the job was revoked before it finished"
                             : "the token that asked for the job no longer covers its model");
            free(job);
            status = tx_end(&t, status);
            return status == TG_CAT_OK ? TG_CAT_CONFLICT : TG_CAT_ERROR;
        }
    }
    num mid = n64(job->model_id), source = n64(job->source_number),
        source_id = n64(job->source_version_id);
    PGresult *r = NULL;
    if (status == TG_CAT_OK) {
        const char *params[] = {mid.s, now, digest, source.s, job->dtype};
        r = tx_q(&t, version_sql, 5, params);
        status = one_row(r, t.status);
        if (status == TG_CAT_OK)
            tg_cat_read_version(pg_row(r, 0), out);
        else if (status == TG_CAT_NOT_FOUND)
            status = TG_CAT_ERROR;
        PQclear(r);
    }
    free(job);
    num vid = n64(status == TG_CAT_OK ? out->id : 0),
        number = n64(status == TG_CAT_OK ? out->number : 0);
    if (status == TG_CAT_OK) {
        const char *params[] = {vid.s, now, source_id.s, jid.s};
        if (tx_run(&t, carried_sql, 4, params) < 0)
            status = t.status;
    }
    if (status == TG_CAT_OK) {
        const char *params[] = {vid.s, source_id.s};
        if (tx_run(&t, TG_CAT_SQL_HUB_TAGS_COPY, 2, params) < 0)
            status = t.status;
    }
    if (status == TG_CAT_OK) {
        const char *params[] = {vid.s, now, jid.s};
        if (tx_run(&t, made_sql, 3, params) < 0)
            status = t.status;
    }
    if (status == TG_CAT_OK) {
        const char *params[] = {number.s, now, jid.s};
        if (tx_run(&t, done_sql, 3, params) < 0)
            status = t.status;
    }
    if (status == TG_CAT_OK) {
        const char *params[] = {jid.s};
        if (tx_run(&t, TG_CAT_SQL_JOB_FILES_DROP, 1, params) < 0)
            status = t.status;
    }
    return tx_end(&t, status);
}

/* The ended import jobs whose url may hold credentials (tg_catalog_job_scrub_urls). */
static tg_cat_status pg_job_ended_urls(tg_catalog *catalog, int64_t job_id, int64_t after_id,
                                       unsigned limit,
                                       void (*visit)(void *ctx, int64_t id, const char *url),
                                       void *ctx)
{
    static const char sql[] =
        "SELECT id, url FROM jobs WHERE ($1::bigint = 0 OR id = $1::bigint)"
        " AND id > $2::bigint AND kind IN ('import', 'mirror') AND state IN ('done', 'failed')"
        " AND url IS NOT NULL AND (strpos(url, '@') > 0 OR strpos(url, '#') > 0"
        " OR (strpos(url, '?') > 0 AND substr(url, strpos(url, '?')) <> '?REDACTED'))"
        " ORDER BY id LIMIT $3::bigint";
    num id = n64(job_id), after = n64(after_id), lim = n64(limit);
    const char *params[] = {id.s, after.s, lim.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, sql, 3, params, &status);
    if (r != NULL) {
        for (int i = 0; i < PQntuples(r); i++)
            visit(ctx, strtoll(PQgetvalue(r, i, 0), NULL, 10), PQgetvalue(r, i, 1));
        status = TG_CAT_OK;
    }
    PQclear(r);
    return status;
}

static tg_cat_status pg_job_set_ended_url(tg_catalog *catalog, int64_t job_id, const char *url)
{
    num id = n64(job_id);
    const char *params[] = {url, id.s};
    tg_cat_status status;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_JOB_SET_ENDED_URL, 2, params, &status);
    status = r != NULL ? TG_CAT_OK : status;
    PQclear(r);
    return status;
}

/* ---- mirrors (schema 14): catalog_mirror.c's statements ---- */

static tg_cat_status
pg_mirror_exec(tg_catalog *catalog, bool write, const char *sql, int n, const char *const *params,
               void (*visit)(void *ctx, int columns, const char *const *values), void *ctx)
{
    tg_cat_status status;
    /* a write is sent once (its repeat could do it twice); a read may be retried */
    PGresult *r = query(pg(catalog), !write, sql, n, params, &status);
    if (r == NULL)
        return status;
    int columns = PQnfields(r);
    if (columns > 16)
        columns = 16;
    const char *values[16];
    for (int i = 0; visit != NULL && i < PQntuples(r); i++) {
        for (int c = 0; c < columns; c++)
            values[c] = PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
        visit(ctx, columns, values);
    }
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- versions by commit id (issue 21: a query, not a walk of every version) ---- */

static tg_cat_status pg_version_by_commit(tg_catalog *catalog, int64_t model_id, const char *commit,
                                          tg_version *out)
{
    num m = n64(model_id);
    const char *params[] = {m.s, commit};
    return version_query(catalog, TG_CAT_SQL_VERSION_BY_COMMIT, 2, params, out);
}

/* ---- the audit log ---- */

/* The advisory lock key that serialises audit appends across replicas ("tgaudit"). */
#define AUDIT_LOCK_KEY "8387236014250960500"

static tg_cat_status pg_audit_append(tg_catalog *catalog, const char *token_hash,
                                     tg_audit_record *r)
{
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    /* one chain across replicas: the lock is held from the read of the last row to
     * the commit of the next (a transaction-level lock: the commit or the rollback
     * releases it, also when the connection dies) */
    if (tx_run(&t, "SELECT pg_advisory_xact_lock(" AUDIT_LOCK_KEY ")", 0, NULL) < 0)
        return tx_end(&t, t.status);
    r->token_id = 0;
    r->namespace_name[0] = '\0';
    if (token_hash != NULL) {
        const char *params[] = {token_hash};
        PGresult *q = tx_q(&t, TG_CAT_SQL_AUDIT_TOKEN, 1, params);
        if (q == NULL)
            return tx_end(&t, t.status);
        if (PQntuples(q) > 0) {
            r->token_id = get_i64(q, 0, 0);
            get_text(r->namespace_name, sizeof r->namespace_name, q, 0, 1);
        }
        PQclear(q);
    }
    PGresult *q = tx_q(&t, TG_CAT_SQL_AUDIT_LAST, 0, NULL);
    if (q == NULL)
        return tx_end(&t, t.status);
    r->seq = PQntuples(q) > 0 ? get_i64(q, 0, 0) + 1 : 1;
    if (PQntuples(q) > 0)
        get_text(r->prev_hash, sizeof r->prev_hash, q, 0, 1);
    else
        snprintf(r->prev_hash, sizeof r->prev_hash, "%s", TG_AUDIT_GENESIS);
    PQclear(q);
    tg_audit_time_now(r->time);
    if (tg_audit_hash(r, r->hash) != 0)
        return tx_end(&t, TG_CAT_ERROR);
    num seq = n64(r->seq), token = n64(r->token_id), status = n64(r->status);
    const char *params[] = {seq.s,
                            r->time,
                            r->token_id > 0 ? token.s : NULL,
                            r->namespace_name,
                            r->action,
                            r->resource,
                            status.s,
                            r->reason,
                            r->request_id,
                            r->client,
                            r->user_agent,
                            r->prev_hash,
                            r->hash};
    long rows = tx_run(&t, TG_CAT_SQL_AUDIT_INSERT, 13, params);
    return tx_end(&t, rows == 1 ? TG_CAT_OK : t.status);
}

static tg_cat_status pg_audit_list(tg_catalog *catalog, const tg_audit_filter *f, unsigned limit,
                                   void (*visit)(void *ctx, const tg_audit_record *record),
                                   void *ctx)
{
    num after = n64(f->after_seq), token = n64(f->token_id), status = n64(f->status),
        outcome = n64(f->outcome), lim = n64(limit);
    const char *params[] = {after.s,   f->since,           f->until, token.s,   f->namespace_name,
                            f->action, f->resource_prefix, status.s, outcome.s, lim.s};
    tg_cat_status st;
    PGresult *r = query(pg(catalog), true, TG_CAT_SQL_AUDIT_LIST, 10, params, &st);
    if (r == NULL)
        return st;
    for (int i = 0; i < PQntuples(r); i++) {
        tg_audit_record rec;
        tg_cat_read_audit(pg_row(r, i), &rec);
        visit(ctx, &rec);
    }
    PQclear(r);
    return TG_CAT_OK;
}

/* ---- generic steps (catalog_webhooks.c) ---- */

static tg_cat_status pg_run_steps(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count)
{
    (void)write; /* a read runs in a transaction too: one snapshot for all its steps */
    tx t;
    if (!tx_begin(pg(catalog), &t))
        return t.status;
    tg_cat_status status = TG_CAT_OK;
    for (size_t i = 0; i < count && status == TG_CAT_OK; i++) {
        tg_cat_step *step = &steps[i];
        PGresult *r = tx_q(&t, step->sql, step->n, step->params);
        if (r == NULL) {
            status = t.status;
            break;
        }
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            step->rows = PQntuples(r);
            for (int row = 0; row < PQntuples(r) && step->row != NULL; row++)
                step->row(step->ctx, pg_row(r, row));
        } else {
            step->rows = strtol(PQcmdTuples(r), NULL, 10);
        }
        PQclear(r);
        if (step->required && step->rows == 0)
            status = TG_CAT_NOT_FOUND;
    }
    return tx_end(&t, status);
}

static const tg_catalog_ops pg_ops = {
    .audit_append = pg_audit_append,
    .audit_list = pg_audit_list,
    .name = "postgresql",
    .close = pg_close,
    .ping = pg_ping,
    .schema_version = pg_schema_version,
    .model_create = pg_model_create,
    .model_get = pg_model_get,
    .model_list = pg_model_list,
    .model_delete = pg_model_delete,
    .tag_list = pg_tag_list,
    .version_description = pg_version_description,
    .meta_update = pg_meta_update,
    .version_hub_tags_set = pg_version_hub_tags_set,
    .hub_tag_list = pg_hub_tag_list,
    .downloads_add = pg_downloads_add,
    .model_search = pg_model_search,
    .version_create = pg_version_create,
    .version_get = pg_version_get,
    .version_by_digest = pg_version_by_digest,
    .version_latest_published = pg_version_latest_published,
    .version_list = pg_version_list,
    .version_publish = pg_version_publish,
    .code_files = pg_code_files,
    .namespace_get = pg_namespace_get,
    .namespace_set_code = pg_namespace_set_code,
    .alias_set = pg_alias_set,
    .alias_delete = pg_alias_delete,
    .version_delete_draft = pg_version_delete_draft,
    .alias_get = pg_alias_get,
    .signing_set = pg_signing_set,
    .signing_get = pg_signing_get,
    .alias_list = pg_alias_list,
    .file_put_guarded = pg_file_put_guarded,
    .guard_check = pg_guard_check,
    .file_get = pg_file_get,
    .file_stats = pg_file_stats,
    .file_delete = pg_file_delete,
    .file_list = pg_file_list,
    .rejection_add = pg_rejection_add,
    .rejection_list = pg_rejection_list,
    .token_add = pg_token_add,
    .token_lookup = pg_token_lookup,
    .token_each = pg_token_each,
    .token_id = pg_token_id,
    .token_revoke = pg_token_revoke,
    .blob_each = pg_blob_each,
    .model_blobs = pg_model_blobs,
    .blob_referenced = pg_blob_referenced,
    .job_create_by = pg_job_create_by,
    .job_get = pg_job_get,
    .job_list = pg_job_list,
    .job_counts = pg_job_counts,
    .job_cancel = pg_job_cancel,
    .job_claim = pg_job_claim,
    .job_recover = pg_job_recover,
    .job_progress = pg_job_progress,
    .job_fail = pg_job_fail,
    .job_file_put = pg_job_file_put,
    .job_file_list = pg_job_file_list,
    .job_commit = pg_job_commit,
    .import_job_create = pg_import_job_create,
    .import_commit = pg_import_commit,
    .job_ended_urls = pg_job_ended_urls,
    .job_set_ended_url = pg_job_set_ended_url,
    .job_renew = pg_job_renew,
    .job_release = pg_job_release,
    .version_publish_files = pg_version_publish_files,
    /* versions by commit id */
    .run_steps = pg_run_steps,
    .version_by_commit = pg_version_by_commit,
    .mirror_exec = pg_mirror_exec,
};
