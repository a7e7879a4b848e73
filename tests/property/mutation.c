/* Property: st_header_parse never crashes on a damaged file, and when it accepts one the
 * acceptance is consistent: tensors (in file order) contiguous from 0, covering exactly
 * data_size, data_start + data_size == file size, each end - begin equal to the dtype
 * bytes of its shape, names within the rules.
 *
 * Valid files come from st_write_to_buffer; mutations are bit flips, JSON-significant
 * byte changes in the header, length-field changes, truncation, appended, inserted and
 * deleted bytes, digit changes in numbers. Each mutant lives in a buffer of exactly its
 * size, so ASan sees any read past the end.
 * Usage: mutation [seed] [iterations]; the seed is printed (TG_PROPERTY_SEED works too). */
#include <stdlib.h>
#include <time.h>

#include "st_header.h"
#include "st_write.h"

#include "test.h"

static uint64_t rng_state;

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

static const char *const name_pieces[] = {
    "a", "b", "w", ".", "0", "7", "\"", "\\", "/", "\xc3\xa9", "\xf0\x9f\x98\x80", "layer", "_"};

/* A valid file of a few small tensors (possibly none), with or without metadata. */
static uint8_t *valid_file(size_t *len)
{
    enum { MAX = 8 };
    st_write_tensor tensors[MAX];
    char names[MAX][40];
    uint64_t shapes[MAX][4];
    uint8_t data[MAX][256];
    const void *pointers[MAX];
    size_t count = rng_below(MAX + 1);
    for (size_t i = 0; i < count; i++) {
        bool unique;
        do {
            size_t len_pieces = 1 + rng_below(4), used = 0;
            for (size_t k = 0; k < len_pieces; k++) {
                const char *piece =
                    name_pieces[rng_below(sizeof name_pieces / sizeof name_pieces[0])];
                memcpy(names[i] + used, piece, strlen(piece));
                used += strlen(piece);
            }
            names[i][used] = '\0';
            unique = strcmp(names[i], "__metadata__") != 0;
            for (size_t k = 0; k < i; k++)
                unique = unique && strcmp(names[k], names[i]) != 0;
        } while (!unique);
        uint64_t elements, bytes;
        do {
            tensors[i].dtype = (st_dtype)rng_below(ST_DTYPE_COUNT);
            tensors[i].rank = rng_below(4);
            for (size_t d = 0; d < tensors[i].rank; d++)
                shapes[i][d] = rng_below(6) == 0 ? 0 : 1 + rng_below(4);
            st_shape_elements(shapes[i], tensors[i].rank, &elements);
        } while (st_dtype_bytes(tensors[i].dtype, elements, &bytes) != ST_OK || bytes > 256);
        tensors[i].name = names[i];
        tensors[i].shape = shapes[i];
        for (size_t k = 0; k < bytes; k++)
            data[i][k] = (uint8_t)rng_next();
        pointers[i] = data[i];
    }
    st_metadata_entry metadata[2] = {{"format", "pt"}, {"note", "a \"quoted\"\n\xe2\x82\xac"}};
    size_t metadata_count = rng_below(3);
    uint8_t *file = NULL;
    st_error err;
    if (st_write_to_buffer(tensors, pointers, count, metadata, metadata_count, rng_below(2) == 0,
                           &file, len, &err) != ST_OK) {
        fprintf(stderr, "writer refused a valid set: %s\n", err.detail);
        return NULL;
    }
    return file;
}

static const uint8_t interesting[] = {'{',  '}',  '[',  ']',  '"',  ',',  ':',  ' ', '\\',
                                      '0',  '1',  '9',  '-',  '.',  'e',  'E',  'u', 'n',
                                      0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xff, '\n', '\t'};

static size_t header_end(const uint8_t *file, size_t len)
{
    if (len < 8)
        return len;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | file[i];
    return n > len - 8 ? len : (size_t)(8 + n);
}

