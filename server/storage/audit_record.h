/* The audit log's record and its hash chain (docs/SECURITY.md, "The audit log").
 *
 * Every write request and every authorization refusal becomes one record, appended
 * to the catalog's audit_log table (tg_catalog_audit_append): the catalog gives it
 * the next sequence number and the hash of the record before it (prev_hash), and its
 * own hash is SHA-256 over the canonical serialization below, prev_hash included. A
 * record edited, removed or inserted afterwards breaks the chain, which
 * tg_audit_chain_* (and `tensorgate audit verify`) find.
 *
 * The canonical serialization (version 1), byte for byte: the line
 * "tensorgate-audit-v1\n", then for each field in this order
 *   seq, time, token_id, namespace, action, resource, status, reason, request_id,
 *   client, user_agent, prev_hash
 * the field's name, "=", the byte length of its value in decimal, ":", the value's
 * bytes, "\n". seq and status are decimal integers; token_id is decimal, or empty for
 * an anonymous request; every other value is its text (UTF-8), "" when absent. The
 * hash is the lowercase hex SHA-256 of those bytes. The first record's prev_hash is
 * 64 zeros (TG_AUDIT_GENESIS). */
#ifndef TG_AUDIT_RECORD_H
#define TG_AUDIT_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_AUDIT_TIME_LEN 32        /* "2026-01-02T03:04:05.123456Z" */
#define TG_AUDIT_NAMESPACE_MAX 64   /* a token's namespace (TG_NAME_MAX) */
#define TG_AUDIT_ACTION_MAX 160     /* "PUT /v1/models/{org}/{name}/..." */
#define TG_AUDIT_RESOURCE_MAX 1024  /* the request's path, cut on a character */
#define TG_AUDIT_REASON_MAX 48      /* a reason code */
#define TG_AUDIT_REQUEST_ID_MAX 64  /* X-Request-Id, or one the server made */
#define TG_AUDIT_CLIENT_MAX 64      /* the client's address */
#define TG_AUDIT_USER_AGENT_MAX 256 /* User-Agent, cut on a character */
#define TG_AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

typedef struct tg_audit_record {
    int64_t seq;                                     /* 1, 2, 3... without a gap */
    char time[TG_AUDIT_TIME_LEN];                    /* UTC, microseconds, always this width */
    int64_t token_id;                                /* the token's public id; 0: anonymous */
    char namespace_name[TG_AUDIT_NAMESPACE_MAX + 1]; /* the token's namespace, "" if none */
    char action[TG_AUDIT_ACTION_MAX + 1];            /* method, space, route pattern */
    char resource[TG_AUDIT_RESOURCE_MAX + 1];        /* the concrete path */
    unsigned status;                                 /* the HTTP status answered */
    char reason[TG_AUDIT_REASON_MAX + 1];            /* the problem's reason code, "" */
    char request_id[TG_AUDIT_REQUEST_ID_MAX + 1];
    char client[TG_AUDIT_CLIENT_MAX + 1];
    char user_agent[TG_AUDIT_USER_AGENT_MAX + 1];
    char prev_hash[65];
    char hash[65];
} tg_audit_record;

/* Now, UTC, to the microsecond, in the record's fixed-width form
 * ("2026-01-02T03:04:05.123456Z"): text order is time order. */
void tg_audit_time_now(char out[TG_AUDIT_TIME_LEN]);

/* record->hash computed from its other fields (prev_hash included): 0, or -1 when
 * SHA-256 fails. */
int tg_audit_hash(const tg_audit_record *record, char hash[65]);

/* The chain check: feed the records in sequence order; each call says whether the
 * chain still holds and, when it does not, what broke, in one sentence. */
typedef struct tg_audit_chain {
    int64_t last_seq;   /* 0 before the first record */
    char last_hash[65]; /* the last record's stored hash */
    uint64_t checked;
    uint64_t breaks;
} tg_audit_chain;

void tg_audit_chain_init(tg_audit_chain *chain);
/* Checks record against the chain so far: true when it follows (its seq is the next
 * one, its prev_hash the last record's hash, its hash its own); otherwise false with
 * why saying which ("record N edited: hash mismatch", "record(s) N..M missing:
 * sequence gap", "prev_hash mismatch at N"). The chain goes on from record either
 * way, so every break is reported once. The first record fed may be any seq (a
 * check may start mid-log); a start at seq 1 must have TG_AUDIT_GENESIS. */
bool tg_audit_chain_next(tg_audit_chain *chain, const tg_audit_record *record, char *why,
                         size_t why_len);

#endif
