/* Helpers of the local file commands: see tg_local.h. */
#include "tg_local.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

/* limits.release for a header judged in the file's mapping: the pages the parser
 * has passed are dropped (a private read-only file mapping reads them back from the
 * page cache if touched again), so the header is not resident whole beside the
 * parser's records. */
static void drop_mapped_pages(void *context, uint64_t from, uint64_t to)
{
    uint8_t *base = context;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = (from + page - 1) / page * page, end = to / page * page;
    if (end > start)
        (void)madvise(base + start, (size_t)(end - start), MADV_DONTNEED);
}

/* A header judged in the file's mapping faults (SIGBUS) if another process shrinks
 * the file under it. The parse allocates, so it cannot be abandoned by a jump (the
 * server's map_guard): while the mapping is in use, such a fault ends the command
 * with a sentence and exit status 2 (an I/O failure), never a crash. */
static void mapped_file_shrank(int sig)
{
    (void)sig;
    static const char text[] = "tensorgate: the file shrank while its header was read "
                               "through its mapping (SIGBUS); nothing was judged\n";
    ssize_t ignored = write(STDERR_FILENO, text, sizeof text - 1);
    (void)ignored;
    _exit(2);
}

int tg_local_gate_file(const char *path, const st_gate_config *config, tg_local_hash hash,
                       tg_local_run *run)
{
    memset(run, 0, sizeof *run);
    bool is_stdin = strcmp(path, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tensorgate: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "tensorgate: %s: %s\n", path, strerror(errno));
        goto fail_fd;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tensorgate: %s: is a directory\n", path);
        goto fail_fd;
    }
    /* only a regular file's size is known up front; pipes stream with it unknown */
    uint64_t declared = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : ST_FILE_SIZE_UNKNOWN;
    /* The verdict alone, nothing hashed: the gate judges a long header in a mapping of
     * the file instead of a copy of it (st_gate_config.input), giving the pages back as
     * the parse passes them. The bytes fed are still read, so the mapped header is
     * judged only once read() has returned all of it. */
    st_gate_config local = *config;
    void *map = MAP_FAILED;
    size_t map_len = 0;
    struct sigaction saved_bus;
    bool bus_set = false;
    if (config->verdict_only && hash == TG_LOCAL_HASH_NONE && declared != ST_FILE_SIZE_UNKNOWN &&
        declared > ST_SNIFF_HEAD_MAX && declared <= SIZE_MAX) {
        map_len = (size_t)declared;
        struct sigaction bus = {.sa_handler = mapped_file_shrank};
        sigemptyset(&bus.sa_mask);
        if (sigaction(SIGBUS, &bus, &saved_bus) == 0) {
            bus_set = true;
            map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        }
        if (map != MAP_FAILED) {
            local.input = map;
            local.input_len = declared;
            local.limits.release = drop_mapped_pages;
            local.limits.release_context = map;
        }
    }
    run->gate = st_gate_new(&local, declared);
    uint8_t *chunk = malloc(TG_LOCAL_READ_SIZE);
    tg_sha256 md = {0};
    if (run->gate == NULL || chunk == NULL) {
        fprintf(stderr, "tensorgate: %s: out of memory\n", path);
        goto fail_all;
    }
    if (hash != TG_LOCAL_HASH_NONE && tg_sha256_init(&md, "local") != 0) {
        fprintf(stderr, "tensorgate: %s: SHA-256 failed\n", path);
        goto fail_all;
    }
    st_gate_status status = ST_GATE_CONTINUE;
    /* the first read takes the head the gate judges first (the sniff window holds a
     * usual header whole); when the data section may be passed over unread, reading
     * a whole TG_LOCAL_READ_SIZE there would read data for nothing */
    size_t want = hash == TG_LOCAL_HASH_NONE ? ST_SNIFF_HEAD_MAX : TG_LOCAL_READ_SIZE;
    for (;;) {
        ssize_t got = read(fd, chunk, want);
        /* with the header judged in the mapping, its bytes only pass through here:
         * a small read keeps the buffer's resident part small */
        want = map != MAP_FAILED ? ST_SNIFF_HEAD_MAX : TG_LOCAL_READ_SIZE;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "tensorgate: %s: read: %s\n", path, strerror(errno));
            goto fail_all;
        }
        if (got == 0)
            break;
        run->size += (uint64_t)got;
        if (hash != TG_LOCAL_HASH_NONE && tg_sha256_update(&md, chunk, (size_t)got) != 0) {
            fprintf(stderr, "tensorgate: %s: SHA-256 failed\n", path);
            goto fail_all;
        }
        if (status != ST_GATE_CONTINUE)
            continue; /* refused, read on only to hash the whole file */
        status = st_gate_feed(run->gate, chunk, (size_t)got);
        /* a refusal is final: the rest of the file cannot change it */
        if (status != ST_GATE_CONTINUE && hash != TG_LOCAL_HASH_WHOLE)
            break;
        /* nothing hashed and no check on the values: past the header, only the data
         * section's length decides, and fstat gave it; the bytes are never read */
        if (hash == TG_LOCAL_HASH_NONE && declared != ST_FILE_SIZE_UNKNOWN &&
            st_gate_data_skippable(run->gate)) {
            uint64_t rest = declared > run->size ? declared - run->size : 0;
            status = st_gate_skip(run->gate, rest);
            run->size += rest;
            break;
        }
    }
    if (status == ST_GATE_CONTINUE || hash == TG_LOCAL_HASH_WHOLE) {
        st_gate_finish(run->gate);
        if (hash != TG_LOCAL_HASH_NONE) {
            if (tg_sha256_final(&md, run->sha256) != 0) {
                fprintf(stderr, "tensorgate: %s: SHA-256 failed\n", path);
                goto fail_all;
            }
            run->hashed = true;
        }
    } else {
        st_gate_finish(run->gate);
    }
    st_gate_verdict(run->gate, &run->verdict);
    if (st_gate_out_of_memory(run->gate)) {
        fprintf(stderr, "tensorgate: %s: out of memory in the gate\n", path);
        goto fail_all;
    }
    tg_sha256_free(&md);
    free(chunk);
    if (map != MAP_FAILED)
        munmap(map, map_len);
    if (bus_set)
        (void)sigaction(SIGBUS, &saved_bus, NULL);
    if (!is_stdin)
        close(fd);
    return 0;