/* Applies one random mutation to file (len bytes, cap allocated). Returns the new length. */
static size_t mutate(uint8_t *file, size_t len, size_t cap, const char **what)
{
    size_t hend = header_end(file, len);
    /* positions biased toward the header, where the grammar lives */
    size_t pos = len == 0                          ? 0
                 : (rng_below(4) != 0 && hend > 8) ? 8 + rng_below(hend - 8)
                                                   : rng_below(len);
    switch (rng_below(10)) {
    case 0:
        *what = "bit flip";
        if (len > 0)
            file[pos] ^= (uint8_t)(1u << rng_below(8));
        return len;
    case 1:
        *what = "byte change";
        if (len > 0)
            file[pos] = interesting[rng_below(sizeof interesting)];
        return len;
    case 2: {
        *what = "length field change";
        if (len < 8)
            return len;
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | file[i];
        static const int64_t deltas[] = {1, -1, 8, -8, 2, -7, 64, -64};
        switch (rng_below(4)) {
        case 0:
            n += (uint64_t)deltas[rng_below(8)];
            break;
        case 1:
            n = rng_next();
            break;
        case 2:
            n = rng_below(len + 16);
            break;
        default:
            n = UINT64_MAX - rng_below(3);
            break;
        }
        for (int i = 0; i < 8; i++)
            file[i] = (uint8_t)(n >> (8 * i));
        return len;
    }
    case 3:
        *what = "truncation";
        return rng_below(len + 1);
    case 4: {
        *what = "appended bytes";
        size_t n = 1 + rng_below(16);
        if (len + n > cap)
            return len;
        for (size_t i = 0; i < n; i++)
            file[len + i] = rng_below(2) ? 0 : (uint8_t)rng_next();
        return len + n;
    }
    case 5: {
        *what = "inserted bytes";
        size_t n = 1 + rng_below(8);
        if (len + n > cap)
            return len;
        memmove(file + pos + n, file + pos, len - pos);
        for (size_t i = 0; i < n; i++)
            file[pos + i] =
                rng_below(2) ? interesting[rng_below(sizeof interesting)] : (uint8_t)rng_next();
        return len + n;
    }
    case 6: {
        *what = "deleted bytes";
        size_t n = 1 + rng_below(8);
        if (pos + n > len)
            return len;
        memmove(file + pos, file + pos + n, len - pos - n);
        return len - n;
    }
    case 7: {
        *what = "digit change";
        for (size_t i = 8; i < hend; i++) {
            size_t at = 8 + (pos + i) % (hend > 8 ? hend - 8 : 1);
            if (at < len && file[at] >= '0' && file[at] <= '9') {
                file[at] = (uint8_t)('0' + rng_below(10));
                break;
            }
        }
        return len;
    }
    case 8: {
        *what = "header copy";
        /* duplicates a stretch of the header in place of another: repeated keys */
        if (hend <= 16)
            return len;
        size_t from = 8 + rng_below(hend - 8), to = 8 + rng_below(hend - 8);
        size_t n = 1 + rng_below(24);
        if (from + n > hend || to + n > hend)
            return len;
        memmove(file + to, file + from, n);
        return len;
    }
    default: {
        *what = "length fixed to the mutated header";
        /* after inserting or deleting inside the header, N may be made to match again */
        size_t n = 1 + rng_below(8);
        bool insert = rng_below(2) == 0;
        if (len < 9 || hend <= 9 || (insert && len + n > cap) || (!insert && pos + n > len) ||
            pos < 8 || pos + n > hend)
            return len;
        uint64_t header_len = hend - 8;
        if (insert) {
            memmove(file + pos + n, file + pos, len - pos);
            memset(file + pos, ' ', n);
            header_len += n;
            len += n;
        } else {
            memmove(file + pos, file + pos + n, len - pos - n);
            header_len -= n;
            len -= n;
        }
        for (int i = 0; i < 8; i++)
            file[i] = (uint8_t)(header_len >> (8 * i));
        return len;
    }
    }
}

static size_t failures_reported;

