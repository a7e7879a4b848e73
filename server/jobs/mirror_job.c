/* Mirrors of a Hub repository (see mirror_job.h). */
#include "mirror_job.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "catalog_mirror.h"
#include "import_job.h"
#include "log.h"
#include "manifest.h"
#include "shard_check.h"
#include "url_redact.h"
#include "version_sign.h"

typedef struct mirror {
    const tg_jobs_context *ctx;
    const tg_job *job;
    const tg_job_worker *worker;
    char endpoint[TG_URL_MAX + 1]; /* without credentials, no trailing '/' */
    char *token;                   /* the upstream token, or NULL */
    char repo[TG_MIRROR_REPO_MAX + 1];
    char revision[TG_MIRROR_REVISION_MAX + 1];
    char commit[65];
    bool partial;
    int64_t started_ms;
    /* the outcome */
    char reason[48];
    char detail[TG_JOB_DETAIL_MAX];
    bool stopped, lease_lost;
    json_t *files;   /* the result's per-file entries */
    json_t *refused; /* the refused ones */
    uint64_t fetched_bytes;
    unsigned fetched_files, copied_files;
    bool saved; /* the result was recorded */
} mirror;

static void fail(mirror *m, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(mirror *m, const char *reason, const char *fmt, ...)
{
    if (m->reason[0] != '\0')
        return;
    snprintf(m->reason, sizeof m->reason, "%s", reason);
    va_list args;
    va_start(args, fmt);
    vsnprintf(m->detail, sizeof m->detail, fmt, args);
    va_end(args);
}

/* ---- the job's row ---- */

static bool parse_job(mirror *m)
{
    const tg_job *job = m->job;
    m->partial = strcmp(job->dtype, "partial") == 0;
    const char *at = strrchr(job->path, '@');
    if (at == NULL || at == job->path || at[1] == '\0' ||
        (size_t)(at - job->path) > TG_MIRROR_REPO_MAX || strlen(at + 1) > TG_MIRROR_REVISION_MAX) {
        fail(m, "internal_error", "the mirror job's repository and revision are malformed");
        return false;
    }
    snprintf(m->repo, sizeof m->repo, "%.*s", (int)(at - job->path), job->path);
    snprintf(m->revision, sizeof m->revision, "%s", at + 1);
    CURLU *u = curl_url();
    if (u == NULL || curl_url_set(u, CURLUPART_URL, job->url, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        fail(m, "internal_error", "the mirror job's endpoint is malformed");
        return false;
    }
    char *password = NULL;
    if (curl_url_get(u, CURLUPART_PASSWORD, &password, CURLU_URLDECODE) == CURLUE_OK &&
        password[0] != '\0')
        m->token = strdup(password);
    if (password != NULL) {
        explicit_bzero(password, strlen(password));
        curl_free(password);
    }
    (void)curl_url_set(u, CURLUPART_USER, NULL, 0);
    (void)curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
    char *clean = NULL;
    bool ok = curl_url_get(u, CURLUPART_URL, &clean, 0) == CURLUE_OK;
    if (ok)
        snprintf(m->endpoint, sizeof m->endpoint, "%s", clean);
    curl_free(clean);
    curl_url_cleanup(u);
    size_t len = strlen(m->endpoint);
    while (len > 0 && m->endpoint[len - 1] == '/')
        m->endpoint[--len] = '\0';
    if (!ok || len == 0) {
        fail(m, "internal_error", "the mirror job's endpoint is malformed");
        return false;
    }
    return true;
}

/* ---- the revision's answer (a small GET, under the import address policy) ---- */

typedef struct getter {
    mirror *m;
    char *data;
    size_t len;
    bool too_large;
    bool forbidden;
} getter;

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *address)
{
    getter *g = ctx;
    (void)purpose;
    if (tg_addr_forbidden(&g->m->ctx->import_policy, &address->addr, (size_t)address->addrlen) !=
        NULL) {
        g->forbidden = true;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static size_t on_data(char *data, size_t size, size_t count, void *ctx)
{
    getter *g = ctx;
    size_t len = size * count;
    if (g->len + len > TG_MIRROR_INFO_MAX) {
        g->too_large = true;
        return 0;
    }
    char *grown = realloc(g->data, g->len + len + 1);
    if (grown == NULL)
        return 0;
    g->data = grown;
    memcpy(g->data + g->len, data, len);
    g->len += len;
    g->data[g->len] = '\0';
    return len;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    getter *g = ctx;
    (void)a, (void)b, (void)c, (void)d;
    return tg_job_worker_signal(g->m->worker) == TG_JOB_GO ? 0 : 1;
}

/* A path segment or repository name, percent-encoded but for '/' (kept). */
static bool append_escaped(char *out, size_t out_len, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t at = strlen(out);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        bool plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                     (*c >= '0' && *c <= '9') || strchr("-._~/", *c) != NULL;
        if (at + (plain ? 1 : 3) >= out_len)
            return false;
        if (plain) {
            out[at++] = (char)*c;
        } else {
            out[at++] = '%';
            out[at++] = hex[*c >> 4];
            out[at++] = hex[*c & 15];
        }
    }
    out[at] = '\0';
    return true;
}

/* Appends text as it is; false when out_len is too small. */
static bool append_plain(char *out, size_t out_len, const char *text)
{
    size_t at = strlen(out);
    int n = snprintf(out + at, out_len - at, "%s", text);
    return n >= 0 && (size_t)n < out_len - at;
}

static json_t *get_revision(mirror *m)
{
    char url[TG_URL_MAX + 1];
    url[0] = '\0';
    /* a revision is one segment: its '/' (a branch "a/b") is encoded too */
    char rev[3 * TG_MIRROR_REVISION_MAX + 1] = "";
    bool fits = true;
    for (const char *c = m->revision; *c && fits; c++) {
        char one[2] = {*c, '\0'};
        fits =
            *c == '/' ? append_plain(rev, sizeof rev, "%2F") : append_escaped(rev, sizeof rev, one);
    }
    if (!fits || !append_plain(url, sizeof url, m->endpoint) ||
        !append_plain(url, sizeof url, "/api/models/") ||
        !append_escaped(url, sizeof url, m->repo) || !append_plain(url, sizeof url, "/revision/") ||
        !append_plain(url, sizeof url, rev) || !append_plain(url, sizeof url, "?blobs=true")) {
        fail(m, "mirror_upstream_invalid", "the revision's URL is longer than %d bytes",
             TG_URL_MAX);
        return NULL;
    }
    char detail[TG_JOB_DETAIL_MAX];
    const char *bad = tg_import_url_check(&m->ctx->import_policy, url, detail, sizeof detail);
    if (bad != NULL) {
        fail(m, bad, "%s", detail);
        return NULL;
    }
    getter g = {.m = m};
    CURL *c = curl_easy_init();
    struct curl_slist *headers = NULL;
    if (m->token != NULL) {
        size_t len = strlen(m->token) + 32;
        char *line = malloc(len);
        if (line != NULL) {
            snprintf(line, len, "Authorization: Bearer %s", m->token);
            headers = curl_slist_append(NULL, line);
            explicit_bzero(line, len);
            free(line);
        }
    }
    if (c == NULL || (m->token != NULL && headers == NULL)) {
        curl_easy_cleanup(c);
        curl_slist_free_all(headers);
        fail(m, "internal_error", "libcurl could not start");
        return NULL;
    }
    long timeout = m->ctx->import_timeout > 0 ? (long)m->ctx->import_timeout : 0L;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)TG_IMPORT_MAX_REDIRECTS);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tensorgate-mirror");
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &g);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &g);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (headers != NULL)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    json_t *body = NULL;
    tg_job_signal signal = tg_job_worker_signal(m->worker);
    if (signal == TG_JOB_STOPPING)
        m->stopped = true;
    else if (signal == TG_JOB_LEASE_LOST)
        m->lease_lost = true;
    else if (signal == TG_JOB_CANCELLED)
        fail(m, "cancelled", "cancelled while it ran");
    else if (g.forbidden)
        fail(m, "import_address_forbidden",
             "the upstream's address is not one imports may reach (--import-allow)");
    else if (g.too_large)
        fail(m, "mirror_upstream_invalid", "the upstream's answer is larger than %zu bytes",
             TG_MIRROR_INFO_MAX);
    else if (rc != CURLE_OK)
        fail(m, "mirror_upstream_failed", "the upstream could not be read: %s",
             curl_easy_strerror(rc));
    else if (status != 200)
        fail(m, "mirror_upstream_failed",
             "the upstream answered HTTP %ld to the revision %s of %s%s", status, m->revision,
             m->repo,
             status == 401 || status == 403 ? " (a token that may read it is needed)" : "");
    else if ((body = json_loadb(g.data ? g.data : "", g.len, 0, NULL)) == NULL ||
             !json_is_object(body))
        fail(m, "mirror_upstream_invalid", "the upstream's answer is not a JSON object");
    free(g.data);
    if (m->reason[0] != '\0' || m->stopped || m->lease_lost) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* ---- the files ---- */

