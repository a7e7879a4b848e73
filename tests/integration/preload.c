/* Preloads end to end on the host backend with the real server: POST/GET/DELETE
 * /v1/preloads and their errors, the hand-off socket to a consumer PROCESS that
 * maps the sealed memfd and compares every tensor with the uploaded file (also
 * after a dtype conversion, against st_convert), leases that keep memory through
 * a DELETE, kill -9 of a consumer releasing its lease, and LRU eviction under a
 * small budget.
 *
 * The consumer is this program run again as `preload consumer SOCKET TOKEN ID
 * FILE`: it prints "verified N" (or "error ...") and holds the lease until its
 * stdin closes; "check" on stdin verifies again. */
#include "harness.h"

#include <sys/mman.h>
#include <unistd.h>

#include "st_convert.h"
#include "st_header.h"
/* The client library has no Makefile rule of its own yet: compiled in here. */
#include "tg_preload_client.h"

#define MODEL "/v1/models/org/pre"
#define BUDGET_BYTES 262144 /* --preload-budget-host: two 96 KiB tensors fit, three do not */

/* ---------- the consumer process ---------- */

static int verify(tg_preload_client *c, const unsigned char *file, size_t file_len)
{
    st_file header;
    st_error error;
    if (st_header_parse(file, file_len, file_len, NULL, &header, &error) != ST_OK)
        return -1;
    int verified = 0;
    for (size_t i = 0; i < tg_preload_tensor_count(c); i++) {
        const tg_preload_tensor *t = tg_preload_tensor_at(c, i);
        const st_tensor *source = st_file_find(&header, t->name, strlen(t->name));
        const unsigned char *placed = tg_preload_data(c, t);
        st_dtype dtype;
        if (source == NULL || placed == NULL || t->offset % 256 != 0 ||
            !st_dtype_from_name(t->dtype, strlen(t->dtype), &dtype)) {
            verified = -1;
            break;
        }
        const unsigned char *bytes = file + header.data_start + source->begin;
        bool same;
        if (dtype == source->dtype) {
            same = t->bytes == source->end - source->begin && memcmp(placed, bytes, t->bytes) == 0;
        } else {
            unsigned char *expected = malloc(t->bytes + 1);
            st_convert(source->dtype, dtype, bytes, expected, (size_t)source->elements);
            same = memcmp(placed, expected, t->bytes) == 0;
            free(expected);
        }
        if (!same) {
            verified = -1;
            break;
        }
        verified++;
    }
    st_file_free(&header);
    return verified;
}

static int consumer_main(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int fd = open(argv[6], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return 2;
    unsigned char *file = malloc((size_t)st.st_size + 1);
    if (read(fd, file, (size_t)st.st_size) != st.st_size)
        return 2;
    close(fd);
    tg_preload_client *c = NULL;
    char err[512];
    if (tg_preload_open(argv[3], argv[4], argv[5], &c, err, sizeof err) != 0) {
        printf("error %s\n", err);
        return 1;
    }
    printf("verified %d\n", verify(c, file, (size_t)st.st_size));
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL)
        if (strncmp(line, "check", 5) == 0)
            printf("verified %d\n", verify(c, file, (size_t)st.st_size));
    tg_preload_close(c);
    free(file);
    return 0;
}

/* ---------- the test ---------- */

typedef struct consumer {
    pid_t pid;
    FILE *out; /* its stdout */
    int in;    /* its stdin */
} consumer;

static char self_path[600];
static char socket_path[400];
static char model_file[400];
static const char *read_token;
static const char *write_token;