#define PROPERTY(cond)                                                                             \
    do {                                                                                           \
        CHECK(cond);                                                                               \
        if (!(cond) && failures_reported++ < 10)                                                   \
            fprintf(stderr, "  iteration %zu: %s\n", iteration, #cond);                            \
    } while (0)

/* The promises an accepted file keeps. */
static void check_acceptance(const st_file *f, size_t len, size_t iteration)
{
    PROPERTY(f->file_size == len);
    PROPERTY(f->data_start == 8 + f->header_size);
    PROPERTY(f->header_size <= ST_HEADER_SIZE_MAX);
    PROPERTY(f->data_start + f->data_size == len);
    uint64_t expected_begin = 0;
    for (size_t k = 0; k < f->tensor_count; k++) {
        const st_tensor *t = &f->tensors[k];
        PROPERTY(t->begin == expected_begin);
        PROPERTY(t->begin <= t->end);
        expected_begin = t->end;
        uint64_t elements = 0, bytes = 0;
        PROPERTY(st_shape_elements(t->shape, t->rank, &elements));
        PROPERTY(elements == t->elements);
        PROPERTY(st_dtype_bytes(t->dtype, elements, &bytes) == ST_OK);
        PROPERTY(t->end - t->begin == bytes);
        PROPERTY(t->name_len > 0 && t->name_len <= ST_TENSOR_NAME_MAX);
        PROPERTY(strlen(t->name) == t->name_len);
        bool control = false;
        for (size_t i = 0; i < t->name_len; i++)
            control = control || (unsigned char)t->name[i] < 0x20 || t->name[i] == 0x7f;
        PROPERTY(!control);
        PROPERTY(st_file_find(f, t->name, t->name_len) == t);
    }
    PROPERTY(expected_begin == f->data_size);
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    const char *seed_text = argc > 1 ? argv[1] : getenv("TG_PROPERTY_SEED");
    if (seed_text != NULL)
        seed = strtoull(seed_text, NULL, 0);
    size_t iterations = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 100000;
    printf("%s: seed %llu, %zu iterations\n", argv[0], (unsigned long long)seed, iterations);
    rng_state = seed;
    test_current = "mutation";
    size_t accepted = 0, accepted_changed = 0;
    size_t by_reason[ST_REASON_COUNT] = {0};
    for (size_t iteration = 0; iteration < iterations; iteration++) {
        size_t len;
        uint8_t *original = valid_file(&len);
        CHECK(original != NULL);
        if (original == NULL)
            continue;
        size_t original_len = len;
        size_t cap = len + 64;
        uint8_t *work = malloc(cap);
        memcpy(work, original, len);
        size_t mutations = 1 + rng_below(3);
        const char *what = "";
        for (size_t m = 0; m < mutations; m++)
            len = mutate(work, len, cap, &what);
        /* exactly-sized copy so any over-read is caught */
        uint8_t *mutant = malloc(len > 0 ? len : 1);
        memcpy(mutant, work, len);
        st_file f;
        st_error err;
        st_reason r = st_header_parse(mutant, len, len, NULL, &f, &err);
        PROPERTY((unsigned)r < ST_REASON_COUNT);
        {
            /* the verdict-only parse (`tensorgate validate`) says the same, word for word */
            st_file c;
            st_error cerr;
            PROPERTY(st_header_check(mutant, len, len, NULL, &c, &cerr) == r);
            PROPERTY(cerr.reason == err.reason && cerr.offset == err.offset &&
                     strcmp(cerr.detail, err.detail) == 0 && cerr.tensor_len == err.tensor_len);
            PROPERTY(r != ST_OK || (c.tensor_count == f.tensor_count &&
                                    c.data_size == f.data_size && c.tensors == NULL));
            st_file_free(&c);
        }
        if ((unsigned)r < ST_REASON_COUNT)
            by_reason[r]++;
        if (r == ST_OK) {
            accepted++;
            accepted_changed += len != original_len || memcmp(mutant, original, len) != 0;
            check_acceptance(&f, len, iteration);
        } else {
            PROPERTY(err.reason == r);
            PROPERTY(err.detail[0] != '\0');
            PROPERTY(f.tensor_count == 0 && f.tensors == NULL);
        }
        st_file_free(&f);
        free(mutant);
        free(work);
        free(original);
    }
    printf("accepted %zu of %zu mutants (%zu with changed bytes); refusals by reason:\n", accepted,
           iterations, accepted_changed);
    for (unsigned i = 1; i < ST_REASON_COUNT; i++) {
        if (by_reason[i] > 0)
            printf("  %-28s %zu\n", st_reason_name((st_reason)i), by_reason[i]);
    }
    if (test_checks_failed > 0)
        fprintf(stderr, "replay with: %s %llu %zu\n", argv[0], (unsigned long long)seed,
                iterations);
    return test_report(argv[0]);
}