static bool hex_text(const char *text, size_t len)
{
    if (text == NULL || strlen(text) != len)
        return false;
    return strspn(text, "0123456789abcdef") == len;
}

/* A path the catalog may hold: 1..TG_PATH_MAX bytes, printable ASCII but '\\',
 * no empty, "." or ".." segment, no leading '/'. */
static bool good_path(const char *path)
{
    size_t len = strlen(path);
    if (len == 0 || len > TG_PATH_MAX || path[0] == '/' || path[len - 1] == '/')
        return false;
    for (const char *c = path; *c; c++)
        if (*c <= 0x20 || *c >= 0x7F || *c == '\\')
            return false;
    const char *seg = path;
    while (seg != NULL) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
        seg = end ? end + 1 : NULL;
    }
    return true;
}

typedef struct upstream_file {
    const char *path;
    const char *oid;    /* the LFS sha256, else the blob id */
    const char *sha256; /* the LFS sha256, or NULL */
    uint64_t size;
} upstream_file;

typedef struct put_ctx {
    mirror *m;
    int64_t version_id;
    const char *expect_sha256;
    bool mismatch;
} put_ctx;

static bool put_fetched(void *ctx, const tg_file_record *file, const char *stats)
{
    put_ctx *p = ctx;
    mirror *m = p->m;
    if (p->expect_sha256 != NULL && strcmp(p->expect_sha256, file->sha256) != 0) {
        p->mismatch = true;
        return false;
    }
    tg_commit_guard guard = {
        .model_id = m->job->model_id, .org = m->job->org, .name = m->job->name, .token_hash = NULL};
    const char *why = NULL;
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_lock(m->ctx->publish_lock);
    tg_cat_status status =
        tg_catalog_file_put_guarded(m->ctx->catalog, &guard, p->version_id, file, stats, &why);
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_unlock(m->ctx->publish_lock);
    return status == TG_CAT_OK;
}

