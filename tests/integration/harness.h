/* Integration-test harness: starts the real `tensorgate serve` binary on a free
 * loopback port with a temporary data directory, talks HTTP to it with libcurl,
 * and builds the files the tests upload (safetensors, pickle, zip, npy, gguf).
 * This header declares it; tests/integration/harness.c defines it and is compiled
 * once per build into build/tests/integration/libharness.a, which every
 * tests/integration/X and tests/unit/server/routes/X program links.
 *
 * Each such program uses tests/unit/test.h's TEST/RUN/CHECK and ends with
 * `return it_finish(argv[0]);`. The build directory comes from argv[1], else
 * $TG_BUILD, else "build". Everything is bounded in time: each request has curl
 * timeouts, the server start waits at most IT_START_SECONDS, and an alarm kills
 * the server and the program after IT_PROGRAM_SECONDS. The server also dies with
 * the harness (PR_SET_PDEATHSIG) and is killed by an atexit handler. */
#ifndef TG_IT_HARNESS_H
#define TG_IT_HARNESS_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IT_START_SECONDS 15
#define IT_STOP_SECONDS 10
#define IT_PROGRAM_SECONDS 120
#define IT_REQUEST_SECONDS 30L

/* ---------- small buffers ---------- */

/* A growable byte buffer, always NUL-terminated past len (text bodies stay
 * printable). Zero-initialised is empty; running out of memory ends the program. */
typedef struct it_buf {
    unsigned char *data;
    size_t len;
    size_t cap;
} it_buf;

void it_buf_append(it_buf *b, const void *data, size_t len);
/* At most 4095 bytes per call. */
void it_buf_printf(it_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void it_buf_free(it_buf *b);
/* Reads a whole file into out (appending); false if it cannot be opened or read. */
bool it_read_file(const char *path, it_buf *out);
void it_sha256_hex(const void *data, size_t len, char out[65]);

/* ---------- the server process ---------- */

typedef struct it_server {
    pid_t pid;
    int port;
    char root[256]; /* mkdtemp directory: data/ and server.log inside */
    char data[300]; /* the --data directory */
    char log[400];  /* the server's stderr */
    char base[64];  /* http://127.0.0.1:PORT */
} it_server;

extern char it_build_dir[512]; /* argv[1], $TG_BUILD or "build" */
extern char it_binary[600];    /* it_build_dir/tensorgate-test (test hooks in) */
extern it_server it_srv;       /* the one server of this program */
extern char it_root_dir[256];  /* removed at exit unless $TG_IT_KEEP is set */

/* Parses argv, arms the alarm, makes the temp directory and starts the server
 * with the given extra flags (NULL-terminated, or NULL). Exits the program if
 * the server cannot start. */
void it_init(int argc, char **argv, const char *const *extra_flags);
/* Starts the server on it_srv.data with extra flags (NULL-terminated list).
 * Returns 0 once it listens; -1 if it exited or never announced a port in time.
 * *exit_status gets the status if it exited. */
int it_server_start_args(const char *const *extra, int *exit_status);
/* SIGTERM, then waits; returns the exit status (or -1 if it had to be killed). */
int it_server_stop(void);
void it_kill_server(void);
void it_dump_log(const char *log);
/* Runs `tensorgate token create --data DIR --scope SCOPE [--namespace NS]` and
 * returns the token (one of 16 static slots, reused in turn). */
const char *it_token(const char *scope, const char *namespace_);
/* Creates a token (as it_token) and revokes it with `tensorgate token revoke`, so
 * the text is one the server once knew and must now refuse. The id revoked is the
 * newest in `tensorgate token list` (ids grow). Returns "" if anything failed. */
const char *it_token_revoked(const char *scope, const char *namespace_);

/* ---------- HTTP ---------- */

typedef struct it_response {
    long status;
    it_buf body;
    it_buf headers; /* raw header lines of the last response */
    json_t *json;   /* parsed body when it is JSON, else NULL */
    CURLcode curl_code;
} it_response;

typedef struct it_request_opts {
    const char *token;          /* Authorization: Bearer */
    const char *const *headers; /* extra header lines, NULL-terminated */
    const void *body;
    size_t body_len;
    bool has_body;
    bool chunked; /* send body with Transfer-Encoding: chunked */
    /* Ask with Expect: 100-continue and send the body only after the server's go-ahead
     * (what curl does by itself for large bodies). A refusal answered at the headers
     * (413 from Content-Length) then always reaches the client: without it the client
     * is still sending when the server closes, and the reset of a socket closed with
     * unread data can destroy the answer before the client reads it. */
    bool expect_continue;
} it_request_opts;

/* Performs METHOD base+path (o may be NULL). Free the response with it_response_free. */
it_response it_request(const char *method, const char *path, const it_request_opts *o);
it_response it_get(const char *path);
/* With a body when body != NULL (Content-Type: application/octet-stream). */
it_response it_send(const char *method, const char *path, const char *token, const void *body,
                    size_t len);
/* With a JSON body when json_text != NULL (Content-Type: application/json). */
it_response it_send_json(const char *method, const char *path, const char *token,
                         const char *json_text);
void it_response_free(it_response *r);
/* libcurl callbacks appending to an it_buf (the header one keeps the last block). */
size_t it_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata);
size_t it_header_cb(char *ptr, size_t size, size_t nmemb, void *userdata);
/* Value of header NAME in the response (case-insensitive), copied into out; NULL if absent. */
const char *it_header(const it_response *r, const char *name, char *out, size_t cap);
const char *it_json_str(const it_response *r, const char *key);
long long it_json_int(const json_t *obj, const char *key);
/* The problem+json "reason", or NULL. */
const char *it_reason(const it_response *r);

