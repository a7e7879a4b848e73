/* libtgclient's HTTP client (clients/c/tensorgate_client.h) against the real server:
 * every call, a resumed download (a wrong prefix left in the part file is started
 * over once), SHA-256 mismatch detection, bounded parallel batches, retries on 429
 * with Retry-After (a second server with --rate-limit 1) and on connection refused
 * (a server that starts late), and no retry on 403 or 404; against a hostile peer
 * (tests/client/hostile_peer.py): a body past the listed or announced size, a
 * trickle and no answer (the stall timeout), file lists with unsafe names. */
#include <pthread.h>

#include "harness.h"
#include "tensorgate_client.h"

static const char *write_token, *read_token;
static tgc_client *cl;
static it_buf model_file; /* model.safetensors: w F32 [4,3], big F32 [256,256] */
static char model_path[512], pickle_path[512], model_sha[65];

static tgc_client *connect_to(const char *base, const char *token, unsigned backoff_ms,
                              unsigned retries)
{
    tgc_options o = {.base_url = base,
                     .token = token,
                     .backoff_ms = backoff_ms,
                     .max_retries = retries,
                     .max_backoff_ms = 2000};
    tgc_error e;
    tgc_client *c = tgc_connect(&o, &e);
    if (c == NULL)
        fprintf(stderr, "tgc_connect: %s: %s\n", e.reason, e.detail);
    return c;
}

static bool write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

TEST(parse_ref)
{
    char m[160], r[160];
    tgc_error e;
    CHECK(tgc_parse_ref("acme/tiny@stable", m, sizeof m, r, sizeof r, &e) == 0);
    CHECK_STR(m, "acme/tiny");
    CHECK_STR(r, "stable");
    CHECK(tgc_parse_ref("acme/tiny", m, sizeof m, r, sizeof r, &e) == 0);
    CHECK_STR(r, "latest");
    CHECK(tgc_parse_ref("acme", m, sizeof m, r, sizeof r, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_USAGE);
    CHECK(tgc_parse_ref("acme/../x", m, sizeof m, r, sizeof r, &e) == -1);
    CHECK(tgc_parse_ref("acme/x@", m, sizeof m, r, sizeof r, &e) == -1);
    tgc_options bad = {.base_url = "ftp://x"};
    CHECK(tgc_connect(&bad, &e) == NULL);
    CHECK_STR(e.reason, TGC_REASON_USAGE);
}

TEST(create_upload_publish)
{
    tgc_error e;
    bool existed = true;
    CHECK(tgc_create_model(cl, "acme/cl", "client test", &existed, &e) == 0);
    CHECK(!existed);
    CHECK(tgc_create_model(cl, "acme/cl", NULL, &existed, &e) == 0);
    CHECK(existed);
    int v = 0;
    CHECK(tgc_create_version(cl, "acme/cl", &v, &e) == 0);
    CHECK(v == 1);
    json_t *f = NULL;
    CHECK(tgc_upload(cl, "acme/cl", v, "model.safetensors", model_path, &f, &e) == 0);
    CHECK_STR(json_string_value(json_object_get(f, "sha256")), model_sha);
    CHECK(json_integer_value(json_object_get(f, "tensors")) == 2);
    json_decref(f);
    /* a pickle is refused with the server's reason, status and format */
    f = NULL;
    CHECK(tgc_upload(cl, "acme/cl", v, "pytorch_model.bin", pickle_path, &f, &e) == -1);
    CHECK(f == NULL);
    CHECK(e.status == 415);
    CHECK_STR(e.reason, "refused_format");
    CHECK_STR(e.format, "pickle");
    CHECK(strstr(e.detail, "pickle") != NULL);
    /* a missing local file is the client's own error */
    CHECK(tgc_upload(cl, "acme/cl", v, "x.json", "/nonexistent/x.json", NULL, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_IO);
    json_t *ver = NULL;
    CHECK(tgc_publish(cl, "acme/cl", v, &ver, &e) == 0);
    CHECK_STR(json_string_value(json_object_get(ver, "state")), "published");
    json_decref(ver);
    CHECK(tgc_set_alias(cl, "acme/cl", "stable", v, &e) == 0);
    /* publishing again is the server's 409, not retried */
    unsigned long before = tgc_attempts(cl);
    CHECK(tgc_publish(cl, "acme/cl", v, NULL, &e) == -1);
    CHECK(e.status == 409);
    CHECK_STR(e.reason, "version_published");
    CHECK(tgc_attempts(cl) - before == 1);
}

TEST(resolve_and_lists)
{
    tgc_error e;
    tgc_resolved r;
    CHECK(tgc_resolve(cl, "acme/cl", "latest", &r, &e) == 0);
    CHECK(r.version == 1);
    CHECK_STR(r.state, "published");
    CHECK(strlen(r.digest) == 64);
    CHECK(json_array_size(json_object_get(r.version_json, "files")) == 1);
    json_decref(r.version_json);
    CHECK(tgc_resolve(cl, "acme/cl", "stable", &r, &e) == 0);
    CHECK(r.version == 1);
    json_decref(r.version_json);
    unsigned long before = tgc_attempts(cl);
    CHECK(tgc_resolve(cl, "acme/cl", "9", &r, &e) == -1);
    CHECK(e.status == 404);
    CHECK_STR(e.reason, "version_not_found");
    CHECK(tgc_attempts(cl) - before == 1); /* never retried */

    json_t *j = NULL;
    CHECK(tgc_list_models(cl, NULL, &j, &e) == 0);
    CHECK(json_array_size(j) >= 1);
    json_decref(j);
    CHECK(tgc_list_models(cl, "acme/c", &j, &e) == 0);
    CHECK(json_array_size(j) == 1);
    json_decref(j);
    CHECK(tgc_get_model(cl, "acme/cl", &j, &e) == 0);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "aliases"), "stable")) == 1);
    json_decref(j);
    CHECK(tgc_list_versions(cl, "acme/cl", &j, &e) == 0);
    CHECK(json_array_size(j) == 1);
    CHECK(json_integer_value(json_object_get(json_array_get(j, 0), "version")) == 1);
    json_decref(j);
    CHECK(tgc_list_files(cl, "acme/cl", "1", &j, &e) == 0);
    CHECK(json_array_size(j) == 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(j, 0), "path")),
              "model.safetensors");
    json_decref(j);
    CHECK(tgc_list_tensors(cl, "acme/cl", NULL, &j, &e) == 0);
    CHECK(json_array_size(j) == 2);
    json_decref(j);
    CHECK(tgc_get_header(cl, "acme/cl", "latest", "model.safetensors", &j, &e) == 0);
    CHECK(json_array_size(json_object_get(j, "tensors")) == 2);
    CHECK(json_integer_value(json_object_get(j, "data_start")) ==
          (json_int_t)(8 + it_header_len(&model_file)));
    json_decref(j);
    CHECK(tgc_get_header(cl, "acme/cl", "latest", "nope.safetensors", &j, &e) == -1);
    CHECK(e.status == 404);
    CHECK(tgc_get_model(cl, "acme/none", &j, &e) == -1);
    CHECK_STR(e.reason, "model_not_found");
}