static void add_entry(mirror *m, const upstream_file *u, const char *action, const char *reason,
                      const char *detail)
{
    json_t *entry = json_pack("{s:s, s:s, s:I}", "path", u->path, "action", action, "size",
                              (json_int_t)u->size);
    if (entry == NULL)
        return;
    if (reason != NULL) {
        json_object_set_new(entry, "reason", json_string(reason));
        json_object_set_new(entry, "detail", json_string(detail ? detail : ""));
        json_array_append(m->refused, entry);
    }
    json_array_append_new(m->files, entry);
}

/* Copies u from the previous mirror's version when it did not change there. */
static bool try_copy(mirror *m, const upstream_file *u, const tg_mirror_record *prev,
                     json_t *prev_oids, int64_t draft_id)
{
    if (prev == NULL)
        return false;
    tg_file_record *old = calloc(1, sizeof *old);
    if (old == NULL)
        return false;
    bool same = false;
    if (tg_catalog_file_get(m->ctx->catalog, prev->version_id, u->path, old) == TG_CAT_OK) {
        const char *was = json_string_value(json_object_get(prev_oids, u->path));
        same = (was != NULL && strcmp(was, u->oid) == 0) ||
               (u->sha256 != NULL && strcmp(u->sha256, old->sha256) == 0);
        same = same && old->size == u->size;
    }
    bool copied = false;
    if (same) {
        char *stats = NULL;
        if (tg_catalog_file_stats(m->ctx->catalog, prev->version_id, u->path, &stats) ==
            TG_CAT_OK) {
            if (m->ctx->publish_lock != NULL)
                pthread_mutex_lock(m->ctx->publish_lock);
            copied = tg_catalog_file_put(m->ctx->catalog, draft_id, old, stats ? stats : "[]") ==
                     TG_CAT_OK;
            if (m->ctx->publish_lock != NULL)
                pthread_mutex_unlock(m->ctx->publish_lock);
        }
        free(stats);
    }
    free(old);
    return copied;
}