static consumer consumer_start(const char *id, const char *token)
{
    consumer c = {0, NULL, -1};
    int to_child[2], from_child[2];
    /* close-on-exec: a later consumer must not inherit this one's stdin, or its EOF never comes */
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
        return c;
    c.pid = fork();
    if (c.pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        execl(self_path, self_path, "consumer", "-", socket_path, token, id, model_file,
              (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    c.in = to_child[1];
    c.out = fdopen(from_child[0], "r");
    return c;
}

static const char *consumer_line(consumer *c)
{
    static char line[600];
    line[0] = '\0';
    if (c->out == NULL || fgets(line, sizeof line, c->out) == NULL)
        return "";
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static void consumer_end(consumer *c, bool kill9)
{
    if (c->pid <= 0)
        return;
    if (kill9)
        kill(c->pid, SIGKILL);
    close(c->in);
    waitpid(c->pid, NULL, 0);
    fclose(c->out);
    c->pid = 0;
}

static it_response post_preload(const char *json)
{
    return it_send_json("POST", "/v1/preloads", write_token, json);
}

/* Polls GET /v1/preloads/{id} until the state is `want` (or 404 for "gone"). */
static bool wait_state(const char *id, const char *want)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    for (int i = 0; i < 500; i++) {
        it_response r = it_get(path);
        bool done = strcmp(want, "gone") == 0 ? r.status == 404
                                              : r.status == 200 && it_json_str(&r, "state") &&
                                                    strcmp(it_json_str(&r, "state"), want) == 0;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

/* Polls GET /v1/preloads/{id} until it shows `leases` leases (at most ~10 s): a
 * consumer's close reaches the server's lease thread a little after the consumer
 * exits, so what follows a lease's end waits for the server to have seen it. */
static bool wait_leases(const char *id, long long leases)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    for (int i = 0; i < 500; i++) {
        it_response r = it_get(path);
        bool done = r.status == 200 && it_json_int(r.json, "leases") == leases;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

static void copy_id(const it_response *r, char *id)
{
    const char *text = it_json_str(r, "id");
    snprintf(id, 17, "%s", text ? text : "");
}

static void setup_model(void)
{
    it_response r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"org/pre\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* One file, in the reference writer's spirit but not its order: file order is the
     * data offset order, which is what the layout must follow. */
    it_tensor_spec tensors[] = {
        {"model.layers.0.w", "F32", 2, {64, 64}},
        {"model.layers.0.b", "F32", 1, {63}},
        {"model.layers.1.w", "F32", 2, {33, 17}},
        {"emb", "I64", 1, {10}},
        {"big.a", "F32", 1, {24576}},
        {"big.b", "F32", 1, {24576}},
        {"big.c", "F32", 1, {24576}},
        {"huge", "F32", 1, {70000}},
    };
    it_buf file = {0};
    it_build_safetensors(&file, tensors, 8, NULL, 42);
    /* Values with fractions so the BF16 conversion rounds. */
    float *f = (float *)(file.data + 8 + it_header_len(&file));
    for (int i = 0; i < 64 * 64 + 63 + 33 * 17; i++)
        f[i] = f[i] * 1.0137f + 0.3f;
    snprintf(model_file, sizeof model_file, "%s/model.safetensors", it_srv.root);
    FILE *out = fopen(model_file, "wb");
    CHECK(out && fwrite(file.data, 1, file.len, out) == file.len);
    fclose(out);
    r = it_send("PUT", MODEL "/versions/1/files/model.safetensors", write_token, file.data,
                file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions/1/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    it_buf_free(&file);
}

TEST(errors_are_problems)
{
    it_response r = it_send_json("POST", "/v1/preloads", NULL, "{\"model\":\"org/pre\"}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    /* The token is judged before the body: no token is 401, a read token 403,
     * whatever the body holds (not JSON, an unknown field, a bad name). */
    static const char *const bad_bodies[] = {"{not json", "{\"model\":\"org/pre\",\"bogus\":1}",
                                             "{\"model\":\"no-slash\"}", "[]"};
    for (size_t i = 0; i < sizeof bad_bodies / sizeof bad_bodies[0]; i++) {
        r = it_send_json("POST", "/v1/preloads", NULL, bad_bodies[i]);
        CHECK_PROBLEM(r, 401, "unauthorized");
        it_response_free(&r);
        r = it_send_json("POST", "/v1/preloads", read_token, bad_bodies[i]);
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
        /* a writer still gets the body's own error */
        r = post_preload(bad_bodies[i]);
        CHECK(r.status == 400);
        it_response_free(&r);
    }
    r = it_send_json("POST", "/v1/preloads", read_token, "{\"model\":\"org/pre\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/none\"}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"version\":7}");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"tensors\":[\"model.layers.9.w\"]}");
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"tensors\":[\"model.layers.9.*\"]}");
    CHECK_PROBLEM(r, 422, "no_tensors");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"device\":\"tpu:0\"}");
    CHECK_PROBLEM(r, 400, "invalid_device");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"dtype\":\"I32\"}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = post_preload("{\"model\":\"org/pre\",\"tensors\":[\"huge\",\"big.a\"]}");
    CHECK_PROBLEM(r, 507, "preload_budget");
    it_response_free(&r);
    r = it_get("/v1/preloads/0123456789abcdef");
    CHECK_PROBLEM(r, 404, "preload_not_found");
    it_response_free(&r);

    /* cuda:0 without a driver: 503 with the reason /readyz also gives. */
    it_response ready = it_get("/readyz");
    CHECK_STATUS(ready, 200);
    json_t *gpu = json_object_get(ready.json, "gpu");
    CHECK(json_is_boolean(json_object_get(gpu, "available")));
    if (json_is_false(json_object_get(gpu, "available"))) {
        r = post_preload("{\"model\":\"org/pre\",\"device\":\"cuda:0\"}");
        CHECK_PROBLEM(r, 503, "device_unavailable");
        CHECK_STR(it_json_str(&r, "detail"), json_string_value(json_object_get(gpu, "reason")));
        it_response_free(&r);
        it_response m = it_get("/metrics");
        CHECK(m.body.data &&
              strstr((char *)m.body.data, "tensorgate_preload_device_available{kind=\"cuda\"") &&
              strstr((char *)m.body.data, "\"} 0\n"));
        it_response_free(&m);
    }
    it_response_free(&ready);
}

TEST(preload_hand_off_lease_and_kill)
{
    it_response r = post_preload(
        "{\"model\":\"org/pre\",\"version\":\"latest\",\"tensors\":[\"model.layers.0.*\"]}");
    CHECK_STATUS(r, 202);
    char id[17], location[128], want[128];
    copy_id(&r, id);
    it_header(&r, "Location", location, sizeof location);
    snprintf(want, sizeof want, "/v1/preloads/%s", id);
    CHECK_STR(location, want);
    it_response_free(&r);
    CHECK(wait_state(id, "resident"));

    r = it_get(want);
    CHECK_STATUS(r, 200);
    json_t *layout = json_object_get(r.json, "layout");
    CHECK(json_array_size(layout) == 2);
    /* File order: .w was written before .b. */
    CHECK_STR(json_string_value(json_object_get(json_array_get(layout, 0), "name")),
              "model.layers.0.w");
    CHECK_STR(json_string_value(json_object_get(json_array_get(layout, 1), "name")),
              "model.layers.0.b");
    CHECK(it_json_int(json_array_get(layout, 1), "offset") % 256 == 0);
    CHECK(it_json_int(json_array_get(layout, 1), "offset") == 16384);
    CHECK(it_json_int(r.json, "bytes_copied") == 64 * 64 * 4 + 63 * 4);
    CHECK(json_is_number(json_object_get(r.json, "gbps")));
    CHECK_STR(it_json_str(&r, "device"), "host");
    it_response_free(&r);

    /* A bad token on the socket is refused. */
    tg_preload_client *client = NULL;
    char err[512];
    CHECK(tg_preload_open(socket_path, "tg_bogus", id, &client, err, sizeof err) != 0);
    CHECK(strncmp(err, "unauthorized", 12) == 0);

    /* The Python example maps the same memory as NumPy arrays and checks the bytes. */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[1600], line[256];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 examples/host_numpy.py --socket '%s' --token '%s' --preload %s "
                 "--check '%s' 2>&1",
                 socket_path, read_token, id, model_file);
        FILE *p = popen(cmd, "r");
        bool ok = false;
        while (p && fgets(line, sizeof line, p) != NULL) {
            ok = ok || strcmp(line, "ok 2 of 2\n") == 0;
            fprintf(stderr, "host_numpy.py: %s", line);
        }
        CHECK(p != NULL && pclose(p) == 0 && ok);
        /* its lease ends when the server sees its socket close, a little after it exits */
        CHECK(wait_leases(id, 0));
    }

    consumer c = consumer_start(id, read_token);
    CHECK_STR(consumer_line(&c), "verified 2");
    /* DELETE while leased: deferred. */
    r = it_request("DELETE", want, &(it_request_opts){.token = write_token});
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "state"), "evicting");
    it_response_free(&r);
    r = it_get(want);
    CHECK_STR(it_json_str(&r, "state"), "evicting");
    CHECK(it_json_int(r.json, "leases") == 1);
    /* it names the host (and process) that holds it: replicas do not share preloads */
    char host[256];
    CHECK(gethostname(host, sizeof host) == 0);
    host[sizeof host - 1] = '\0';
    CHECK_STR(it_json_str(&r, "host"), host);
    CHECK(it_json_int(r.json, "pid") > 0);
    it_response_free(&r);
    /* The memory stays valid for the consumer. */
    CHECK(write(c.in, "check\n", 6) == 6);
    CHECK_STR(consumer_line(&c), "verified 2");
    /* kill -9: the kernel closes its socket, the lease ends, the eviction happens. */
    consumer_end(&c, true);
    CHECK(wait_state(id, "gone"));
}

TEST(conversion_during_preload)
{
    it_response r = post_preload(
        "{\"model\":\"org/pre\",\"tensors\":[\"model.layers.1.w\",\"emb\"],\"dtype\":\"BF16\"}");
    CHECK_STATUS(r, 202);
    char id[17], path[64];
    copy_id(&r, id);
    it_response_free(&r);
    CHECK(wait_state(id, "resident"));
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    r = it_get(path);
    json_t *layout = json_object_get(r.json, "layout");
    CHECK_STR(json_string_value(json_object_get(json_array_get(layout, 0), "dtype")), "BF16");
    CHECK(it_json_int(json_array_get(layout, 0), "bytes") == 33 * 17 * 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(layout, 1), "dtype")), "I64");
    CHECK_STR(it_json_str(&r, "dtype"), "BF16");
    it_response_free(&r);
    /* The consumer compares the BF16 bytes with st_convert of the file's F32. */
    consumer c = consumer_start(id, read_token);
    CHECK_STR(consumer_line(&c), "verified 2");
    consumer_end(&c, false);
    /* Closing normally releases too (once the server has seen the close); unleased,
     * DELETE is immediate. */
    CHECK(wait_leases(id, 0));
    r = it_request("DELETE", path, &(it_request_opts){.token = write_token});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get(path);
    CHECK_STATUS(r, 404);
    it_response_free(&r);
}

