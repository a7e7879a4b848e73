/* The tensorgate HTTP client library (libtgclient, over libcurl): what a remote
 * program or the `tensorgate push|pull|ls|header|tensor|scan` commands use to talk to
 * a tensorgate server. It owns the connection settings (base URL, token), the
 * retry policy (connection errors, 429 and 503 are retried with exponential backoff,
 * honouring a Retry-After in seconds; no other 4xx is ever retried), the translation of the
 * server's problem+json answers into a reason code and a sentence (tgc_error), and
 * bounded parallel transfers through the curl multi interface (tgc_batch).
 *
 *   tgc_error err;
 *   tgc_client *c = tgc_connect(&(tgc_options){.base_url = "http://127.0.0.1:8080",
 *                                               .token = getenv("TENSORGATE_TOKEN")}, &err);
 *   tgc_resolved v;
 *   if (tgc_resolve(c, "acme/tiny", "latest", &v, &err) != 0)
 *       fprintf(stderr, "%s: %s\n", err.reason, err.detail);   // "model_not_found: ..."
 *   tgc_download(c, "acme/tiny", "latest", "model.safetensors", "out/model.safetensors",
 *                NULL, &err);                                   // resumable, SHA-256 checked
 *   tgc_close(c);
 *
 * Every call returns 0 on success and -1 with *err filled on failure. The reason is
 * the server's (`not_found`, `forbidden`, `refused_format`, ...) or one of the
 * client's own: TGC_REASON_* below. JSON results are jansson objects (the server's
 * JSON, as openapi.yaml describes it) that the caller releases with json_decref. A
 * client is not thread-safe: use one per thread. Link with libcurl, jansson and
 * libcrypto. */
#ifndef TENSORGATE_CLIENT_H
#define TENSORGATE_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The client's own reasons (the server's never collide: they are its problem codes). */
#define TGC_REASON_CONNECTION "connection_failed" /* no answer after every retry */
#define TGC_REASON_SHA256 "sha256_mismatch"       /* a download's digest differs */
#define TGC_REASON_IO "io_error"                  /* a local file could not be used */
#define TGC_REASON_USAGE "invalid_argument"       /* a bad reference, path or option */
#define TGC_REASON_MEMORY "out_of_memory"
#define TGC_REASON_TOO_SMALL "buffer_too_small" /* the caller's buffer cannot hold it */
#define TGC_REASON_BAD_ANSWER "bad_response"    /* the server answered something unexpected */
#define TGC_REASON_TOO_LARGE "body_too_large"   /* a body longer than the request can return */
#define TGC_REASON_STALLED "stalled"            /* under 1 KiB moved in stall_timeout_s */
#define TGC_REASON_UNSAFE_NAME "unsafe_name"    /* a server path with a control character, .. */

typedef struct tgc_error {
    long status; /* the HTTP status; 0 when no answer came (or a local failure) */
    char reason[64];
    char detail[1024];
    char format[32]; /* for gate refusals: the format class the server named, else "" */
} tgc_error;

typedef struct tgc_options {
    const char *base_url;     /* "http://host:port" (required) */
    const char *token;        /* sent as Authorization: Bearer; NULL or "" for none */
    unsigned max_retries;     /* retries after the first attempt; 0: the default, 6 */
    unsigned backoff_ms;      /* the first retry's wait, doubled each time; 0: 200 */
    unsigned max_backoff_ms;  /* the longest wait (also caps Retry-After); 0: 10000 */
    unsigned parallel;        /* transfers at once in a batch; 0: 4 (at most 64) */
    long connect_timeout_s;   /* 0: 10 */
    long low_speed_timeout_s; /* a transfer slower than 1 byte/s this long fails; 0: 60 */
    unsigned max_json_bytes;  /* largest JSON answer kept; 0: 512 MiB */
    uint64_t max_recv_speed;  /* bytes/s each transfer may receive; 0: no limit */
    /* A transfer with no request body (every read and download) that moves fewer
     * than 1 KiB (or a quarter of max_recv_speed times this, if less) in this many
     * seconds, waiting for the answer included, fails with TGC_REASON_STALLED and
     * is not retried: nothing at all and a trickle alike. 0: 30. */
    long stall_timeout_s;
    /* File downloads take their SHA-256 in the transfer loop, as each chunk arrives,
     * instead of on the batch's hasher thread (which reads the part file back beside
     * the transfers): less CPU in all, one core fewer. */
    bool hash_inline;
    /* File downloads skip the fsync of each part file before its rename (and the
     * early writeback that makes it cheap) and the fsync of the folders at the end
     * of a batch: for scratch space. Every byte is still checked against its
     * SHA-256 before the rename, but after a crash a file under its final name may
     * lack bytes that never reached the disk. */
    bool no_fsync;
} tgc_options;