static void fetch_one(mirror *m, const upstream_file *u, int64_t draft_id)
{
    char url[TG_URL_MAX + 1];
    url[0] = '\0';
    if (!append_plain(url, sizeof url, m->endpoint) || !append_plain(url, sizeof url, "/") ||
        !append_escaped(url, sizeof url, m->repo) || !append_plain(url, sizeof url, "/resolve/") ||
        !append_plain(url, sizeof url, m->commit) || !append_plain(url, sizeof url, "/") ||
        !append_escaped(url, sizeof url, u->path)) {
        fail(m, "mirror_upstream_invalid", "the URL of %s is too long", u->path);
        return;
    }
    put_ctx put = {.m = m, .version_id = draft_id, .expect_sha256 = u->sha256};
    tg_import_file f = {.url = url,
                        .path = u->path,
                        .bearer = m->token,
                        .started_ms = m->started_ms,
                        .commit = put_fetched,
                        .commit_ctx = &put};
    bool ok = tg_import_fetch_file(m->ctx, m->job, m->worker, &f);
    m->fetched_bytes += f.fetched;
    if (ok) {
        m->fetched_files++;
        add_entry(m, u, "fetched", NULL, NULL);
    } else if (f.stopped) {
        m->stopped = true;
    } else if (f.lease_lost) {
        m->lease_lost = true;
    } else if (f.refused) {
        add_entry(m, u, "refused", f.reason, f.detail);
    } else if (put.mismatch) {
        fail(m, "import_source_changed", "%s: its sha256 is not the upstream's LFS oid %s", u->path,
             u->sha256);
    } else {
        fail(m, f.reason[0] ? f.reason : "internal_error", "%s: %s", u->path, f.detail);
    }
}