/* the registry calls: metadata, search, deprecation, deletion, aliases, quota */
TEST(registry_calls)
{
    tgc_error e;
    int v = 0;
    json_t *j = NULL;
    CHECK(tgc_create_model(cl, "acme/reg", NULL, NULL, &e) == 0);
    for (int i = 1; i <= 2; i++) {
        CHECK(tgc_create_version(cl, "acme/reg", &v, &e) == 0);
        CHECK(v == i);
        CHECK(tgc_upload(cl, "acme/reg", v, "model.safetensors", model_path, NULL, &e) == 0);
        CHECK(tgc_publish(cl, "acme/reg", v, NULL, &e) == 0);
    }
    json_t *patch = json_pack("{s:s,s:{s:s,s:s}}", "description", "Registry test", "tags", "team",
                              "vision", "stage", "prod");
    CHECK(tgc_patch_metadata(cl, "acme/reg", NULL, patch, &j, &e) == 0);
    json_decref(patch);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "tags"), "team")), "vision");
    json_decref(j);
    patch = json_pack("{s:{s:s}}", "tags", "eval", "ok");
    CHECK(tgc_patch_metadata(cl, "acme/reg", "1", patch, &j, &e) == 0);
    CHECK(json_integer_value(json_object_get(j, "version")) == 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "tags"), "eval")), "ok");
    json_decref(j);
    json_decref(patch);
    patch = json_pack("{s:{s:s}}", "tags", "bad key", "x");
    CHECK(tgc_patch_metadata(cl, "acme/reg", NULL, patch, NULL, &e) == -1);
    CHECK(e.status == 400);
    CHECK_STR(e.reason, "invalid_tag");
    json_decref(patch);

    const char *tags[9] = {"team=vision", "stage", "a", "b", "c", "d", "e", "f", "g"};
    tgc_model_query q = {.text = "REG", .tags = tags, .tag_count = 2};
    CHECK(tgc_search_models(cl, &q, &j, &e) == 0);
    CHECK(json_array_size(j) == 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(j, 0), "name")), "acme/reg");
    json_decref(j);
    q = (tgc_model_query){.sort = "downloads", .limit = 1};
    CHECK(tgc_search_models(cl, &q, &j, &e) == 0);
    CHECK(json_array_size(j) == 1);
    json_decref(j);
    unsigned long before = tgc_attempts(cl);
    q = (tgc_model_query){.tags = tags, .tag_count = 9};
    CHECK(tgc_search_models(cl, &q, &j, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_USAGE);
    q = (tgc_model_query){.sort = "size"};
    CHECK(tgc_search_models(cl, &q, &j, &e) == -1);
    CHECK(tgc_get_namespace(cl, "a/b", &j, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_USAGE);
    CHECK(tgc_attempts(cl) == before); /* nothing was sent */

    CHECK(tgc_deprecate(cl, "acme/reg", "2", "regressed", &j, &e) == 0);
    CHECK(json_is_true(json_object_get(j, "deprecated")));
    CHECK_STR(json_string_value(json_object_get(j, "deprecation_reason")), "regressed");
    json_decref(j);
    tgc_resolved r;
    CHECK(tgc_resolve(cl, "acme/reg", "latest", &r, &e) == 0);
    CHECK(r.version == 1); /* latest skips the deprecated version */
    json_decref(r.version_json);
    CHECK(tgc_undeprecate(cl, "acme/reg", "2", &j, &e) == 0);
    CHECK(!json_is_true(json_object_get(j, "deprecated")));
    json_decref(j);

    CHECK(tgc_delete_alias(cl, "acme/reg", "best", &e) == -1);
    CHECK(e.status == 404);
    CHECK_STR(e.reason, "alias_not_found");
    CHECK(tgc_set_alias(cl, "acme/reg", "best", 1, &e) == 0);
    CHECK(tgc_delete_alias(cl, "acme/reg", "best", &e) == 0);

    CHECK(tgc_delete_version(cl, "acme/reg", "1", &e) == -1);
    CHECK(e.status == 403); /* a published version: admin only */
    tgc_client *admin = connect_to(it_srv.base, it_token("admin", "acme"), 50, 3);
    CHECK(admin != NULL);
    CHECK(tgc_delete_version(admin, "acme/reg", "1", &e) == 0);
    CHECK(tgc_resolve(cl, "acme/reg", "1", &r, &e) == -1);
    CHECK(e.status == 410);
    CHECK_STR(e.reason, "version_deleted");

    CHECK(tgc_get_namespace(cl, "acme", &j, &e) == 0);
    CHECK(json_integer_value(json_object_get(j, "usage_bytes")) > 0);
    json_decref(j);
    CHECK(tgc_set_namespace_quota(cl, "acme", 1000, false, NULL, &e) == -1);
    CHECK(e.status == 403);
    CHECK(tgc_set_namespace_quota(admin, "acme", 1ull << 40, false, &j, &e) == 0);
    CHECK(json_integer_value(json_object_get(j, "quota_bytes")) == (json_int_t)(1ull << 40));
    CHECK(!json_is_true(json_object_get(j, "quota_default")));
    json_decref(j);
    CHECK(tgc_set_namespace_quota(admin, "acme", 0, true, &j, &e) == 0);
    CHECK(json_is_true(json_object_get(j, "quota_default")));
    json_decref(j);
    tgc_close(admin);
}

TEST(tensors)
{
    tgc_error e;
    uint64_t data_start = 8 + it_header_len(&model_file);
    unsigned char buf[512];
    tgc_tensor_info info;
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "latest", "w", NULL, buf, sizeof buf, &info, &e) ==
          0);
    CHECK(info.bytes == 48);
    CHECK_STR(info.dtype, "F32");
    CHECK_STR(info.shape, "[4,3]");
    CHECK(memcmp(buf, model_file.data + data_start, 48) == 0);
    /* a slice: rows 1..2 are file bytes 12..35 of the tensor */
    tgc_tensor_request rows = {.slice = "1:3"};
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "1", "w", &rows, buf, sizeof buf, &info, &e) == 0);
    CHECK(info.bytes == 24);
    CHECK_STR(info.shape, "[2,3]");
    CHECK(memcmp(buf, model_file.data + data_start + 12, 24) == 0);
    /* slice + dtype: the same bytes as the route answers for that query */
    tgc_tensor_request conv = {.slice = "1:3,::2", .dtype = "F16"};
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "1", "w", &conv, buf, sizeof buf, &info, &e) == 0);
    CHECK_STR(info.dtype, "F16");
    CHECK_STR(info.source_dtype, "F32");
    CHECK_STR(info.shape, "[2,2]");
    it_response r = it_get("/v1/models/acme/cl/versions/1/tensors/w?slice=1:3,::2&dtype=F16");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == 8 && info.bytes == 8 && memcmp(buf, r.body.data, 8) == 0);
    it_response_free(&r);
    /* the caller's buffer is too small */
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "1", "big", NULL, buf, sizeof buf, &info, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_TOO_SMALL);
    /* the server's refusals */
    tgc_tensor_request bad = {.slice = "9"};
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "1", "w", &bad, buf, sizeof buf, &info, &e) == -1);
    CHECK(e.status == 400);
    CHECK_STR(e.reason, "slice_out_of_range");
    CHECK(tgc_tensor_to_buffer(cl, "acme/cl", "1", "nope", NULL, buf, sizeof buf, &info, &e) == -1);
    CHECK_STR(e.reason, "tensor_not_found");
    /* to a file, as .npy */
    char out[600];
    snprintf(out, sizeof out, "%s/w.npy", it_root_dir);
    tgc_tensor_request npy = {.slice = "::-1", .npy = true};
    CHECK(tgc_tensor_to_file(cl, "acme/cl", "1", "w", &npy, out, &info, &e) == 0);
    it_buf got = {0};
    CHECK(it_read_file(out, &got));
    CHECK(got.len == info.bytes && got.len > 48 && memcmp(got.data, "\x93NUMPY", 6) == 0);
    it_buf_free(&got);
    char part[700];
    snprintf(part, sizeof part, "%s.part", out);
    CHECK(!exists(part));
}