typedef struct tgc_client tgc_client;

/* A client for one server. NULL with *err on a bad option or out of memory. */
tgc_client *tgc_connect(const tgc_options *options, tgc_error *err);
void tgc_close(tgc_client *client); /* NULL is fine */
/* HTTP attempts made so far (each retry counts): for tests and diagnostics. */
unsigned long tgc_attempts(const tgc_client *client);
/* The most transfers this client has run at once (a batch's bound holds it down). */
unsigned tgc_peak_parallel(const tgc_client *client);

/* True when path, a file path a server named, is safe to print and to use under a
 * local folder: relative, valid UTF-8, no empty, "." or ".." segment, no backslash
 * and no control character (C0, DEL, C1 U+0080..U+009F). tgc_resolve and
 * tgc_list_files refuse a file list holding another (TGC_REASON_UNSAFE_NAME). */
bool tgc_path_is_safe(const char *path);

/* GET path_and_query ("/v1/audit?format=jsonl") and hand each line of a 2xx answer
 * (without its newline, NUL-terminated; at most 1 MiB) to on_line as it arrives:
 * memory stays bounded whatever the answer's length. on_line returns 0 to go on. Once
 * a line was handed over the request is not retried. 0, or -1 with *err (a refusal,
 * the connection, a line too long, on_line stopping it). */
int tgc_get_lines(tgc_client *c, const char *path_and_query,
                  int (*on_line)(void *user, const char *line, size_t len), void *user,
                  tgc_error *err);

/* Splits "org/name[@rev]" into model ("org/name") and rev ("latest" when absent).
 * Checks the characters of org and name as the server does. */
int tgc_parse_ref(const char *text, char *model, size_t model_cap, char *rev, size_t rev_cap,
                  tgc_error *err);

/* ---- models, versions, files, tensors (reads) ---- */

typedef struct tgc_resolved {
    int version;          /* the number the rev names */
    char state[16];       /* "draft" or "published" */
    char digest[65];      /* "" for a draft */
    json_t *version_json; /* the whole Version object (files included); caller decrefs */
} tgc_resolved;

/* What `rev` (a number, an alias, `latest` or a digest) of model names. A file
 * list with an unsafe path (tgc_path_is_safe) or a file without a size and
 * SHA-256 is TGC_REASON_UNSAFE_NAME / TGC_REASON_BAD_ANSWER. */
int tgc_resolve(tgc_client *c, const char *model, const char *rev, tgc_resolved *out,
                tgc_error *err);
/* Every model (all pages) whose name contains query (NULL: all): a JSON array. */
int tgc_list_models(tgc_client *c, const char *query, json_t **out, tgc_error *err);
/* One model with its aliases and versions (the Model object). */
int tgc_get_model(tgc_client *c, const char *model, json_t **out, tgc_error *err);
/* The keys the server signs published versions with (GET
 * /.well-known/tensorgate/signing-keys): {"keys": [{hint, pem, mode}], ...}. */
int tgc_get_signing_keys(tgc_client *c, json_t **out, tgc_error *err);
/* The model's versions, oldest first: a JSON array of VersionSummary objects. */
int tgc_list_versions(tgc_client *c, const char *model, json_t **out, tgc_error *err);
/* The files of a version (all pages): a JSON array of File objects. */
int tgc_list_files(tgc_client *c, const char *model, const char *rev, json_t **out, tgc_error *err);
/* The tensors of a version across its shards (all pages): a JSON array. */
int tgc_list_tensors(tgc_client *c, const char *model, const char *rev, json_t **out,
                     tgc_error *err);
/* The parsed header of a safetensors file (the Header object, absolute offsets). */
int tgc_get_header(tgc_client *c, const char *model, const char *rev, const char *path,
                   json_t **out, tgc_error *err);

/* ---- bytes ---- */