static bool post_and_wait(const char *tensor, char *id)
{
    char body[200];
    snprintf(body, sizeof body, "{\"model\":\"org/pre\",\"tensors\":[\"%s\"]}", tensor);
    it_response r = post_preload(body);
    CHECK_STATUS(r, 202);
    copy_id(&r, id);
    it_response_free(&r);
    return wait_state(id, "resident");
}

static const char *state_of(const char *id)
{
    static char state[32];
    char path[64];
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    it_response r = it_get(path);
    snprintf(state, sizeof state, "%s",
             r.status == 404            ? "gone"
             : it_json_str(&r, "state") ? it_json_str(&r, "state")
                                        : "?");
    it_response_free(&r);
    return state;
}

TEST(lru_eviction_under_a_small_budget)
{
    char a[17], b[17], c3[17], d[17];
    CHECK(post_and_wait("big.a", a));
    CHECK(post_and_wait("big.b", b));
    /* A used after B: B is now the least recently used. */
    consumer touch = consumer_start(a, read_token);
    CHECK_STR(consumer_line(&touch), "verified 1");
    consumer_end(&touch, false);
    CHECK(post_and_wait("big.c", c3));
    CHECK_STR(state_of(b), "gone");
    CHECK_STR(state_of(a), "resident");

    /* A held by a consumer: the next admission evicts C, never A. */
    consumer holder = consumer_start(a, read_token);
    CHECK_STR(consumer_line(&holder), "verified 1");
    CHECK(post_and_wait("big.b", d));
    CHECK_STR(state_of(c3), "gone");
    CHECK_STR(state_of(a), "resident");
    /* A is leased, D is not: 112 KiB more fits only by evicting D. */
    it_response r =
        post_preload("{\"model\":\"org/pre\",\"tensors\":[\"big.c\",\"model.layers.0.w\"]}");
    CHECK_STATUS(r, 202);
    char e[17];
    copy_id(&r, e);
    it_response_free(&r);
    /* Only resident preloads can be evicted: wait for this one before the next admission. */
    CHECK(wait_state(e, "resident"));
    CHECK_STR(state_of(d), "gone");
    /* A leased twice now; the next admission evicts the unleased one again. */
    consumer holder2 = consumer_start(a, read_token);
    CHECK_STR(consumer_line(&holder2), "verified 1");
    r = post_preload("{\"model\":\"org/"
                     "pre\",\"tensors\":[\"big.a\",\"model.layers.0.w\",\"model.layers.1.w\"]}");
    CHECK_STATUS(r, 202);
    it_response_free(&r);
    /* A (leased, 96 KiB) + 192 KiB is over the 256 KiB budget whatever is evicted: 507. */
    r = post_preload("{\"model\":\"org/pre\",\"tensors\":[\"big.b\",\"big.c\"]}");
    CHECK_PROBLEM(r, 507, "preload_budget");
    it_response_free(&r);

    /* The list shows the host budget and what is in use. */
    r = it_get("/v1/preloads");
    CHECK_STATUS(r, 200);
    json_t *devices = json_object_get(r.json, "devices");
    bool found = false;
    for (size_t i = 0; i < json_array_size(devices); i++) {
        json_t *dev = json_array_get(devices, i);
        if (strcmp(json_string_value(json_object_get(dev, "device")), "host") != 0)
            continue;
        found = true;
        CHECK(it_json_int(dev, "budget_bytes") == BUDGET_BYTES);
        CHECK(it_json_int(dev, "used_bytes") > 0 && it_json_int(dev, "used_bytes") <= BUDGET_BYTES);
    }
    CHECK(found);
    CHECK(json_array_size(json_object_get(r.json, "preloads")) >= 2);
    it_response_free(&r);
    consumer_end(&holder, false);
    consumer_end(&holder2, false);
    CHECK_STR(state_of(a), "resident");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "consumer") == 0)
        return consumer_main(argc, argv);
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 2;
    self_path[n] = '\0';
    static const char *const flags[] = {"--preload-budget-host", "262144", NULL};
    it_init(argc, argv, flags);
    snprintf(socket_path, sizeof socket_path, "%s/preload.sock", it_srv.data);
    write_token = it_token("write", NULL);
    read_token = it_token("read", "org");
    setup_model();
    RUN(errors_are_problems);
    RUN(preload_hand_off_lease_and_kill);
    RUN(conversion_during_preload);
    RUN(lru_eviction_under_a_small_budget);
    return it_finish(argv[0]);
}