TEST(range)
{
    tgc_error e;
    unsigned char buf[64];
    size_t got = 0;
    CHECK(tgc_fetch_range(cl, "acme/cl", "1", "model.safetensors", 0, 8, buf, sizeof buf, &got,
                          &e) == 0);
    CHECK(got == 8 && memcmp(buf, model_file.data, 8) == 0);
    CHECK(tgc_fetch_range(cl, "acme/cl", "1", "model.safetensors", 100, 40, buf, sizeof buf, &got,
                          &e) == 0);
    CHECK(got == 40 && memcmp(buf, model_file.data + 100, 40) == 0);
    /* the last bytes: fewer than asked */
    CHECK(tgc_fetch_range(cl, "acme/cl", "1", "model.safetensors", model_file.len - 10, 40, buf,
                          sizeof buf, &got, &e) == 0);
    CHECK(got == 10 && memcmp(buf, model_file.data + model_file.len - 10, 10) == 0);
    CHECK(tgc_fetch_range(cl, "acme/cl", "1", "model.safetensors", model_file.len + 5, 4, buf,
                          sizeof buf, &got, &e) == -1);
    CHECK(e.status == 416);
}

TEST(download_resume_and_sha)
{
    tgc_error e;
    char dest[600], part[700];
    snprintf(dest, sizeof dest, "%s/dl.safetensors", it_root_dir);
    snprintf(part, sizeof part, "%s.part", dest);
    /* whole, checked against the server's X-Content-SHA256 */
    CHECK(tgc_download(cl, "acme/cl", "latest", "model.safetensors", dest, NULL, &e) == 0);
    it_buf got = {0};
    CHECK(it_read_file(dest, &got));
    CHECK(got.len == model_file.len && memcmp(got.data, model_file.data, got.len) == 0);
    it_buf_free(&got);
    CHECK(!exists(part));
    unlink(dest);

    /* resume: a correct first half in the part file is completed */
    CHECK(write_file(part, model_file.data, model_file.len / 2));
    CHECK(tgc_download(cl, "acme/cl", "1", "model.safetensors", dest, model_sha, &e) == 0);
    CHECK(it_read_file(dest, &got));
    CHECK(got.len == model_file.len && memcmp(got.data, model_file.data, got.len) == 0);
    it_buf_free(&got);
    CHECK(!exists(part));
    unlink(dest);

    /* a wrong first half: the client resumed (Range), the digest differed, and the
     * file was started over from byte 0, once, by itself: two attempts, whole */
    unsigned char *junk = malloc(model_file.len / 2);
    CHECK(junk != NULL);
    if (junk != NULL) {
        memset(junk, 0x5a, model_file.len / 2);
        CHECK(write_file(part, junk, model_file.len / 2));
    }
    unsigned long attempts = tgc_attempts(cl);
    CHECK(tgc_download(cl, "acme/cl", "1", "model.safetensors", dest, model_sha, &e) == 0);
    CHECK(tgc_attempts(cl) - attempts == 2);
    CHECK(it_read_file(dest, &got));
    CHECK(got.len == model_file.len && memcmp(got.data, model_file.data, got.len) == 0);
    it_buf_free(&got);
    CHECK(!exists(part));
    unlink(dest);

    /* a wrong expected digest: a whole download is not started over */
    attempts = tgc_attempts(cl);
    CHECK(tgc_download(cl, "acme/cl", "1", "model.safetensors", dest,
                       "0000000000000000000000000000000000000000000000000000000000000000",
                       &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_SHA256);
    CHECK(tgc_attempts(cl) - attempts == 1);
    CHECK(!exists(dest) && !exists(part));
    /* ... and after a wrong prefix, started over once only: then the mismatch */
    if (junk != NULL) {
        CHECK(write_file(part, junk, model_file.len / 2));
        free(junk);
    }
    attempts = tgc_attempts(cl);
    CHECK(tgc_download(cl, "acme/cl", "1", "model.safetensors", dest,
                       "0000000000000000000000000000000000000000000000000000000000000000",
                       &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_SHA256);
    CHECK(tgc_attempts(cl) - attempts == 2);
    CHECK(!exists(dest) && !exists(part));

    /* a part file already complete: 416 from the server, checked, renamed */
    CHECK(write_file(part, model_file.data, model_file.len));
    CHECK(tgc_download(cl, "acme/cl", "1", "model.safetensors", dest, model_sha, &e) == 0);
    CHECK(exists(dest) && !exists(part));
    unlink(dest);

    /* a part file longer than the file (size known): started over, not a mismatch */
    {
        unsigned char *longer = calloc(1, model_file.len + 100);
        CHECK(longer != NULL);
        if (longer != NULL) {
            CHECK(write_file(part, longer, model_file.len + 100));
            free(longer);
        }
        tgc_batch *b = tgc_batch_new(cl);
        CHECK(tgc_batch_add_download(b, "acme/cl", "1", "model.safetensors", dest, model_sha,
                                     model_file.len) == 0);
        CHECK(tgc_batch_run(b, 1, NULL, NULL, NULL) == 0);
        tgc_batch_free(b);
        CHECK(exists(dest) && !exists(part));
        it_buf whole = {0};
        CHECK(it_read_file(dest, &whole) && whole.len == model_file.len &&
              memcmp(whole.data, model_file.data, whole.len) == 0);
        it_buf_free(&whole);
        unlink(dest);
    }

    /* a missing file is 404, once */
    unsigned long before = tgc_attempts(cl);
    CHECK(tgc_download(cl, "acme/cl", "1", "nope.safetensors", dest, NULL, &e) == -1);
    CHECK(e.status == 404);
    CHECK_STR(e.reason, "file_not_found");
    CHECK(tgc_attempts(cl) - before == 1);
    CHECK(!exists(dest));
}

TEST(no_retry_on_403)
{
    tgc_client *rc = connect_to(it_srv.base, read_token, 50, 4);
    CHECK(rc != NULL);
    if (rc == NULL)
        return;
    tgc_error e;
    int v = 0;
    CHECK(tgc_create_version(rc, "acme/cl", &v, &e) == -1);
    CHECK(e.status == 403);
    CHECK_STR(e.reason, "forbidden");
    CHECK(tgc_attempts(rc) == 1);
    tgc_close(rc);
    /* a token the server does not know: 401, once */
    rc = connect_to(it_srv.base, "not-a-token", 50, 4);
    CHECK(tgc_create_model(rc, "acme/x", NULL, NULL, &e) == -1);
    CHECK(e.status == 401);
    CHECK_STR(e.reason, "unauthorized");
    CHECK(tgc_attempts(rc) == 1);
    tgc_close(rc);
}

TEST(scan)
{
    tgc_error e;
    json_t *v = NULL;
    CHECK(tgc_scan(cl, model_path, NULL, &v, &e) == 0);
    CHECK(json_is_true(json_object_get(v, "valid")));
    CHECK_STR(json_string_value(json_object_get(v, "sha256")), model_sha);
    json_decref(v);
    v = NULL;
    CHECK(tgc_scan(cl, pickle_path, "sidecar", &v, &e) == 0);
    CHECK(json_is_false(json_object_get(v, "valid")));
    CHECK_STR(json_string_value(json_object_get(v, "reason")), "refused_format");
    CHECK_STR(json_string_value(json_object_get(v, "format")), "pickle");
    json_decref(v);
    CHECK(tgc_scan(cl, pickle_path, "nonsense", &v, &e) == -1);
    CHECK(e.status == 400);
}

/* tgc_scan_with: the name goes to the server (a code name is refused as code, and the
 * refusal names it), the SARIF form comes back as a log; NULL options are tgc_scan's
 * default; a format the server does not know is its 400 invalid_format. */
TEST(scan_with_options)
{
    tgc_error e;
    json_t *v = NULL;
    tgc_scan_options named = {.kind = "sidecar", .name = "modeling_evil.py"};
    CHECK(tgc_scan_with(cl, model_path, &named, &v, &e) == 0);
    CHECK_STR(json_string_value(json_object_get(v, "reason")), "code_python");
    const char *detail = json_string_value(json_object_get(v, "detail"));
    CHECK(detail != NULL && strstr(detail, "modeling_evil.py") != NULL);
    json_decref(v);
    v = NULL;
    CHECK(tgc_scan_with(cl, model_path, NULL, &v, &e) == 0);
    CHECK(json_is_true(json_object_get(v, "valid")));
    json_decref(v);
    v = NULL;
    tgc_scan_options sarif = {.name = "weights v1.bin", .format = "sarif"};
    CHECK(tgc_scan_with(cl, pickle_path, &sarif, &v, &e) == 0);
    CHECK_STR(json_string_value(json_object_get(v, "version")), "2.1.0");
    json_t *run = json_array_get(json_object_get(v, "runs"), 0);
    json_t *first = json_array_get(json_object_get(run, "results"), 0);
    CHECK_STR(json_string_value(json_object_get(first, "ruleId")), "refused_format");
    json_t *artifact = json_array_get(json_object_get(run, "artifacts"), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(artifact, "location"), "uri")),
              "weights%20v1.bin");
    json_decref(v);
    v = NULL;
    tgc_scan_options bad = {.format = "xml"};
    CHECK(tgc_scan_with(cl, model_path, &bad, &v, &e) == -1);
    CHECK(e.status == 400);
    CHECK_STR(e.reason, "invalid_format");
    CHECK(v == NULL);
}