typedef struct tgc_tensor_request {
    const char *slice; /* NumPy basic indexing ("1:3,::2"), or NULL */
    const char *dtype; /* "F16", "BF16", ... converted by the server, or NULL */
    bool npy;          /* a .npy file (format=npy) instead of raw little-endian bytes */
} tgc_tensor_request;

typedef struct tgc_tensor_info {
    char dtype[16];        /* X-Tensor-Dtype: after conversion */
    char shape[256];       /* X-Tensor-Shape: "[2,2]", after the slice */
    char source_dtype[16]; /* X-Tensor-Source-Dtype */
    uint64_t bytes;        /* the bytes written */
} tgc_tensor_info;

/* One tensor (whole, sliced, converted; raw or .npy) into buf (at most cap bytes;
 * more is TGC_REASON_TOO_SMALL) or into the file at path (written as PATH.part,
 * renamed when complete). req and info may be NULL. */
int tgc_tensor_to_buffer(tgc_client *c, const char *model, const char *rev, const char *tensor,
                         const tgc_tensor_request *req, void *buf, size_t cap,
                         tgc_tensor_info *info, tgc_error *err);
int tgc_tensor_to_file(tgc_client *c, const char *model, const char *rev, const char *tensor,
                       const tgc_tensor_request *req, const char *path, tgc_tensor_info *info,
                       tgc_error *err);

/* Many tensors of a version as one safetensors file (POST .../versions/{rev}/bundle):
 * tensors is a NULL-terminated list of selectors (an exact name or a glob with * and
 * ?, each optionally NAME[SLICE], the slice as tgc_tensor_request's), NULL for every
 * tensor; dtype converts every floating tensor (NULL: as stored); file limits the
 * selection to one file of the version (NULL: all its safetensors files). */
typedef struct tgc_bundle_request {
    const char *const *tensors;
    const char *dtype;
    const char *file;
} tgc_bundle_request;

/* The bundle into the file at path (written as PATH.part while it streams, renamed
 * when complete: path never holds a partial bundle; a refusal leaves no file) or into
 * buf (at most cap bytes; more is TGC_REASON_TOO_SMALL). *bytes (may be NULL) gets
 * the bundle's length. A refusal is the server's reason: tensor_not_found,
 * invalid_selector, ambiguous_tensor, bundle_too_large, invalid_slice, ... */
int tgc_bundle_to_file(tgc_client *c, const char *model, const char *rev,
                       const tgc_bundle_request *req, const char *path, uint64_t *bytes,
                       tgc_error *err);
int tgc_bundle_to_buffer(tgc_client *c, const char *model, const char *rev,
                         const tgc_bundle_request *req, void *buf, size_t cap, uint64_t *bytes,
                         tgc_error *err);

/* Bytes [offset, offset + len) of a stored file into buf (cap >= len); *got is the
 * count received (less than len only at the file's end). */
int tgc_fetch_range(tgc_client *c, const char *model, const char *rev, const char *path,
                    uint64_t offset, uint64_t len, void *buf, size_t cap, size_t *got,
                    tgc_error *err);

/* Downloads a stored file to dest. The bytes go to DEST.part; a DEST.part left by
 * an earlier attempt is resumed with Range. When complete, its SHA-256 is checked
 * against sha256_hex (NULL: the server's X-Content-SHA256) and only then renamed to
 * dest: dest never holds a partial or wrong file. A mismatch after a resume starts
 * the file over from byte 0, once (the kept prefix was wrong); a mismatch of a
 * whole download removes DEST.part and is TGC_REASON_SHA256. The body is bounded
 * by the length the answer announces before it (an answer announcing none is
 * TGC_REASON_BAD_ANSWER); a batch download of a known size by that size: a body
 * longer is TGC_REASON_TOO_LARGE and its part file is removed. A tensor written to
 * a file is bounded the same way. A stall is TGC_REASON_STALLED (the part file is
 * kept for a resume). */
int tgc_download(tgc_client *c, const char *model, const char *rev, const char *path,
                 const char *dest, const char *sha256_hex, tgc_error *err);

/* ---- writes ---- */

/* Creates model ("org/name"); *existed (may be NULL) is true when it was there
 * already (409 model_exists is then success). */
int tgc_create_model(tgc_client *c, const char *model, const char *description, bool *existed,
                     tgc_error *err);