static bool collect_files(mirror *m, json_t *info, upstream_file **out, size_t *count)
{
    json_t *siblings = json_object_get(info, "siblings");
    if (!json_is_array(siblings)) {
        fail(m, "mirror_upstream_invalid", "the upstream's answer has no \"siblings\" list");
        return false;
    }
    size_t n = json_array_size(siblings);
    if (n > TG_MIRROR_MAX_FILES) {
        fail(m, "mirror_upstream_invalid", "the revision has %zu files; a mirror takes at most %d",
             n, TG_MIRROR_MAX_FILES);
        return false;
    }
    upstream_file *files = calloc(n ? n : 1, sizeof *files);
    if (files == NULL) {
        fail(m, "internal_error", "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(siblings, i);
        const char *path = json_string_value(json_object_get(s, "rfilename"));
        json_t *size = json_object_get(s, "size");
        const char *blob = json_string_value(json_object_get(s, "blobId"));
        json_t *lfs = json_object_get(s, "lfs");
        const char *sha = json_string_value(json_object_get(lfs, "sha256"));
        if (path == NULL || !good_path(path) || !json_is_integer(size) ||
            json_integer_value(size) < 0 || (lfs != NULL && !hex_text(sha, 64)) ||
            (blob == NULL && sha == NULL)) {
            fail(m, "mirror_upstream_invalid",
                 "the upstream's file %zu has no usable rfilename, size or blob id", i);
            free(files);
            return false;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(files[j].path, path) == 0) {
                fail(m, "mirror_upstream_invalid", "the upstream lists %s twice", path);
                free(files);
                return false;
            }
        files[i] = (upstream_file){.path = path,
                                   .oid = sha != NULL ? sha : blob,
                                   .sha256 = sha,
                                   .size = (uint64_t)json_integer_value(size)};
    }
    *out = files;
    *count = n;
    return true;
}

/* The draft's files go (a mirror that publishes nothing leaves an empty draft). */
static void clear_draft(mirror *m, int64_t draft_id, const upstream_file *files, size_t count)
{
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_lock(m->ctx->publish_lock);
    for (size_t i = 0; i < count; i++)
        (void)tg_catalog_file_delete(m->ctx->catalog, draft_id, files[i].path);
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_unlock(m->ctx->publish_lock);
}

static json_t *result_json(const mirror *m, bool already, int64_t number)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:O, s:O, s:I, s:I, s:I, s:o}", "endpoint",
                     m->endpoint, "repo", m->repo, "revision", m->revision, "commit", m->commit,
                     "already_mirrored", already, "files", m->files, "refused", m->refused,
                     "fetched_files", (json_int_t)m->fetched_files, "copied_files",
                     (json_int_t)m->copied_files, "fetched_bytes", (json_int_t)m->fetched_bytes,
                     "version", number > 0 ? json_integer((json_int_t)number) : json_null());
}

static void save_result(mirror *m, bool already, int64_t number)
{
    m->saved = true;
    json_t *result = result_json(m, already, number);
    char *text = result ? json_dumps(result, JSON_COMPACT) : NULL;
    if (text == NULL ||
        tg_catalog_mirror_result_set(m->ctx->catalog, m->job->id, text) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "job %lld: the mirror's result could not be recorded",
               (long long)m->job->id);
    free(text);
    json_decref(result);
}

/* A draft file's row, written as the signing step records model.server.sig. */
typedef struct draft_row {
    tg_catalog *catalog;
    int64_t draft_id;
    tg_cat_status status;
} draft_row;

static void record_draft_file(void *arg, const tg_file_record *file, const char *stats)
{
    draft_row *row = arg;
    row->status = tg_catalog_file_put(row->catalog, row->draft_id, file, stats);
}

/* When the server signs (serve --signing-key), its model.server.sig over the draft's
 * files (from the digests in list, never re-reading bytes) joins the draft, and list
 * is listed again. 0, or -1 with m failed. */
static int sign_draft(mirror *m, int64_t draft_id, tg_file_records *list)
{
    if (m->ctx->signer == NULL)
        return 0;
    draft_row row = {m->ctx->catalog, draft_id, TG_CAT_ERROR};
    tg_file_record sig;
    char why[TG_MSIG_ERR_MAX] = "";
    if (tg_version_sign(m->ctx->signer, m->ctx->store, m->job->name, list->items, list->count,
                        record_draft_file, &row, &sig, why, sizeof why) != 0) {
        fail(m, "internal_error", "the version could not be signed: %s", why);
        return -1;
    }
    if (row.status != TG_CAT_OK) {
        fail(m, "internal_error", "the catalog failed recording the version's signature");
        return -1;
    }
    free(list->items);
    memset(list, 0, sizeof *list);
    if (tg_catalog_file_list(m->ctx->catalog, draft_id, NULL, 0, tg_file_records_collect, list) !=
            TG_CAT_OK ||
        list->failed) {
        fail(m, "internal_error", "the draft's files could not be listed");
        return -1;
    }
    return 0;
}