/* CHECK that a response has the status; on failure print the body to help. */
#define CHECK_STATUS(resp, code)                                                                   \
    do {                                                                                           \
        long it_got_ = (resp).status;                                                              \
        if (it_got_ == (code)) {                                                                   \
            test_checks_passed++;                                                                  \
        } else {                                                                                   \
            test_checks_failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: status %ld, expected %d; body: %.400s\n", __FILE__,        \
                    __LINE__, test_current, it_got_, (int)(code),                                  \
                    (resp).body.data ? (const char *)(resp).body.data : "");                       \
        }                                                                                          \
    } while (0)

/* CHECK that a response is a problem+json with this status and reason. */
#define CHECK_PROBLEM(resp, code, reason_)                                                         \
    do {                                                                                           \
        CHECK_STATUS(resp, code);                                                                  \
        CHECK_STR(it_reason(&(resp)), reason_);                                                    \
        char it_ct_[128];                                                                          \
        it_header(&(resp), "Content-Type", it_ct_, sizeof it_ct_);                                 \
        CHECK_STR(it_ct_, "application/problem+json");                                             \
    } while (0)

/* Creates MODEL ("org/name"; one that exists already is fine), opens a new draft,
 * uploads `file` as `path` when file is not NULL, and publishes the draft when
 * `publish`. Returns the version number, or -1 after printing what failed. */
int it_make_version(const char *token, const char *model, const char *path, const it_buf *file,
                    bool publish);

/* ---------- the data directory ---------- */

int it_count_blobs(void);
/* Files left in tmp/, waiting up to 3 s for in-flight cleanup to finish. */
int it_count_tmp_settled(void);
bool it_blob_exists(const char *sha_hex);

/* ---------- file builders ---------- */

typedef struct it_tensor_spec {
    const char *name;
    const char *dtype; /* F32, F16, I64, ... */
    int ndim;
    uint64_t shape[4];
} it_tensor_spec;

uint64_t it_dtype_bytes(const char *dtype);
/* Builds a valid safetensors file: tensors laid out in order, header padded with
 * spaces to a multiple of 8, data filled from `seed` (deterministic, finite
 * floats for F32: small integers). metadata_json may be NULL or an object text. */
void it_build_safetensors(it_buf *out, const it_tensor_spec *t, int count,
                          const char *metadata_json, unsigned seed);
/* A safetensors file with an exact header text (not padded) and data_len zero bytes. */
void it_build_raw_safetensors(it_buf *out, const char *header, size_t data_len);
/* Header size N of a safetensors buffer (its first 8 bytes, little-endian). */
uint64_t it_header_len(const it_buf *b);
uint32_t it_crc32(const unsigned char *p, size_t n);
void it_put_u16(it_buf *b, uint16_t v);
void it_put_u32(it_buf *b, uint32_t v);
/* A stored (uncompressed) ZIP archive with the given members. */
void it_build_zip(it_buf *out, const char *const *names, const it_buf *contents, int count);
/* A ZIP as PyTorch writes its checkpoints (torch.save): archive/data.pkl,
 * archive/version, archive/data/0. */
void it_build_pytorch_zip(it_buf *out);
/* numpy.save of float32 zeros(4) (format 1.0: header padded to a multiple of 64). */
void it_build_npy(it_buf *out);
/* GGUF v3 with no tensors and no metadata (magic, version, counts). */
void it_build_gguf(it_buf *out);

/* A protocol-2 pickle of {'w': 1} like torch.save's data.pkl would start. */
extern const unsigned char it_pickle_p2[17];
/* pickle.dumps({'w': 1}, protocol=4) */
extern const unsigned char it_pickle_p4[21];
/* a protocol-0 os.system('echo hi'): plain ASCII text that imports and calls */
extern const char it_pickle_p0[];
/* os.system('echo hi') pickled with protocol 2 on Linux: GLOBAL posix.system + REDUCE */
extern const unsigned char it_pickle_posix_system[39];

/* ---------- raw sockets (for what libcurl hides) ---------- */

/* A TCP connection to the server with 10 s send and receive timeouts, or -1. */
int it_connect(void);
bool it_write_all(int fd, const void *data, size_t len);
/* Reads from fd until the peer closes, the timeout, or `cap` bytes (NUL-terminated). */
size_t it_read_some(int fd, char *out, size_t cap, int timeout_ms);

/* ---------- the program's end ---------- */

/* The check counters are the program's own (test.h's statics), so what counts
 * checks stays in the header: harness.c defines TG_IT_HARNESS_C and sees none of it. */
#ifndef TG_IT_HARNESS_C
#include "test.h"

/* Stops the server (the contract: it exits cleanly on SIGTERM, a check), dumps its
 * log if a check failed, and reports (test_report). Fails when no check ran
 * before this one: a program whose tests checked nothing proves nothing. */
static inline int it_finish(const char *program)
{
    int ran = test_checks_passed + test_checks_failed;
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (test_checks_failed > 0)
        it_dump_log(it_srv.log);
    int rc = test_report(program);
    if (ran == 0) {
        fprintf(stderr, "%s: no check ran before the server's stop\n", program);
        return 1;
    }
    return rc;
}
#endif

#endif