/* Opens a new draft version; its number in *version. */
int tgc_create_version(tgc_client *c, const char *model, int *version, tgc_error *err);
/* Uploads the local file as path of the draft; *file_json (may be NULL) gets the
 * server's File object. A gate refusal is -1 with its reason (refused_format, ...). */
int tgc_upload(tgc_client *c, const char *model, int version, const char *path,
               const char *local_file, json_t **file_json, tgc_error *err);
/* Publishes the draft; *version_json (may be NULL) gets the Version object. */
int tgc_publish(tgc_client *c, const char *model, int version, json_t **version_json,
                tgc_error *err);
/* Points alias at a published version. */
int tgc_set_alias(tgc_client *c, const char *model, const char *alias, int version, tgc_error *err);
/* A namespace's code policy (GET /v1/namespaces/{org}/policy; an admin token of org or
 * of every org): *out (required) gets {"namespace", "allow_code", "updated_at"}. With set not NULL
 * the policy is set to *set first (PUT), and *out is the policy as stored. */
int tgc_namespace_policy(tgc_client *c, const char *org, const bool *set, json_t **out,
                         tgc_error *err);

/* ---- the registry's metadata and life cycle (docs/MANUAL.md, "The registry") ---- */

/* What tgc_search_models keeps (GET /v1/models): NULL members match all. Zero-initialize
 * it, so that a field added later reads as its default. */
typedef struct tgc_model_query {
    const char *text; /* ?q=: in the name, the description or a tag value */
    /* ?tag=: "KEY" (has the tag) or "KEY=VALUE" (exactly that value), all must match;
     * at most 8 (more is TGC_REASON_USAGE) */
    const char *const *tags;
    size_t tag_count;
    const char *sort; /* "name" (NULL: the default) or "downloads" (most first) */
    uint64_t limit;   /* the most models returned; 0: all (every page) */
} tgc_model_query;
/* The models matching query (NULL: all), in its order: a JSON array of ModelSummary
 * objects (name, description, tags, downloads, ...). A bad tag key is the server's
 * 400 invalid_tag. */
int tgc_search_models(tgc_client *c, const tgc_model_query *query, json_t **out, tgc_error *err);
/* PATCH the description and tags of model ("org/name"), or of its version rev when rev
 * is not NULL. patch is a MetadataPatch object ({"description": "..." or null, "tags":
 * {"key": "value" or null}}); *out (may be NULL) gets the changed Model, or the
 * VersionSummary for a version. */
int tgc_patch_metadata(tgc_client *c, const char *model, const char *rev, json_t *patch,
                       json_t **out, tgc_error *err);
/* Marks version rev of model deprecated (PUT .../deprecation) with reason (NULL: ""),
 * or takes the mark away (tgc_undeprecate); *out (may be NULL) gets the VersionSummary. */
int tgc_deprecate(tgc_client *c, const char *model, const char *rev, const char *reason,
                  json_t **out, tgc_error *err);
int tgc_undeprecate(tgc_client *c, const char *model, const char *rev, json_t **out,
                    tgc_error *err);
/* Deletes version rev of model: a draft (write scope), or a published version (admin
 * scope; it stays a tombstone that answers 410 version_deleted). */
int tgc_delete_version(tgc_client *c, const char *model, const char *rev, tgc_error *err);
/* Removes alias of model. */
int tgc_delete_alias(tgc_client *c, const char *model, const char *alias, tgc_error *err);
/* A namespace's usage, quota and code policy (GET /v1/namespaces/{org}): the Namespace
 * object {"namespace", "usage_bytes", "quota_bytes", "quota_default", "allow_code"}. */
int tgc_get_namespace(tgc_client *c, const char *org, json_t **out, tgc_error *err);
/* Sets org's storage quota (admin of org): quota_bytes bytes (0: no bound), or with
 * use_default the server's --namespace-quota. *out (may be NULL) gets the Namespace. */
int tgc_set_namespace_quota(tgc_client *c, const char *org, uint64_t quota_bytes, bool use_default,
                            json_t **out, tgc_error *err);

/* POST /v1/models/{model}/mirror with body (endpoint, repo, revision, token,
 * allow_partial): *job gets the queued job (202). GET /v1/jobs/{id}: *job gets it. */
