/* Property: whatever st_write_to_buffer writes, st_header_parse accepts, and it reads
 * back exactly the names, dtypes, shapes, offsets, data and metadata that were written.
 *
 * Random tensor sets: every dtype (sub-byte ones with whole-byte sizes), ranks 0-5 with
 * zero dimensions, names with escapable and non-ASCII characters, random metadata.
 * Usage: roundtrip [seed] [iterations]; the seed is printed so a failure can be replayed
 * (TG_PROPERTY_SEED works too). */
#include <stdlib.h>
#include <time.h>

#include "st_header.h"
#include "st_write.h"

#include "test.h"

static uint64_t rng_state;

/* splitmix64: small, fast, and any seed (even 0) gives a good sequence */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n)
{
    return n == 0 ? 0 : rng_next() % n;
}

/* Pieces names and metadata are built from: ASCII, JSON-escaped characters, UTF-8 of
 * 2, 3 and 4 bytes. Control characters are only for metadata (names refuse them). */
static const char *const name_pieces[] = {
    "a",
    "b",
    "z",
    "Q",
    "0",
    "9",
    ".",
    "_",
    "-",
    "/",
    " ",
    "\"",
    "\\",
    "'",
    "{",
    "}",
    "[",
    ":",
    ",",
    "weight",
    "layers.",
    "\xc3\xa9",
    "\xe4\xb8\xad",
    "\xf0\x9f\x98\x80",
    "\xe2\x80\xa8",
    "\x7e",
};
static const char *const control_pieces[] = {"\n", "\t", "\r", "\b", "\f", "\x01", "\x1f", "\x7f"};

static void random_text(char *out, size_t cap, bool allow_control, size_t max_pieces)
{
    size_t len = 0;
    size_t pieces = 1 + rng_below(max_pieces);
    for (size_t i = 0; i < pieces; i++) {
        const char *piece;
        if (allow_control && rng_below(5) == 0)
            piece = control_pieces[rng_below(sizeof control_pieces / sizeof control_pieces[0])];
        else
            piece = name_pieces[rng_below(sizeof name_pieces / sizeof name_pieces[0])];
        size_t n = strlen(piece);
        if (len + n + 1 > cap)
            break;
        memcpy(out + len, piece, n);
        len += n;
    }
    out[len] = '\0';
}

#define MAX_TENSORS 24
#define MAX_METADATA 6

typedef struct tensor_set {
    size_t count;
    st_write_tensor tensors[MAX_TENSORS];
    char names[MAX_TENSORS][ST_TENSOR_NAME_MAX + 1];
    uint64_t shapes[MAX_TENSORS][5];
    uint8_t *data[MAX_TENSORS];
    uint64_t bytes[MAX_TENSORS];
    bool has_metadata;
    size_t metadata_count;
    st_metadata_entry metadata[MAX_METADATA];
    char keys[MAX_METADATA][64];
    char values[MAX_METADATA][256];
} tensor_set;

static bool name_taken(const tensor_set *set, size_t upto, const char *name)
{
    if (strcmp(name, "__metadata__") == 0)
        return true;
    for (size_t i = 0; i < upto; i++) {
        if (strcmp(set->names[i], name) == 0)
            return true;
    }
    return false;
}

static void random_set(tensor_set *set)
{
    memset(set, 0, sizeof *set);
    set->count = rng_below(MAX_TENSORS + 1);
    for (size_t i = 0; i < set->count; i++) {
        st_write_tensor *t = &set->tensors[i];
        do {
            if (rng_below(40) == 0) {
                /* a long name, up to the limit */
                size_t len = 1000 + rng_below(ST_TENSOR_NAME_MAX - 1000 + 1);
                for (size_t k = 0; k < len; k++)
                    set->names[i][k] = (char)('a' + rng_below(26));
                set->names[i][len] = '\0';
            } else {
                random_text(set->names[i], 64, false, 6);
            }
        } while (name_taken(set, i, set->names[i]));
        t->name = set->names[i];
        t->shape = set->shapes[i];
        uint64_t elements, bytes;
        /* retry until the byte size is whole (F4 needs an even count, F6 a multiple of 4) */
        do {
            t->dtype = (st_dtype)rng_below(ST_DTYPE_COUNT);
            t->rank = rng_below(6);
            for (size_t d = 0; d < t->rank; d++)
                set->shapes[i][d] =
                    rng_below(8) == 0 ? 0 : 1 + rng_below(rng_below(4) == 0 ? 40 : 6);
            st_shape_elements(t->shape, t->rank, &elements);
        } while (st_dtype_bytes(t->dtype, elements, &bytes) != ST_OK);
        set->bytes[i] = bytes;
        set->data[i] = malloc(bytes + 1);
        for (uint64_t k = 0; k < bytes; k++)
            set->data[i][k] = (uint8_t)rng_next();
    }
    set->has_metadata = rng_below(2) == 0;
    set->metadata_count = set->has_metadata ? rng_below(MAX_METADATA + 1) : 0;
    for (size_t i = 0; i < set->metadata_count; i++) {
        bool unique;
        do {
            random_text(set->keys[i], sizeof set->keys[i], true, 4);
            if (rng_below(20) == 0)
                set->keys[i][0] = '\0'; /* the empty key is a valid JSON key */
            unique = true;
            for (size_t k = 0; k < i; k++)
                unique = unique && strcmp(set->keys[k], set->keys[i]) != 0;
        } while (!unique);
        random_text(set->values[i], sizeof set->values[i], true, 12);
        set->metadata[i].key = set->keys[i];
        set->metadata[i].value = set->values[i];
    }
}

