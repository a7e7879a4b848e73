/* Test helpers for the PostgreSQL catalog (tests/scale/with-postgres.sh gives
 * the database in TENSORGATE_TEST_PG): run SQL on it directly, empty it. Only
 * tests include this; the server reaches PostgreSQL through catalog.h alone. */
#ifndef TG_TEST_PG_H
#define TG_TEST_PG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs sql (one or more statements, no parameters) on url; true when all succeed. */
static inline bool tg_test_pg_exec(const char *url, const char *sql)
{
    PGconn *db = PQconnectdb(url);
    bool ok = PQstatus(db) == CONNECTION_OK;
    if (ok) {
        PGresult *r = PQexec(db, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok)
            fprintf(stderr, "test_pg: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "test_pg: %s", PQerrorMessage(db));
    }
    PQfinish(db);
    return ok;
}

/* The first column of the first row of sql as a number, or -1. */
static inline long long tg_test_pg_scalar(const char *url, const char *sql)
{
    PGconn *db = PQconnectdb(url);
    long long value = -1;
    if (PQstatus(db) == CONNECTION_OK) {
        PGresult *r = PQexec(db, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
            value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    PQfinish(db);
    return value;
}

/* Empties the database: every table of the catalog goes (the next open migrates
 * from nothing). */
static inline bool tg_test_pg_reset(const char *url)
{
    return tg_test_pg_exec(url, "SET client_min_messages = warning;"
                                " DROP SCHEMA public CASCADE; CREATE SCHEMA public");
}

#endif