static void publish(mirror *m, int64_t draft_id, const upstream_file *files, size_t count)
{
    tg_file_records list = {0};
    json_t *oids = json_object();
    for (size_t i = 0; i < count; i++) {
        bool refused = false;
        size_t k;
        json_t *r;
        json_array_foreach(m->refused, k, r)
        {
            if (strcmp(json_string_value(json_object_get(r, "path")), files[i].path) == 0)
                refused = true;
        }
        if (!refused)
            json_object_set_new(oids, files[i].path, json_string(files[i].oid));
    }
    char *oids_text = json_dumps(oids, JSON_COMPACT);
    json_decref(oids);
    /* the token that asked must still be there, and still cover the model */
    const char *denied = NULL;
    tg_cat_status checked =
        m->job->token_id > 0
            ? tg_catalog_mirror_token_check(m->ctx->catalog, m->job->token_id, m->job->org, &denied)
            : TG_CAT_OK;
    if (checked != TG_CAT_OK) {
        fail(m, denied != NULL ? denied : "internal_error",
             "the files were fetched, but %s; nothing was published",
             denied == NULL ? "the catalog could not check the token"
             : strcmp(denied, "token_revoked") == 0
                 ? "the token that asked was revoked"
                 : "the token that asked no longer covers the model");
        free(oids_text);
        return;
    }
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_lock(m->ctx->publish_lock);
    tg_cat_status status =
        tg_catalog_file_list(m->ctx->catalog, draft_id, NULL, 0, tg_file_records_collect, &list);
    char digest[65];
    tg_version published;
    const char *why = NULL;
    char detail[512] = "";
    int shards = -1;
    if (status != TG_CAT_OK || list.failed || oids_text == NULL) {
        fail(m, "internal_error", "the draft's files could not be listed");
    } else if (list.count == 0) {
        fail(m, "empty_version", "no file of the upstream revision was taken; nothing to publish");
    } else if ((shards = tg_shard_check(m->ctx->store, m->ctx->max_header, &list, detail,
                                        sizeof detail)) != 0) {
        /* the rules of POST .../publish: an index must name its shards' tensors */
        if (shards > 0)
            fail(m, "index_mismatch", "%s", detail);
        else
            fail(m, "internal_error", "the shard headers could not be read");
    } else if (sign_draft(m, draft_id, &list) != 0) {
        /* failed: said */
    } else if (tg_manifest_digest(list.items, list.count, digest) != 0) {
        fail(m, "internal_error", "the version digest could not be computed");
    } else if ((status =
                    tg_catalog_version_publish_files(m->ctx->catalog, draft_id, digest, list.items,
                                                     list.count, &published, &why)) != TG_CAT_OK) {
        fail(m, status == TG_CAT_CONFLICT ? "version_published" : "internal_error",
             "the draft could not be published (%s)", why ? why : "catalog error");
    }
    if (m->ctx->publish_lock != NULL)
        pthread_mutex_unlock(m->ctx->publish_lock);
    free(list.items);
    if (m->reason[0] != '\0') {
        free(oids_text);
        return;
    }
    tg_mirror_record record = {.version_id = published.id, .oids = oids_text};
    snprintf(record.endpoint, sizeof record.endpoint, "%s", m->endpoint);
    snprintf(record.repo, sizeof record.repo, "%s", m->repo);
    snprintf(record.revision, sizeof record.revision, "%s", m->revision);
    snprintf(record.commit, sizeof record.commit, "%s", m->commit);
    if (tg_catalog_mirror_version_add(m->ctx->catalog, m->job->model_id, &record) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR,
               "job %lld: version %lld was published but its upstream could not be "
               "recorded",
               (long long)m->job->id, (long long)published.number);
    free(oids_text);
    save_result(m, false, published.number);
    if (m->ctx->version_published != NULL)
        m->ctx->version_published(m->ctx->version_published_arg);
    if (tg_catalog_mirror_job_done(m->ctx->catalog, m->job->id, published.number) != TG_CAT_OK)
        tg_log(TG_LOG_WARN,
               "job %lld: version %lld is published, but the job was cancelled or "
               "taken over meanwhile",
               (long long)m->job->id, (long long)published.number);
    tg_log(TG_LOG_INFO,
           "job %lld: mirrored %s@%s (%s) into %s/%s version %lld: %u fetched, %u "
           "copied, %zu refused",
           (long long)m->job->id, m->repo, m->revision, m->commit, m->job->org, m->job->name,
           (long long)published.number, m->fetched_files, m->copied_files,
           json_array_size(m->refused));
}

