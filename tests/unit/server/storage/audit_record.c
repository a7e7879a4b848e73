/* Unit tests for server/storage/audit_record.c: the audit record's hash and the chain
 * check.
 * - the hash of a known record is the one Python's hashlib gives for the canonical
 *   serialization of docs/SECURITY.md (computed apart, written here as a constant);
 * - every field takes part: changing any one changes the hash;
 * - the chain check accepts a good chain and names each break: an edited record
 *   (hash mismatch), a missing one (sequence gap), a prev_hash that names another
 *   record, a first record whose prev_hash is not the genesis. */
#include <string.h>

#include "audit_record.h"
#include "test.h"

static tg_audit_record sample(void)
{
    tg_audit_record r;
    memset(&r, 0, sizeof r);
    r.seq = 7;
    snprintf(r.time, sizeof r.time, "2026-11-27T19:07:36.123456Z");
    r.token_id = 3;
    snprintf(r.namespace_name, sizeof r.namespace_name, "acme");
    snprintf(r.action, sizeof r.action, "PUT /v1/models/{org}/{name}/versions/{rev}/files/{path*}");
    snprintf(r.resource, sizeof r.resource, "/v1/models/acme/m/versions/1/files/a.safetensors");
    r.status = 201;
    snprintf(r.request_id, sizeof r.request_id, "req-1");
    snprintf(r.client, sizeof r.client, "127.0.0.1");
    snprintf(r.user_agent, sizeof r.user_agent, "curl/8 \xc3\xa9");
    memset(r.prev_hash, 0, sizeof r.prev_hash);
    for (int i = 0; i < 32; i++)
        memcpy(r.prev_hash + 2 * i, "ab", 2);
    return r;
}

TEST(hash_matches_the_documented_serialization)
{
    tg_audit_record r = sample();
    char hash[65];
    CHECK(tg_audit_hash(&r, hash) == 0);
    /* /usr/bin/python3: hashlib.sha256(b"tensorgate-audit-v1\n" + b"".join(
     *   name + b"=" + str(len(v)).encode() + b":" + v + b"\n" for name, v in fields)) */
    CHECK_STR(hash, "6d0ac54a93608dce99992b9c16da9cd65d2db9f80153e837e02d3955313d6a39");
}

TEST(every_field_takes_part)
{
    tg_audit_record base = sample();
    char want[65], got[65];
    CHECK(tg_audit_hash(&base, want) == 0);
    for (int field = 0; field < 12; field++) {
        tg_audit_record r = base;
        switch (field) {
        case 0:
            r.seq++;
            break;
        case 1:
            r.time[5] = '9';
            break;
        case 2:
            r.token_id = 0;
            break;
        case 3:
            r.namespace_name[0] = 'b';
            break;
        case 4:
            r.action[0] = 'P' + 1;
            break;
        case 5:
            r.resource[1] = 'w';
            break;
        case 6:
            r.status = 403;
            break;
        case 7:
            snprintf(r.reason, sizeof r.reason, "forbidden");
            break;
        case 8:
            r.request_id[0] = 'x';
            break;
        case 9:
            r.client[0] = '8';
            break;
        case 10:
            r.user_agent[0] = 'C';
            break;
        default:
            r.prev_hash[0] = 'c';
            break;
        }
        CHECK(tg_audit_hash(&r, got) == 0);
        CHECK(strcmp(got, want) != 0);
    }
    /* the length prefix keeps field boundaries: moving a byte between two fields
     * changes the hash */
    tg_audit_record a = base, b = base;
    snprintf(a.request_id, sizeof a.request_id, "ab");
    snprintf(a.client, sizeof a.client, "c");
    snprintf(b.request_id, sizeof b.request_id, "a");
    snprintf(b.client, sizeof b.client, "bc");
    CHECK(tg_audit_hash(&a, want) == 0 && tg_audit_hash(&b, got) == 0);
    CHECK(strcmp(got, want) != 0);
}

/* A chain of n records, seq 1..n, linked and hashed. */
static void make_chain(tg_audit_record *rs, int n)
{
    for (int i = 0; i < n; i++) {
        rs[i] = sample();
        rs[i].seq = i + 1;
        rs[i].status = 200 + (unsigned)i;
        snprintf(rs[i].prev_hash, sizeof rs[i].prev_hash, "%s",
                 i == 0 ? TG_AUDIT_GENESIS : rs[i - 1].hash);
        CHECK(tg_audit_hash(&rs[i], rs[i].hash) == 0);
    }
}

/* Feeds rs[0..n) skipping index skip (-1: none): the number of breaks, the first
 * one's sentence in why. */
static int run_chain(const tg_audit_record *rs, int n, int skip, char *why, size_t why_len)
{
    tg_audit_chain chain;
    tg_audit_chain_init(&chain);
    int breaks = 0;
    why[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i == skip)
            continue;
        char one[256];
        if (!tg_audit_chain_next(&chain, &rs[i], one, sizeof one) && breaks++ == 0)
            snprintf(why, why_len, "%s", one);
    }
    return breaks;
}

TEST(chain_check_names_each_break)
{
    tg_audit_record rs[5];
    make_chain(rs, 5);
    char why[256];
    CHECK(run_chain(rs, 5, -1, why, sizeof why) == 0);

    tg_audit_record edited[5];
    memcpy(edited, rs, sizeof rs);
    edited[2].status = 500; /* record 3 */
    CHECK(run_chain(edited, 5, -1, why, sizeof why) == 1);
    CHECK(strncmp(why, "record 3 edited: hash mismatch", 30) == 0);

    CHECK(run_chain(rs, 5, 2, why, sizeof why) == 1);
    CHECK(strncmp(why, "record 3 missing: sequence gap", 30) == 0);

    /* record 4 rewritten whole (its hash recomputed) with another prev_hash */
    memcpy(edited, rs, sizeof rs);
    snprintf(edited[3].prev_hash, sizeof edited[3].prev_hash, "%s", TG_AUDIT_GENESIS);
    CHECK(tg_audit_hash(&edited[3], edited[3].hash) == 0);
    CHECK(run_chain(edited, 5, -1, why, sizeof why) >= 1);
    CHECK(strncmp(why, "prev_hash mismatch at 4", 23) == 0);

    memcpy(edited, rs, sizeof rs);
    snprintf(edited[0].prev_hash, sizeof edited[0].prev_hash, "%s", rs[1].hash);
    CHECK(tg_audit_hash(&edited[0], edited[0].hash) == 0);
    CHECK(run_chain(edited, 1, -1, why, sizeof why) == 1);
    CHECK(strncmp(why, "prev_hash mismatch at 1", 23) == 0);

    /* a check may start mid-log */
    CHECK(run_chain(rs + 2, 3, -1, why, sizeof why) == 0);
}

TEST(time_is_fixed_width_utc)
{
    char t[TG_AUDIT_TIME_LEN];
    tg_audit_time_now(t);
    CHECK_EQ_U64(strlen(t), 27);
    CHECK(t[4] == '-' && t[10] == 'T' && t[19] == '.' && t[26] == 'Z');
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(hash_matches_the_documented_serialization);
    RUN(every_field_takes_part);
    RUN(chain_check_names_each_break);
    RUN(time_is_fixed_width_utc);
    return test_report(argv[0]);
}
