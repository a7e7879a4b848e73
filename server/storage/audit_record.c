/* The audit record's canonical serialization, its hash and the chain check
 * (audit_record.h). */
#include "audit_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sha256.h"

void tg_audit_time_now(char out[TG_AUDIT_TIME_LEN])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, TG_AUDIT_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned micros = (unsigned)(ts.tv_nsec / 1000) % 1000000u;
    snprintf(out + n, TG_AUDIT_TIME_LEN - n, ".%06uZ", micros);
}

static int add_field(tg_sha256 *sha, const char *name, const char *value)
{
    char head[64];
    int n = snprintf(head, sizeof head, "%s=%zu:", name, strlen(value));
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    if (tg_sha256_update(sha, head, (size_t)n) != 0 ||
        tg_sha256_update(sha, value, strlen(value)) != 0 || tg_sha256_update(sha, "\n", 1) != 0)
        return -1;
    return 0;
}

int tg_audit_hash(const tg_audit_record *r, char hash[65])
{
    char seq[24], token[24] = "", status[16];
    snprintf(seq, sizeof seq, "%" PRId64, r->seq);
    if (r->token_id > 0)
        snprintf(token, sizeof token, "%" PRId64, r->token_id);
    snprintf(status, sizeof status, "%u", r->status);
    tg_sha256 sha;
    if (tg_sha256_init(&sha, "audit") != 0)
        return -1;
    static const char magic[] = "tensorgate-audit-v1\n";
    int rc = tg_sha256_update(&sha, magic, sizeof magic - 1);
    const char *const fields[][2] = {
        {"seq", seq},
        {"time", r->time},
        {"token_id", token},
        {"namespace", r->namespace_name},
        {"action", r->action},
        {"resource", r->resource},
        {"status", status},
        {"reason", r->reason},
        {"request_id", r->request_id},
        {"client", r->client},
        {"user_agent", r->user_agent},
        {"prev_hash", r->prev_hash},
    };
    for (size_t i = 0; rc == 0 && i < sizeof fields / sizeof fields[0]; i++)
        rc = add_field(&sha, fields[i][0], fields[i][1]);
    if (rc == 0)
        rc = tg_sha256_final_hex(&sha, hash);
    tg_sha256_free(&sha);
    return rc == 0 ? 0 : -1;
}

void tg_audit_chain_init(tg_audit_chain *chain)
{
    memset(chain, 0, sizeof *chain);
}

bool tg_audit_chain_next(tg_audit_chain *chain, const tg_audit_record *r, char *why, size_t why_len)
{
    bool first = chain->checked == 0;
    bool ok = true;
    why[0] = '\0';
    char computed[65];
    if (tg_audit_hash(r, computed) != 0) {
        snprintf(why, why_len, "record %" PRId64 ": its hash could not be computed", r->seq);
        ok = false;
    } else if (strcmp(computed, r->hash) != 0) {
        snprintf(why, why_len,
                 "record %" PRId64 " edited: hash mismatch (stored %.16s..., its "
                 "fields hash to %.16s...)",
                 r->seq, r->hash, computed);
        ok = false;
    } else if (!first && r->seq != chain->last_seq + 1) {
        if (r->seq <= chain->last_seq)
            snprintf(why, why_len, "record %" PRId64 " out of order: after record %" PRId64, r->seq,
                     chain->last_seq);
        else if (r->seq == chain->last_seq + 2)
            snprintf(why, why_len,
                     "record %" PRId64 " missing: sequence gap (record %" PRId64
                     " follows record %" PRId64 ")",
                     chain->last_seq + 1, r->seq, chain->last_seq);
        else
            snprintf(why, why_len,
                     "records %" PRId64 "..%" PRId64 " missing: sequence gap "
                     "(record %" PRId64 " follows record %" PRId64 ")",
                     chain->last_seq + 1, r->seq - 1, r->seq, chain->last_seq);
        ok = false;
    } else if (!first && strcmp(r->prev_hash, chain->last_hash) != 0) {
        snprintf(why, why_len,
                 "prev_hash mismatch at %" PRId64 ": it names %.16s..., record %" PRId64
                 " hashes to %.16s...",
                 r->seq, r->prev_hash, chain->last_seq, chain->last_hash);
        ok = false;
    } else if (first && r->seq == 1 && strcmp(r->prev_hash, TG_AUDIT_GENESIS) != 0) {
        snprintf(why, why_len,
                 "prev_hash mismatch at 1: the first record's prev_hash is not "
                 "64 zeros");
        ok = false;
    }
    chain->checked++;
    if (!ok)
        chain->breaks++;
    chain->last_seq = r->seq;
    snprintf(chain->last_hash, sizeof chain->last_hash, "%s", r->hash);
    return ok;
}