static size_t items_seen;
static uint64_t last_done, last_total;

static void on_item(void *user, size_t index, int rc, const tgc_error *e, const json_t *j)
{
    (void)user;
    (void)j;
    (void)e;
    (void)index;
    (void)rc;
    items_seen++;
}

static void on_progress(void *user, uint64_t done, uint64_t total, size_t items_done,
                        size_t items_total)
{
    (void)user;
    (void)items_done;
    (void)items_total;
    last_done = done;
    last_total = total;
}

TEST(batches)
{
    tgc_error e;
    int v = 0;
    CHECK(tgc_create_version(cl, "acme/cl", &v, &e) == 0);
    char names[6][32], locals[6][600], tname[6][16];
    tgc_batch *b = tgc_batch_new(cl);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    for (int i = 0; i < 6; i++) {
        snprintf(names[i], sizeof names[i], "part-%d.safetensors", i);
        snprintf(locals[i], sizeof locals[i], "%s/up-%d.safetensors", it_root_dir, i);
        it_buf f = {0};
        snprintf(tname[i], sizeof tname[i], "x%d", i); /* a tensor is in one shard only */
        it_tensor_spec t = {tname[i], "F32", 2, {64, 64 + (uint64_t)i}};
        it_build_safetensors(&f, &t, 1, NULL, (unsigned)i + 7);
        CHECK(write_file(locals[i], f.data, f.len));
        it_buf_free(&f);
        CHECK(tgc_batch_add_upload(b, "acme/cl", v, names[i], locals[i]) == i);
    }
    CHECK(tgc_batch_add_upload(b, "acme/cl", v, "bad.safetensors", pickle_path) == 6);
    items_seen = 0;
    CHECK(tgc_peak_parallel(cl) == 1); /* single calls so far */
    CHECK(tgc_batch_run(b, 3, on_progress, on_item, NULL) == 1);
    CHECK(tgc_peak_parallel(cl) == 3); /* 7 uploads, never more than 3 at once */
    CHECK(items_seen == 7);
    CHECK(last_total > 0 && last_done <= last_total);
    const tgc_error *be = NULL;
    CHECK(tgc_batch_result(b, 0, &be) == 0);
    CHECK(tgc_batch_result(b, 6, &be) == -1 && be != NULL);
    if (be != NULL)
        CHECK_STR(be->reason, "refused_format");
    tgc_batch_free(b);
    int prc = tgc_publish(cl, "acme/cl", v, NULL, &e);
    CHECK(prc == 0);
    if (prc != 0)
        fprintf(stderr, "publish: %ld %s: %s\n", e.status, e.reason, e.detail);

    /* download them all back, 2 at a time, and one that is not there */
    json_t *files = NULL;
    CHECK(tgc_list_files(cl, "acme/cl", "latest", &files, &e) == 0);
    CHECK(json_array_size(files) == 6);
    b = tgc_batch_new(cl);
    size_t i;
    json_t *f;
    char dests[6][600];
    json_array_foreach(files, i, f)
    {
        snprintf(dests[i], sizeof dests[i], "%s/down-%zu", it_root_dir, i);
        CHECK(tgc_batch_add_download(
                  b, "acme/cl", "latest", json_string_value(json_object_get(f, "path")), dests[i],
                  json_string_value(json_object_get(f, "sha256")),
                  (uint64_t)json_integer_value(json_object_get(f, "size"))) == (long)i);
    }
    char missing[600];
    snprintf(missing, sizeof missing, "%s/down-missing", it_root_dir);
    CHECK(tgc_batch_add_download(b, "acme/cl", "latest", "missing.json", missing, NULL, 0) == 6);
    CHECK(tgc_batch_count(b) == 7);
    CHECK(tgc_batch_run(b, 2, NULL, NULL, NULL) == 1);
    CHECK(tgc_batch_result(b, 6, &be) == -1 && be != NULL && be->status == 404);
    json_array_foreach(files, i, f)
    {
        it_buf got = {0};
        CHECK(it_read_file(dests[i], &got));
        char hex[65];
        it_sha256_hex(got.data, got.len, hex);
        CHECK_STR(hex, json_string_value(json_object_get(f, "sha256")));
        it_buf_free(&got);
    }
    tgc_batch_free(b);

    /* the same files in parallel, each against a digest it does not have (what a pull
     * of a corrupted blob meets): every one refused as sha256, nothing left behind,
     * neither the file nor its preallocated part */
    b = tgc_batch_new(cl);
    json_array_foreach(files, i, f)
    {
        unlink(dests[i]);
        CHECK(tgc_batch_add_download(
                  b, "acme/cl", "latest", json_string_value(json_object_get(f, "path")), dests[i],
                  "00000000000000000000000000000000000000000000000000000000000000ff",
                  (uint64_t)json_integer_value(json_object_get(f, "size"))) == (long)i);
    }
    CHECK(tgc_batch_run(b, 3, NULL, NULL, NULL) == json_array_size(files));
    json_array_foreach(files, i, f)
    {
        CHECK(tgc_batch_result(b, i, &be) == -1 && be != NULL);
        if (be != NULL)
            CHECK_STR(be->reason, TGC_REASON_SHA256);
        char part[sizeof dests + 8];
        snprintf(part, sizeof part, "%s.part", dests[i]);
        CHECK(!exists(dests[i]) && !exists(part));
    }
    tgc_batch_free(b);
    json_decref(files);
}