static void run(mirror *m)
{
    if (!parse_job(m))
        return;
    json_t *info = get_revision(m);
    if (info == NULL)
        return;
    const char *sha = json_string_value(json_object_get(info, "sha"));
    if (!hex_text(sha, 40) && !hex_text(sha, 64)) {
        fail(m, "mirror_upstream_invalid", "the upstream's answer has no commit \"sha\"");
        json_decref(info);
        return;
    }
    snprintf(m->commit, sizeof m->commit, "%s", sha);
    tg_catalog *catalog = m->ctx->catalog;
    tg_mirror_record done;
    if (tg_catalog_mirror_latest(catalog, m->job->model_id, m->endpoint, m->repo, m->commit,
                                 &done) == TG_CAT_OK) {
        free(done.oids);
        save_result(m, true, done.number);
        if (tg_catalog_mirror_job_done(catalog, m->job->id, done.number) != TG_CAT_OK)
            fail(m, "cancelled", "cancelled while it ran");
        json_decref(info);
        return;
    }
    upstream_file *files = NULL;
    size_t count = 0;
    if (!collect_files(m, info, &files, &count)) {
        json_decref(info);
        return;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += files[i].size;
    tg_mirror_record prev;
    bool have_prev = tg_catalog_mirror_latest(catalog, m->job->model_id, m->endpoint, m->repo, NULL,
                                              &prev) == TG_CAT_OK;
    json_t *prev_oids = have_prev ? json_loads(prev.oids, 0, NULL) : NULL;
    int64_t draft = m->job->source_version_id;
    /* a run resumed after a restart starts from an empty draft: nothing of an earlier
     * attempt (whose revision may have named other files) is published */
    tg_file_records stale = {0};
    if (tg_catalog_file_list(catalog, draft, NULL, 0, tg_file_records_collect, &stale) ==
            TG_CAT_OK &&
        !stale.failed && stale.count > 0) {
        if (m->ctx->publish_lock != NULL)
            pthread_mutex_lock(m->ctx->publish_lock);
        for (size_t i = 0; i < stale.count; i++)
            (void)tg_catalog_file_delete(catalog, draft, stale.items[i].path);
        if (m->ctx->publish_lock != NULL)
            pthread_mutex_unlock(m->ctx->publish_lock);
    }
    free(stale.items);
    uint64_t done_bytes = 0;
    for (size_t i = 0; i < count && m->reason[0] == '\0' && !m->stopped && !m->lease_lost; i++) {
        tg_job_signal signal = tg_job_worker_signal(m->worker);
        if (signal == TG_JOB_CANCELLED) {
            fail(m, "cancelled", "cancelled while it ran");
            break;
        }
        if (signal == TG_JOB_STOPPING) {
            m->stopped = true;
            break;
        }
        if (signal == TG_JOB_LEASE_LOST) {
            m->lease_lost = true;
            break;
        }
        const char *slash = strrchr(files[i].path, '/');
        if (strcmp(slash != NULL ? slash + 1 : files[i].path, "header") == 0) {
            /* the segment the header route takes: an upload may not use it either */
            add_entry(m, &files[i], "refused", "invalid_path",
                      "a file path may not end in the segment 'header'");
        } else if (try_copy(m, &files[i], have_prev ? &prev : NULL, prev_oids, draft)) {
            m->copied_files++;
            add_entry(m, &files[i], "copied", NULL, NULL);
        } else {
            fetch_one(m, &files[i], draft);
        }
        done_bytes += files[i].size;
        (void)tg_catalog_job_progress(catalog, m->job->id, done_bytes, total);
    }
    json_decref(prev_oids);
    if (have_prev)
        free(prev.oids);
    if (m->stopped || m->lease_lost) {
        /* left as it is: the job runs again later (its draft's files are replaced) */
    } else if (m->reason[0] == '\0' && json_array_size(m->refused) > 0 && !m->partial) {
        save_result(m, false, 0);
        clear_draft(m, draft, files, count);
        char list[TG_JOB_DETAIL_MAX] = "";
        size_t k;
        json_t *r;
        json_array_foreach(m->refused, k, r)
        {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s (%s)", k ? ", " : "",
                     json_string_value(json_object_get(r, "path")),
                     json_string_value(json_object_get(r, "reason")));
        }
        fail(m, "mirror_refused",
             "the gate refused %zu file(s): %s; nothing was published (allow_partial leaves them "
             "out)",
             json_array_size(m->refused), list);
    } else if (m->reason[0] == '\0') {
        publish(m, draft, files, count);
    }
    if (m->reason[0] != '\0' && strcmp(m->reason, "mirror_refused") != 0)
        clear_draft(m, draft, files, count);
    free(files);
    json_decref(info);
}