int tgc_mirror(tgc_client *c, const char *model, json_t *body, json_t **job, tgc_error *err);
int tgc_get_job(tgc_client *c, long long id, json_t **job, tgc_error *err);
/* The gate's verdict on a local file, storing nothing (POST /v1/scan). kind:
 * "safetensors", "sidecar", "json", or NULL (the server's default, safetensors).
 * A refused file is success: read "valid" in *verdict. */
int tgc_scan(tgc_client *c, const char *local_file, const char *kind, json_t **verdict,
             tgc_error *err);

/* What tgc_scan_with sends with the file (every field may be NULL: the server's
 * default). Zero-initialize it, so that a field added later reads as its default. */
typedef struct tgc_scan_options {
    const char *kind; /* as tgc_scan's kind */
    /* The name the server judges the body under (?name=), e.g. the file's base name:
     * a name that marks code (x.py, run.sh, lib.so) is refused as code, as an upload
     * of that name is, and code refusals name it. NULL: content alone decides. */
    const char *name;
    /* The answer's form (?format=): "json" (the verdict, as tgc_scan) or "sarif" (a
     * SARIF 2.1.0 log, application/sarif+json; docs/MANUAL.md). */
    const char *format;
} tgc_scan_options;

/* tgc_scan with options (NULL: none): *answer gets the verdict, or the SARIF log with
 * format "sarif". A refused file is success. tgc_scan keeps its signature and meaning:
 * it is tgc_scan_with with a kind only (no name, JSON). */
int tgc_scan_with(tgc_client *c, const char *local_file, const tgc_scan_options *options,
                  json_t **answer, tgc_error *err);

/* What tgc_list_rejections keeps (GET /v1/rejections): NULL members match all;
 * since and until are RFC 3339 date-times (until exclusive); sha256 64 hex digits. */
typedef struct tgc_rejection_query {
    const char *reason;
    const char *namespace_name;
    const char *since;
    const char *until;
    const char *sha256;
    uint64_t limit; /* the most records visited; 0: all */
} tgc_rejection_query;
/* The recorded refusals (needs an admin token; a namespace's admin sees its
 * namespace's), newest first, page by page (at most 1000 records in memory, whatever
 * the total): visit(user, record) gets each (a Rejection object of openapi.yaml,
 * borrowed for the call) and returns 0 to go on, anything else to stop (then 0 is
 * returned). A bad filter is the server's 400 (reason invalid_time, invalid_sha256,
 * ...) in err. */
int tgc_list_rejections(tgc_client *c, const tgc_rejection_query *query,
                        int (*visit)(void *user, const json_t *record), void *user, tgc_error *err);

/* ---- many transfers at once ---- */

typedef struct tgc_batch tgc_batch;

/* Progress of a running batch: bytes moved (up and down) of the total planned. */
typedef void (*tgc_progress_fn)(void *user, uint64_t bytes_done, uint64_t bytes_total,
                                size_t items_done, size_t items_total);
/* Called once per item as it ends: rc 0 or -1, err (on failure), json (an
 * upload's File object, or NULL; borrowed for the call). */
typedef void (*tgc_item_fn)(void *user, size_t index, int rc, const tgc_error *err,
                            const json_t *json);

tgc_batch *tgc_batch_new(tgc_client *c);
void tgc_batch_free(tgc_batch *b);
/* As tgc_download; size (0: unknown) feeds the progress total and bounds the body:
 * the server may send no byte more. Returns the item's index, or -1 (out of
 * memory, or a path that tgc_path_is_safe refuses). */
long tgc_batch_add_download(tgc_batch *b, const char *model, const char *rev, const char *path,
                            const char *dest, const char *sha256_hex, uint64_t size);
/* As tgc_upload. */
long tgc_batch_add_upload(tgc_batch *b, const char *model, int version, const char *path,
                          const char *local_file);
/* Runs every item, at most `parallel` at once (0: the client's option), each with the
 * retry policy. Returns the number of items that failed. */
size_t tgc_batch_run(tgc_batch *b, unsigned parallel, tgc_progress_fn progress,
                     tgc_item_fn item_done, void *user);
size_t tgc_batch_count(const tgc_batch *b);
/* An item's outcome after the run: 0, or -1 with *err pointing at its error. */
int tgc_batch_result(const tgc_batch *b, size_t index, const tgc_error **err);

#endif