static void free_set(tensor_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        free(set->data[i]);
}

/* The writer's order: dtype rank, then name bytes. */
static bool writer_before(const st_tensor *a, const st_tensor *b)
{
    unsigned ra = st_dtype_writer_rank(a->dtype), rb = st_dtype_writer_rank(b->dtype);
    if (ra != rb)
        return ra < rb;
    return strcmp(a->name, b->name) < 0;
}

static size_t failures_reported;

#define PROPERTY(cond)                                                                             \
    do {                                                                                           \
        CHECK(cond);                                                                               \
        if (!(cond) && failures_reported++ < 10)                                                   \
            fprintf(stderr, "  iteration %zu: %s\n", iteration, #cond);                            \
    } while (0)

static void check_round_trip(const tensor_set *set, size_t iteration)
{
    const void *data[MAX_TENSORS];
    for (size_t i = 0; i < set->count; i++)
        data[i] = set->data[i];
    uint8_t *file;
    size_t len;
    st_error err;
    st_reason written =
        st_write_to_buffer(set->tensors, data, set->count, set->metadata, set->metadata_count,
                           set->has_metadata, &file, &len, &err);
    PROPERTY(written == ST_OK);
    if (written != ST_OK) {
        fprintf(stderr, "  write refused: %s: %s\n", st_reason_name(written), err.detail);
        return;
    }
    st_file parsed;
    st_reason read = st_header_parse(file, len, len, NULL, &parsed, &err);
    PROPERTY(read == ST_OK);
    if (read != ST_OK) {
        fprintf(stderr, "  parse refused: %s at %llu: %s\n", st_reason_name(read),
                (unsigned long long)err.offset, err.detail);
        free(file);
        return;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | file[i];
    PROPERTY(parsed.header_size == n);
    PROPERTY(parsed.data_start == 8 + n);
    PROPERTY(parsed.data_start % 8 == 0);
    PROPERTY(parsed.data_start + parsed.data_size == len);
    PROPERTY(parsed.tensor_count == set->count);
    uint64_t total = 0;
    for (size_t i = 0; i < set->count; i++) {
        const st_write_tensor *t = &set->tensors[i];
        total += set->bytes[i];
        const st_tensor *p = st_file_find(&parsed, t->name, strlen(t->name));
        PROPERTY(p != NULL);
        if (p == NULL)
            continue;
        PROPERTY(p->name_len == strlen(t->name));
        PROPERTY(p->dtype == t->dtype);
        PROPERTY(p->rank == t->rank);
        bool same_shape = p->rank == t->rank;
        for (size_t d = 0; same_shape && d < t->rank; d++)
            same_shape = p->shape[d] == t->shape[d];
        PROPERTY(same_shape);
        PROPERTY(p->end - p->begin == set->bytes[i]);
        PROPERTY(p->end <= parsed.data_size);
        PROPERTY(set->bytes[i] == 0 ||
                 memcmp(file + parsed.data_start + p->begin, set->data[i], set->bytes[i]) == 0);
    }
    PROPERTY(parsed.data_size == total);
    /* file order is the writer's order, contiguous from 0 */
    uint64_t expected_begin = 0;
    for (size_t k = 0; k < parsed.tensor_count; k++) {
        PROPERTY(parsed.tensors[k].begin == expected_begin);
        expected_begin = parsed.tensors[k].end;
        if (k > 0 && parsed.tensors[k].end > parsed.tensors[k].begin &&
            parsed.tensors[k - 1].end > parsed.tensors[k - 1].begin)
            PROPERTY(writer_before(&parsed.tensors[k - 1], &parsed.tensors[k]));
    }
    PROPERTY(parsed.has_metadata == (set->has_metadata || set->metadata_count > 0));
    PROPERTY(parsed.metadata_count == set->metadata_count);
    for (size_t i = 0; i < set->metadata_count && i < parsed.metadata_count; i++) {
        PROPERTY(strcmp(parsed.metadata[i].key, set->metadata[i].key) == 0);
        PROPERTY(strcmp(parsed.metadata[i].value, set->metadata[i].value) == 0);
        const char *value = st_file_metadata(&parsed, set->metadata[i].key);
        PROPERTY(value != NULL && strcmp(value, set->metadata[i].value) == 0);
    }
    st_file_free(&parsed);
    free(file);
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    const char *seed_text = argc > 1 ? argv[1] : getenv("TG_PROPERTY_SEED");
    if (seed_text != NULL)
        seed = strtoull(seed_text, NULL, 0);
    size_t iterations = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 3000;
    printf("%s: seed %llu, %zu iterations\n", argv[0], (unsigned long long)seed, iterations);
    rng_state = seed;
    test_current = "round_trip";
    for (size_t iteration = 0; iteration < iterations; iteration++) {
        tensor_set *set = malloc(sizeof *set);
        random_set(set);
        check_round_trip(set, iteration);
        free_set(set);
        free(set);
    }
    if (test_checks_failed > 0)
        fprintf(stderr, "replay with: %s %llu %zu\n", argv[0], (unsigned long long)seed,
                iterations);
    return test_report(argv[0]);
}