tg_job_outcome tg_mirror_job_run(const tg_jobs_context *context, const tg_job *job,
                                 const tg_job_worker *worker)
{
    mirror *m = calloc(1, sizeof *m);
    if (m == NULL) {
        tg_catalog_job_fail(context->catalog, job->id, "internal_error", "out of memory");
        return TG_JOB_OUTCOME_FAILED;
    }
    m->ctx = context;
    m->job = job;
    m->worker = worker;
    m->started_ms = tg_import_now_ms();
    m->files = json_array();
    m->refused = json_array();
    char shown[TG_URL_MAX + 1];
    (void)tg_url_redact(job->url, shown, sizeof shown);
    tg_log(TG_LOG_INFO, "job %lld: mirroring %s from %s into %s/%s (attempt %lld)",
           (long long)job->id, job->path, shown, job->org, job->name, (long long)job->attempts);
    if (m->files == NULL || m->refused == NULL)
        fail(m, "internal_error", "out of memory");
    else
        run(m);
    if (m->reason[0] != '\0' && !m->saved && !m->stopped && !m->lease_lost)
        save_result(m, false, 0);
    tg_job_outcome outcome = TG_JOB_OUTCOME_DONE;
    if (m->stopped) {
        outcome = TG_JOB_OUTCOME_STOPPED;
    } else if (m->lease_lost) {
        outcome = TG_JOB_OUTCOME_LEASE_LOST;
    } else if (m->reason[0] != '\0') {
        outcome = TG_JOB_OUTCOME_FAILED;
        tg_log(TG_LOG_WARN, "job %lld failed: %s: %s", (long long)job->id, m->reason, m->detail);
        bool cancelled = strcmp(m->reason, "cancelled") == 0;
        tg_catalog_job_fail(context->catalog, job->id, m->reason, cancelled ? NULL : m->detail);
    }
    if (m->token != NULL) {
        explicit_bzero(m->token, strlen(m->token));
        free(m->token);
    }
    json_decref(m->files);
    json_decref(m->refused);
    free(m);
    return outcome;
}