/* ---------- retries against servers of this test's own ---------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts `tensorgate serve` on port with a fresh data directory after delay_ms,
 * with extra flags; returns its pid (the child sleeps, then execs). */
static pid_t spawn_server(int port, int delay_ms, const char *name, const char *flag1,
                          const char *val1, const char *flag2, const char *val2)
{
    char data[600], listen[64], log[700];
    snprintf(data, sizeof data, "%s/%s", it_root_dir, name);
    snprintf(log, sizeof log, "%s/%s.log", it_root_dir, name);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1);
    }
    struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    execl(it_binary, "tensorgate", "serve", "--listen", listen, "--data", data, flag1, val1, flag2,
          val2, (char *)NULL);
    _exit(127);
}

static void stop_server(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

TEST(retry_connection_refused_until_the_server_starts)
{
    int port = free_port();
    CHECK(port > 0);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    /* nothing listens: the retries end with connection_failed */
    tgc_client *c = connect_to(base, NULL, 10, 2);
    json_t *j = NULL;
    tgc_error e;
    CHECK(tgc_list_models(c, NULL, &j, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_CONNECTION);
    CHECK(e.status == 0);
    CHECK(tgc_attempts(c) == 3);
    tgc_close(c);
    /* a server that starts 1.5 s late is reached by the retries */
    pid_t pid = spawn_server(port, 1500, "late", NULL, NULL, NULL, NULL);
    c = connect_to(base, NULL, 100, 10);
    double t0 = mono();
    CHECK(tgc_list_models(c, NULL, &j, &e) == 0);
    if (j == NULL)
        fprintf(stderr, "late server: %s: %s\n", e.reason, e.detail);
    CHECK(json_is_array(j) && json_array_size(j) == 0);
    json_decref(j);
    CHECK(tgc_attempts(c) > 1);
    CHECK(mono() - t0 >= 1.0);
    tgc_close(c);
    stop_server(pid);
}

TEST(retry_429_honours_retry_after)
{
    int port = free_port();
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    pid_t pid = spawn_server(port, 0, "limited", "--rate-limit", "1", "--rate-burst", "1");
    /* wait for it with a patient client */
    tgc_client *c = connect_to(base, NULL, 100, 20);
    json_t *j = NULL;
    tgc_error e;
    CHECK(tgc_list_models(c, NULL, &j, &e) == 0);
    json_decref(j);
    /* the next requests come faster than 1/s: each 429 (Retry-After: 1) is waited
     * out, never reported */
    unsigned long before = tgc_attempts(c);
    double t0 = mono();
    for (int i = 0; i < 3; i++) {
        j = NULL;
        CHECK(tgc_list_models(c, NULL, &j, &e) == 0);
        json_decref(j);
    }
    double took = mono() - t0;
    CHECK(tgc_attempts(c) - before > 3); /* some were retried */
    CHECK(took >= 1.5);                  /* Retry-After (1 s) honoured, not 100 ms backoff */
    /* with no retries allowed, the 429 comes back as the server's reason */
    tgc_client *c0 = connect_to(base, NULL, 10, 0);
    tgc_close(c0);
    tgc_options o = {.base_url = base, .max_retries = 1, .backoff_ms = 1, .max_backoff_ms = 1};
    c0 = tgc_connect(&o, &e);
    int refused = 0;
    for (int i = 0; i < 6 && c0 != NULL; i++) {
        j = NULL;
        if (tgc_list_models(c0, NULL, &j, &e) != 0 && e.status == 429 &&
            strcmp(e.reason, "rate_limited") == 0)
            refused++;
        json_decref(j);
    }
    CHECK(refused > 0);
    tgc_close(c0);
    tgc_close(c);
    stop_server(pid);
}

/* tensorgate_uploads_in_progress from base's /metrics, or -1. */
static long uploads_in_progress(const char *base)
{
    char url[128];
    snprintf(url, sizeof url, "%s/metrics", base);
    CURL *e = curl_easy_init();
    it_buf body = {0};
    long v = -1;
    if (e != NULL) {
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, it_write_cb);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
        if (curl_easy_perform(e) == CURLE_OK && body.data != NULL) {
            const char *p = strstr((const char *)body.data, "\ntensorgate_uploads_in_progress ");
            if (p != NULL)
                v = strtol(p + strlen("\ntensorgate_uploads_in_progress "), NULL, 10);
        }
        curl_easy_cleanup(e);
    }
    it_buf_free(&body);
    return v;
}

static void *close_later(void *arg)
{
    int *fd = arg;
    struct timespec ts = {1, 200000000L};
    nanosleep(&ts, NULL);
    close(*fd);
    return NULL;
}

TEST(retry_503_while_the_server_is_busy)
{
    int port = free_port();
    char base[64], data[600], cmd[1400];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    pid_t pid = spawn_server(port, 0, "busy", "--max-uploads", "1", NULL, NULL);
    tgc_client *c = connect_to(base, NULL, 100, 20);
    json_t *j = NULL;
    tgc_error e;
    CHECK(tgc_list_models(c, NULL, &j, &e) == 0);
    json_decref(j);
    tgc_close(c);
    snprintf(data, sizeof data, "%s/busy", it_root_dir);
    snprintf(cmd, sizeof cmd, "%s token create --data %s --scope write 2>/dev/null | tail -n 1",
             it_binary, data);
    char token[256] = "";
    FILE *p = popen(cmd, "r");
    if (p != NULL) {
        if (fgets(token, sizeof token, p) == NULL)
            token[0] = '\0';
        pclose(p);
    }
    token[strcspn(token, "\n")] = '\0';
    CHECK(token[0] != '\0');
    c = connect_to(base, token, 100, 10);
    int v = 0;
    CHECK(tgc_create_model(c, "acme/busy", NULL, NULL, &e) == 0);
    CHECK(tgc_create_version(c, "acme/busy", &v, &e) == 0);
    /* one upload in progress (its head sent, its body not) holds the only slot */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    char head[600];
    int n = snprintf(head, sizeof head,
                     "PUT /v1/models/acme/busy/versions/%d/files/held.safetensors HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n"
                     "\r\n",
                     v, token);
    CHECK(it_write_all(fd, head, (size_t)n));
    /* wait until the server counts it (an ASan server takes its time) */
    bool held = false;
    for (int i = 0; i < 100 && !held; i++) {
        held = uploads_in_progress(base) == 1;
        if (!held) {
            struct timespec ts = {0, 50000000L};
            nanosleep(&ts, NULL);
        }
    }
    CHECK(held);
    pthread_t th;
    bool started = pthread_create(&th, NULL, close_later, &fd) == 0;
    CHECK(started);
    /* 503 resource_exhausted (Retry-After) until the held upload goes away */
    double t0 = mono();
    unsigned long before = tgc_attempts(c);
    int rc = tgc_upload(c, "acme/busy", v, "model.safetensors", model_path, NULL, &e);
    CHECK(rc == 0);
    if (rc != 0)
        fprintf(stderr, "busy upload: %ld %s: %s\n", e.status, e.reason, e.detail);
    CHECK(tgc_attempts(c) - before > 1);
    CHECK(mono() - t0 >= 0.8);
    if (started)
        pthread_join(th, NULL);
    tgc_close(c);
    stop_server(pid);
}

/* ---------- a hostile peer ---------- */

static pid_t peer_pid = -1;
static char peer_base[64];

/* Starts tests/client/hostile_peer.py (python3 on PATH, run from the repository
 * root as tests/integration/run.sh does); its port is its first line. */
static bool peer_start(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("python3", "python3", "tests/client/hostile_peer.py", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return false;
    }
    peer_pid = pid;
    char line[32] = "";
    FILE *f = fdopen(fds[0], "r");
    bool ok = f != NULL && fgets(line, sizeof line, f) != NULL && atoi(line) > 0;
    if (f != NULL)
        fclose(f);
    else
        close(fds[0]);
    snprintf(peer_base, sizeof peer_base, "http://127.0.0.1:%d", atoi(line));
    return ok;
}

TEST(path_is_safe)
{
    CHECK(tgc_path_is_safe("model.safetensors"));
    CHECK(tgc_path_is_safe("docs/README.md"));
    CHECK(tgc_path_is_safe("caf\xc3\xa9/\xe4\xb8\xad.json")); /* UTF-8 is fine */
    CHECK(tgc_path_is_safe("a..b/c.d"));
    CHECK(!tgc_path_is_safe(""));
    CHECK(!tgc_path_is_safe("/etc/passwd"));
    CHECK(!tgc_path_is_safe("../x"));
    CHECK(!tgc_path_is_safe("a/../x"));
    CHECK(!tgc_path_is_safe("a/./x"));
    CHECK(!tgc_path_is_safe("a//x"));
    CHECK(!tgc_path_is_safe("a/"));
    CHECK(!tgc_path_is_safe("a\\b"));
    CHECK(!tgc_path_is_safe("\x1b]0;pwned\x07"
                            "evil.bin"));
    CHECK(!tgc_path_is_safe("line\r\nbreak"));
    CHECK(!tgc_path_is_safe("tab\there"));
    CHECK(!tgc_path_is_safe("del\x7f"));
    CHECK(!tgc_path_is_safe("c1-\xc2\x9b"
                            "31m")); /* U+009B, CSI */
    CHECK(!tgc_path_is_safe("raw-\x9b"
                            "31m"));               /* not UTF-8 */
    CHECK(!tgc_path_is_safe("overlong-\xc0\xaf")); /* an overlong '/' */
}

TEST(hostile_peer)
{
    CHECK(peer_start());
    tgc_error e;
    tgc_options o = {.base_url = peer_base, .max_retries = 0, .stall_timeout_s = 2};
    tgc_client *c = tgc_connect(&o, &e);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char dest[600], part[700];
    snprintf(dest, sizeof dest, "%s/hostile.bin", it_root_dir);
    snprintf(part, sizeof part, "%s.part", dest);

    /* a file listed at 4176 bytes whose body never ends: stopped at its size */
    const tgc_error *be = NULL;
    tgc_batch *b = tgc_batch_new(c);
    CHECK(tgc_batch_add_download(b, "acme/endless", "1", "model.safetensors", dest, NULL, 4176) ==
          0);
    double t0 = mono();
    CHECK(tgc_batch_run(b, 1, NULL, NULL, NULL) == 1);
    CHECK(mono() - t0 < 5);
    CHECK(tgc_batch_result(b, 0, &be) == -1 && be != NULL);
    if (be != NULL)
        CHECK_STR(be->reason, TGC_REASON_TOO_LARGE);
    CHECK(!exists(dest) && !exists(part));
    tgc_batch_free(b);
    /* announced at 4 GiB: refused from the announcement */
    b = tgc_batch_new(c);
    CHECK(tgc_batch_add_download(b, "acme/longer", "1", "model.safetensors", dest, NULL, 4176) ==
          0);
    CHECK(tgc_batch_run(b, 1, NULL, NULL, NULL) == 1);
    CHECK(tgc_batch_result(b, 0, &be) == -1 && be != NULL);
    if (be != NULL)
        CHECK(strcmp(be->reason, TGC_REASON_TOO_LARGE) == 0 && strstr(be->detail, "4294967296"));
    CHECK(!exists(dest) && !exists(part));
    tgc_batch_free(b);
    /* no size known and no length announced: nothing bounds it, refused */
    CHECK(tgc_download(c, "acme/endless", "1", "model.safetensors", dest, NULL, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_BAD_ANSWER);
    CHECK(!exists(dest) && !exists(part));

    /* 4 bytes every 2 s, and no answer at all: stalled within the timeout */
    t0 = mono();
    CHECK(tgc_download(c, "acme/trickle", "1", "model.safetensors", dest, NULL, &e) == -1);
    double took = mono() - t0;
    CHECK_STR(e.reason, TGC_REASON_STALLED);
    CHECK(took >= 1.5 && took < 6);
    CHECK(!exists(dest) && exists(part)); /* the prefix is kept for a resume */
    unlink(part);
    t0 = mono();
    CHECK(tgc_download(c, "acme/silent", "1", "model.safetensors", dest, NULL, &e) == -1);
    took = mono() - t0;
    CHECK_STR(e.reason, TGC_REASON_STALLED);
    CHECK(took >= 1.5 && took < 6);
    CHECK(!exists(dest) && !exists(part));

    /* 4 GiB claimed, 14 bytes sent: more than the buffer, refused at once */
    unsigned char buf[64];
    CHECK(tgc_tensor_to_buffer(c, "acme/huge", "1", "w", NULL, buf, sizeof buf, NULL, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_TOO_SMALL);

    /* file names with terminal escapes: the lists are refused, the names escaped */
    tgc_resolved r;
    CHECK(tgc_resolve(c, "acme/escape", "1", &r, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_UNSAFE_NAME);
    CHECK(strchr(e.detail, 0x1b) == NULL && strstr(e.detail, "\\x1b") != NULL);
    json_t *files = NULL;
    CHECK(tgc_list_files(c, "acme/escape", "1", &files, &e) == -1);
    CHECK(files == NULL);
    CHECK_STR(e.reason, TGC_REASON_UNSAFE_NAME);
    CHECK(tgc_download(c, "acme/escape", "1", "\x1b[2Jx", dest, NULL, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_UNSAFE_NAME);
    tgc_close(c);
    if (peer_pid > 0) {
        kill(peer_pid, SIGTERM);
        waitpid(peer_pid, NULL, 0);
    }
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", "acme");
    read_token = it_token("read", NULL);
    it_tensor_spec t[2] = {{"w", "F32", 2, {4, 3}}, {"big", "F32", 2, {256, 256}}};
    it_build_safetensors(&model_file, t, 2, NULL, 3);
    it_sha256_hex(model_file.data, model_file.len, model_sha);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", it_root_dir);
    snprintf(pickle_path, sizeof pickle_path, "%s/pytorch_model.bin", it_root_dir);
    if (!write_file(model_path, model_file.data, model_file.len) ||
        !write_file(pickle_path, it_pickle_p2, sizeof it_pickle_p2)) {
        fprintf(stderr, "cannot write the fixtures\n");
        return 1;
    }
    cl = connect_to(it_srv.base, write_token, 50, 3);
    if (cl == NULL)
        return 1;
    RUN(parse_ref);
    RUN(create_upload_publish);
    RUN(resolve_and_lists);
    RUN(registry_calls);
    RUN(tensors);
    RUN(range);
    RUN(download_resume_and_sha);
    {
        /* the same downloads hashed in the transfer loop, without the hasher thread */
        tgc_client *threaded = cl;
        tgc_options o = {.base_url = it_srv.base,
                         .token = write_token,
                         .backoff_ms = 50,
                         .max_retries = 3,
                         .max_backoff_ms = 2000,
                         .hash_inline = true};
        tgc_error e;
        cl = tgc_connect(&o, &e);
        if (cl == NULL)
            return 1;
        RUN(download_resume_and_sha);
        tgc_close(cl);
        /* ... and without the fsyncs (no_fsync, pull --no-fsync): every digest still
         * checked, a wrong one refused with nothing left under either name */
        o.hash_inline = false;
        o.no_fsync = true;
        cl = tgc_connect(&o, &e);
        if (cl == NULL)
            return 1;
        RUN(download_resume_and_sha);
        tgc_close(cl);
        cl = threaded;
    }
    RUN(no_retry_on_403);
    RUN(scan);
    RUN(scan_with_options);
    RUN(batches);
    RUN(retry_connection_refused_until_the_server_starts);
    RUN(retry_429_honours_retry_after);
    RUN(retry_503_while_the_server_is_busy);
    RUN(path_is_safe);
    RUN(hostile_peer);
    tgc_close(cl);
    it_buf_free(&model_file);
    return it_finish(argv[0]);
}