fail_all:
    tg_sha256_free(&md);
    free(chunk);
    if (map != MAP_FAILED)
        munmap(map, map_len);
    if (bus_set)
        (void)sigaction(SIGBUS, &saved_bus, NULL);
    st_gate_free(run->gate);
    run->gate = NULL;
fail_fd:
    if (!is_stdin)
        close(fd);
    return -1;
}

void tg_local_print_verdict(FILE *out, const char *path, const st_verdict *verdict,
                            const st_file *file)
{
    if (verdict->valid) {
        if (verdict->format == ST_FORMAT_SAFETENSORS) {
            size_t count = file != NULL ? file->tensor_count : 0;
            fprintf(out, "%s: valid (safetensors, %zu tensor%s)\n", path, count,
                    count == 1 ? "" : "s");
        } else {
            fprintf(out, "%s: valid (%s)\n", path, st_format_name(verdict->format));
        }
        return;
    }
    const st_error *err = &verdict->error;
    fprintf(out, "%s: refused: %s", path, st_reason_name(err->reason));
    if (err->offset != ST_NO_OFFSET)
        fprintf(out, " at offset %" PRIu64, err->offset);
    if (err->tensor_len > 0) {
        /* control bytes (a refused name may hold U+0000) shown as \xNN, as details do */
        fputs(" (tensor ", out);
        for (size_t i = 0; i < err->tensor_len; i++) {
            unsigned char c = (unsigned char)err->tensor[i];
            if (c < 0x20 || c == 0x7f)
                fprintf(out, "\\x%02x", c);
            else
                fputc(c, out);
        }
        fputc(')', out);
    }
    fprintf(out, ": %s [format %s]\n", err->detail, st_format_name(verdict->format));
    for (size_t i = 0; i < verdict->findings.count; i++) {
        const st_pickle_finding *f = &verdict->findings.items[i];
        fprintf(out, "  imports %s (%s%s) at offset %" PRIu64 "\n", f->global,
                st_pickle_severity_name(f->severity), f->calls ? ", called" : "", f->offset);
    }
    if (verdict->findings.omitted > 0)
        fprintf(out, "  and %zu more imports not listed\n", verdict->findings.omitted);
}

json_t *tg_local_verdict_json(const char *path, const st_verdict *verdict)
{
    const st_error *err = &verdict->error;
    bool refused = !verdict->valid;
    json_t *object = json_object();
    if (object == NULL)
        return NULL;
    json_object_set_new(object, "file", st_json_string_lossy(path));
    json_object_set_new(object, "valid", json_boolean(verdict->valid));
    json_object_set_new(object, "reason",
                        refused ? json_string(st_reason_name(err->reason)) : json_null());
    json_object_set_new(object, "detail",
                        refused ? st_json_string_lossy(err->detail) : json_null());
    json_object_set_new(object, "offset",
                        refused && err->offset != ST_NO_OFFSET && err->offset <= INT64_MAX
                            ? json_integer((json_int_t)err->offset)
                            : json_null());
    json_object_set_new(object, "tensor", refused ? st_error_tensor_json(err) : json_null());
    json_object_set_new(object, "format", json_string(st_format_name(verdict->format)));
    json_object_set_new(object, "findings", st_verdict_findings_json(verdict));
    return object;
}

void tg_local_print_json(FILE *out, const json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        fprintf(stderr, "tensorgate: out of memory\n");
        return;
    }
    fprintf(out, "%s\n", text);
    free(text);
}

bool tg_local_parse_header_limit(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    if (text[0] == '\0')
        return false;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, (uint64_t)(*p - '0'), &value))
            return false;
    }
    if (value == 0 || value > ST_HEADER_SIZE_MAX)
        return false;
    *out = value;
    return true;
}

bool tg_local_header_limit_option(const char *command, const char *text, uint64_t *out)
{
    if (tg_local_parse_header_limit(text, out))
        return true;
    fprintf(stderr, "tensorgate %s: --max-header wants 1 to 100000000 bytes, not '%s'\n", command,
            text);
    return false;
}

void tg_local_print_option_error(const char *command, const char *option)
{
    fprintf(stderr, "tensorgate %s: unknown or incomplete option '%s'\n", command, option);
}

int tg_local_print_run_verdict(FILE *out, const char *path, const tg_local_run *run, bool json)
{
    if (!json) {
        tg_local_print_verdict(out, path, &run->verdict, st_gate_file(run->gate));
        return 0;
    }
    json_t *object = tg_local_verdict_json(path, &run->verdict);
    if (object == NULL)
        return -1;
    tg_local_print_json(out, object);
    json_decref(object);
    return 0;
}
