/* GET|HEAD|POST .../versions/{rev}/bundle: many tensors of a version in one
 * response, as one safetensors file (docs/MANUAL.md "Many tensors at once").
 *
 * The selection (selectors: exact names or globs, each with an optional slice)
 * is resolved against every safetensors file of the version (or the one ?file=
 * names) into an ordered list of entries; each entry is planned by the tensor
 * streaming engine (tensor_stream.h: slice, dtype, exact length) without reading
 * a byte, so the header is written whole before the response starts and
 * Content-Length, ETag and Range are exact. The body is generated on demand: the
 * header bytes, then each entry's bytes; an entry that is one range of its file
 * (a whole tensor, or a contiguous slice, not converted) is read straight from
 * the blob like a whole-file GET, anything else streams through one engine
 * stream at a time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "downloads.h"
#include "http_parse.h"
#include "log.h"
#include "parsed_header_cache.h"
#include "resources.h"
#include "routes.h"
#include "sha256.h"
#include "st_convert.h"
#include "tensor_stream.h"

/* The bounds openapi.yaml states (413 bundle_too_large). */
#define BUNDLE_TENSORS_MAX 65536u      /* selected tensors, and selectors */
#define BUNDLE_GLOBS_MAX 256u          /* selectors with * or ? (each is matched to every name) */
#define BUNDLE_BODY_MAX (1024 * 1024)  /* a POST body */
#define BUNDLE_HEADER_MAX 100000000ULL /* the safetensors header bound */
#define TEXT_OF(x) #x
#define NUMBER_TEXT(x) TEXT_OF(x)

/* ---- selectors ---- */

typedef struct selector {
    char *text;        /* the whole selector, for messages (owned) */
    char *pattern;     /* the name or glob (owned, NUL-terminated) */
    const char *slice; /* the slice text inside [...], or NULL (in text) */
    size_t slice_len;  /* bytes of it */
    char *slice_copy;  /* NUL-terminated copy of the slice, or NULL (owned) */
    bool glob;
} selector;

typedef struct selection {
    selector *items;
    size_t count, cap;
    bool too_many;
} selection;

static void selection_free(selection *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->items[i].text);
        free(s->items[i].pattern);
        free(s->items[i].slice_copy);
    }
    free(s->items);
    memset(s, 0, sizeof *s);
}

/* Adds the selector text[0, len): -1 when malformed (why says how), -2 out of memory,
 * 0 added (or counted past the bound: s->too_many). */
static int selection_add(selection *s, const char *text, size_t len, const char **why)
{
    if (len == 0) {
        *why = "an empty selector";
        return -1;
    }
    size_t name_len = len;
    const char *open = memchr(text, '[', len);
    if (open != NULL) {
        name_len = (size_t)(open - text);
        if (text[len - 1] != ']' || memchr(open + 1, '[', len - name_len - 1) != NULL) {
            *why = "a slice is written NAME[SPEC], with the brackets last";
            return -1;
        }
        if (len - name_len - 2 == 0) {
            *why = "the brackets of a slice hold no slice";
            return -1;
        }
    } else if (memchr(text, ']', len) != NULL) {
        *why = "a ']' without its '['";
        return -1;
    }
    if (name_len == 0) {
        *why = "a selector needs a name or a glob before its slice";
        return -1;
    }
    if (name_len > ST_TENSOR_NAME_MAX) {
        *why = "a tensor name has at most " NUMBER_TEXT(ST_TENSOR_NAME_MAX) " bytes";
        return -1;
    }
    if (memchr(text, '\0', len) != NULL) {
        *why = "a NUL byte";
        return -1;
    }
    if (s->count == BUNDLE_TENSORS_MAX) {
        s->too_many = true;
        return 0;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        selector *grown = realloc(s->items, cap * sizeof *grown);
        if (grown == NULL)
            return -2;
        s->items = grown;
        s->cap = cap;
    }
    selector *sel = &s->items[s->count];
    memset(sel, 0, sizeof *sel);
    sel->text = strndup(text, len);
    sel->pattern = strndup(text, name_len);
    if (open != NULL)
        sel->slice_copy = strndup(open + 1, len - name_len - 2);
    if (sel->text == NULL || sel->pattern == NULL || (open != NULL && sel->slice_copy == NULL)) {
        free(sel->text);
        free(sel->pattern);
        free(sel->slice_copy);
        return -2;
    }
    sel->slice = sel->slice_copy;
    sel->slice_len = open != NULL ? len - name_len - 2 : 0;
    sel->glob = strpbrk(sel->pattern, "*?") != NULL;
    s->count++;
    return 0;
}

/* Adds the comma-separated selectors of one ?tensors= value (a comma inside [...]
 * belongs to the slice). */
static int selection_add_list(selection *s, const char *text, const char **why)
{
    size_t start = 0, depth = 0, i = 0;
    for (;; i++) {
        char c = text[i];
        if (c == '[')
            depth++;
        else if (c == ']' && depth > 0)
            depth--;
        if (c == '\0' || (c == ',' && depth == 0)) {
            int rc = selection_add(s, text + start, i - start, why);
            if (rc != 0 || s->too_many)
                return rc;
            if (c == '\0')
                return 0;
            start = i + 1;
        }
    }
}

/* Glob match of a whole name: '*' any run of bytes, '?' one byte (one UTF-8 code
 * point is not asked for: names are matched as bytes). Greedy with one backtrack
 * point, so linear in practice and at most pattern x name steps. */
static bool glob_match(const char *pattern, const char *name, size_t name_len)
{
    size_t p = 0, n = 0, star = SIZE_MAX, mark = 0;
    size_t plen = strlen(pattern);
    while (n < name_len) {
        if (p < plen && (pattern[p] == '?' || pattern[p] == name[n])) {
            p++;
            n++;
        } else if (p < plen && pattern[p] == '*') {
            star = p++;
            mark = n;
        } else if (star != SIZE_MAX) {
            p = star + 1;
            n = ++mark;
        } else {
            return false;
        }
    }
    while (p < plen && pattern[p] == '*')
        p++;
    return p == plen;
}

/* ---- the planned bundle ---- */

typedef struct bundle_file {
    const tg_file_record *record; /* in the request's file list (not read by the body) */
    const st_file *held;  /* the parsed header (parsed_header_cache.h), released at the end */
    tg_blob_reader *blob; /* opened once an entry reads it */
    uint8_t *seen;        /* a bit per tensor: already selected */
    bool used;            /* an entry comes from this file */
    char sha256[65];
} bundle_file;

typedef struct bundle_entry {
    uint32_t file;
    const st_tensor *tensor;
    const char *slice; /* NULL-able, in the selection (only while planning) */
    bool convert;      /* the bundle's dtype applies */
    uint64_t begin;    /* first byte in the body */
    uint64_t length;
    bool contiguous; /* the body bytes are the file's [source, source + length) */
    uint64_t source;
    char *slice_copy; /* the slice, kept for the body and the ETag (owned) */
} bundle_entry;

typedef struct bundle {
    tg_server *server;
    bundle_file *files;
    size_t file_count;
    bundle_entry *entries;
    size_t count, cap;
    char *header; /* 8-byte length + JSON + spaces */
    uint64_t header_len;
    uint64_t total;
    char *dtype; /* NULL: as stored */
    st_dtype out_dtype;
    /* the body being sent */
    uint64_t first; /* Range's first byte */
    uint64_t end;   /* and the byte after its last */
    size_t cursor;  /* the entry last read */
    size_t stream_entry;
    tg_tensor_stream *stream;
} bundle;

static void bundle_free(bundle *b)
{
    if (b == NULL)
        return;
    tg_tensor_stream_free(b->stream);
    for (size_t i = 0; i < b->file_count; i++) {
        if (b->files[i].held != NULL)
            tg_parsed_header_release(b->server->parsed_headers, b->files[i].held);
        tg_blob_close(b->files[i].blob);
        free(b->files[i].seen);
    }
    for (size_t i = 0; i < b->count; i++)
        free(b->entries[i].slice_copy);
    free(b->files);
    free(b->entries);
    free(b->header);
    free(b->dtype);
    free(b);
}

static bool is_float(st_dtype dtype)
{
    return dtype == ST_F32 || st_convert_supported(dtype, ST_F32);
}

/* Adds tensor t of file f unless already selected; false when out of memory. */
static bool add_entry(bundle *b, uint32_t f, const st_tensor *t, const char *slice)
{
    bundle_file *file = &b->files[f];
    size_t index = (size_t)(t - file->held->tensors);
    if (file->seen[index / 8] & (1u << (index % 8)))
        return true;
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        bundle_entry *grown = realloc(b->entries, cap * sizeof *grown);
        if (grown == NULL)
            return false;
        b->entries = grown;
        b->cap = cap;
    }
    file->seen[index / 8] |= (uint8_t)(1u << (index % 8));
    b->entries[b->count++] = (bundle_entry){.file = f, .tensor = t, .slice = slice};
    return true;
}

/* ---- header text ---- */

typedef struct text {
    char *data;
    size_t len, cap;
    bool failed;    /* out of memory, or past BUNDLE_HEADER_MAX */
    bool too_large; /* past BUNDLE_HEADER_MAX */
} text;

static void text_add(text *t, const char *data, size_t len)
{
    if (t->failed)
        return;
    if (t->len + len > BUNDLE_HEADER_MAX + 8) {
        t->failed = t->too_large = true;
        return;
    }
    if (t->len + len + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + len + 1)
            cap *= 2;
        char *grown = realloc(t->data, cap);
        if (grown == NULL) {
            t->failed = true;
            return;
        }
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, data, len);
    t->len += len;
}

static void text_str(text *t, const char *s)
{
    text_add(t, s, strlen(s));
}

/* A JSON string: quotes, backslash and control bytes escaped; other bytes as they
 * are (the names and metadata are the parser's validated UTF-8). */
static void text_json_string(text *t, const char *s, size_t len)
{
    text_add(t, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '"' && c != '\\' && c >= 0x20)
            continue;
        text_add(t, s + run, i - run);
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else
            snprintf(esc, sizeof esc, "\\u%04x", c);
        text_str(t, esc);
        run = i + 1;
    }
    text_add(t, s + run, len - run);
    text_add(t, "\"", 1);
}

/* The header's start: the 8 bytes its length will take, then {"__metadata__": {...}
 * (tensorgate's two keys, and the source file's metadata when every entry comes
 * from one file). */
static void header_begin(text *t, const bundle *b, const char *model, const char *version_label)
{
    text_add(t, "\0\0\0\0\0\0\0\0", 8);
    text_str(t, "{\"__metadata__\":{\"tensorgate.version\":");
    text_json_string(t, version_label, strlen(version_label));
    text_str(t, ",\"tensorgate.model\":");
    text_json_string(t, model, strlen(model));
    size_t used = 0, only = 0;
    for (size_t i = 0; i < b->file_count; i++)
        if (b->files[i].used) {
            used++;
            only = i;
        }
    if (used == 1) {
        const st_file *f = b->files[only].held;
        for (size_t i = 0; i < f->metadata_count; i++) {
            const char *key = f->metadata[i].key;
            if (strcmp(key, "tensorgate.version") == 0 || strcmp(key, "tensorgate.model") == 0)
                continue;
            text_add(t, ",", 1);
            text_json_string(t, key, strlen(key));
            text_add(t, ":", 1);
            text_json_string(t, f->metadata[i].value, strlen(f->metadata[i].value));
        }
    }
    text_add(t, "}", 1);
}

/* One entry: ,"name":{"dtype":...,"shape":[...],"data_offsets":[offset,offset+length]} */
static void header_entry(text *t, const st_tensor *tensor, const tg_tensor_plan *plan,
                         uint64_t offset)
{
    text_add(t, ",", 1);
    text_json_string(t, tensor->name, tensor->name_len);
    char piece[96];
    snprintf(piece, sizeof piece, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(plan->out_dtype));
    text_str(t, piece);
    for (size_t d = 0; d < plan->out_rank; d++) {
        snprintf(piece, sizeof piece, d ? ",%llu" : "%llu", (unsigned long long)plan->out_shape[d]);
        text_str(t, piece);
    }
    snprintf(piece, sizeof piece, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
             (unsigned long long)(offset + plan->length));
    text_str(t, piece);
}

/* Closes the header, pads it with spaces to a multiple of 8 and writes its length in
 * front; false when it failed (t->failed). */
static bool header_end(text *t)
{
    text_add(t, "}", 1);
    while (!t->failed && (t->len - 8) % 8 != 0)
        text_add(t, " ", 1);
    if (!t->failed && t->len - 8 > BUNDLE_HEADER_MAX)
        t->failed = t->too_large = true;
    if (t->failed)
        return false;
    uint64_t n = t->len - 8;
    for (int i = 0; i < 8; i++)
        t->data[i] = (char)(uint8_t)(n >> (8 * i));
    return true;
}

/* ---- the body ---- */

/* The entry holding body byte pos (header_len <= pos < total): the last entry that
 * begins at or before it (an empty entry begins where the next one does). */
static size_t find_entry(const bundle *b, uint64_t pos)
{
    size_t c = b->cursor;
    if (c < b->count && b->entries[c].begin <= pos &&
        pos < b->entries[c].begin + b->entries[c].length)
        return c;
    size_t lo = 0, hi = b->count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->entries[mid].begin <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int blob_read_at(void *ctx, void *buf, size_t len, uint64_t offset)
{
    return tg_blob_read_at(ctx, buf, len, offset);
}

/* Opens entry e's file's blob (once); false with errno set. */
static bool open_blob(bundle *b, const bundle_entry *e)
{
    bundle_file *f = &b->files[e->file];
    if (f->blob != NULL)
        return true;
    tg_blob_check check;
    f->blob = tg_blob_open(b->server->blobs, f->sha256, f->held->file_size, &check);
    if (f->blob == NULL && check != TG_BLOB_UNREADABLE) {
        tg_blob_mark_damaged(b->server->blobs, f->sha256,
                             "it could not be opened for a bundle (missing or of another size)");
        errno = EIO;
    }
    return f->blob != NULL;
}

/* Fills up to max bytes of entry e from its byte at; the count, or -1. */
static ssize_t read_entry(bundle *b, size_t index, uint64_t at, char *buf, size_t max)
{
    const bundle_entry *e = &b->entries[index];
    if (!open_blob(b, e))
        return -1;
    bundle_file *f = &b->files[e->file];
    uint64_t left = e->length - at;
    size_t want = left < max ? (size_t)left : max;
    if (e->contiguous) {
        ssize_t n = tg_blob_read(f->blob, buf, want, e->source + at);
        if (n == 0) {
            tg_blob_mark_damaged(b->server->blobs, tg_blob_name(f->blob),
                                 "it ended early while a bundle was read; the catalog says %llu "
                                 "bytes",
                                 (unsigned long long)tg_blob_size(f->blob));
            errno = EIO;
            return -1;
        }
        return n;
    }
    if (b->stream == NULL || b->stream_entry != index) {
        tg_tensor_stream_free(b->stream);
        b->stream = NULL;
        tg_tensor_options options = {e->slice_copy, e->convert ? b->dtype : NULL, NULL};
        tg_tensor_error err;
        if (tg_tensor_stream_open(blob_read_at, f->blob, f->held, e->tensor, &options, &b->stream,
                                  &err) != 0) {
            tg_log(TG_LOG_ERROR, "a bundle's planned tensor cannot be opened again: %s",
                   err.detail);
            errno = EINVAL;
            return -1;
        }
        int fd = tg_blob_fd(f->blob);
        if (fd >= 0 && tg_tensor_stream_map_pays(b->stream))
            (void)tg_tensor_stream_map(b->stream, fd); /* on failure, reads stay on pread */
        b->stream_entry = index;
    }
    ssize_t n = tg_tensor_stream_read(b->stream, at, (uint8_t *)buf, want);
    if (n < 0 && errno == EIO)
        tg_blob_mark_damaged(b->server->blobs, tg_blob_name(f->blob),
                             "it ended early while a bundle was read; the catalog says %llu bytes",
                             (unsigned long long)tg_blob_size(f->blob));
    return n;
}

static ssize_t read_bundle(void *cls, uint64_t pos, char *buf, size_t max)
{
    bundle *b = cls;
    uint64_t at = b->first + pos;
    size_t filled = 0;
    while (filled < max && at < b->end) {
        ssize_t n;
        if (at < b->header_len) {
            uint64_t left = b->header_len - at;
            if (left > b->end - at)
                left = b->end - at;
            n = (ssize_t)(left < max - filled ? left : max - filled);
            memcpy(buf + filled, b->header + at, (size_t)n);
        } else {
            size_t index = find_entry(b, at);
            b->cursor = index;
            size_t room = max - filled;
            if (room > b->end - at)
                room = (size_t)(b->end - at);
            n = read_entry(b, index, at - b->entries[index].begin, buf + filled, room);
            if (n <= 0) {
                if (n < 0 && errno != EIO)
                    tg_log(TG_LOG_ERROR, "reading a bundle failed at %llu: %m",
                           (unsigned long long)at);
                if (filled > 0)
                    break; /* what was read goes out; the next call fails again */
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        filled += (size_t)n;
        at += (uint64_t)n;
    }
    return filled == 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)filled;
}

static void free_bundle(void *cls)
{
    bundle_free(cls);
}

/* ---- the request ---- */

/* Model, version and the version's files; answers the error itself. */
static bool lookup_files(tg_request *req, tg_version *version, tg_file_records *list,
                         int64_t *model_id)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return false;
    bool ok = tg_lookup_model(req, model) && tg_lookup_version(req, model, version);
    *model_id = model->id;
    free(model);
    if (!ok)
        return false;
    tg_cat_status status = tg_catalog_file_list(req->server->catalog, version->id, NULL, 0,
                                                tg_file_records_collect, list);
    if (status != TG_CAT_OK || list->failed) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

/* Holds the parsed headers of the files the bundle may read (only: the one ?file=
 * names, else every safetensors file); answers and returns false on failure. */
static bool hold_files(tg_request *req, bundle *b, const tg_file_records *list, const char *only,
                       const tg_version *version)
{
    const tg_file_record *chosen = NULL;
    size_t safetensors = 0, gguf = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (only != NULL && strcmp(list->items[i].path, only) == 0)
            chosen = &list->items[i];
        safetensors += strcmp(list->items[i].kind, "safetensors") == 0;
        gguf += strcmp(list->items[i].kind, "gguf") == 0;
    }
    if (only != NULL && chosen == NULL) {
        tg_respond_problem(req, "file_not_found", "version %lld has no file %.200s",
                           (long long)version->number, only);
        return false;
    }
    if (only != NULL && strcmp(chosen->kind, "safetensors") != 0) {
        tg_respond_problem(req, "unsupported_tensor",
                           "%.200s is a %s file; a bundle is made of safetensors tensors only",
                           only, chosen->kind);
        return false;
    }
    if (only == NULL && safetensors == 0 && gguf > 0) {
        tg_respond_problem(req, "unsupported_tensor",
                           "version %lld holds GGUF files only; a bundle is made of safetensors "
                           "tensors only (GET .../tensors/{tensor}?file= serves a GGUF tensor)",
                           (long long)version->number);
        return false;
    }
    size_t n = only != NULL ? 1 : safetensors;
    b->files = calloc(n ? n : 1, sizeof *b->files);
    if (b->files == NULL) {
        tg_respond_internal(req, "out of memory");
        return false;
    }
    for (size_t i = 0; i < list->count; i++) {
        const tg_file_record *record = &list->items[i];
        if (only != NULL ? record != chosen : strcmp(record->kind, "safetensors") != 0)
            continue;
        st_error err;
        int failure = 0;
        const st_file *held = tg_parsed_header_acquire(
            req->server->parsed_headers, req->server->blobs, record->sha256, record->size,
            req->server->config.max_header, &err, &failure);
        if (held == NULL) {
            if (failure == -1)
                tg_respond_blob_damaged(req, record->path);
            else if (tg_errno_is_exhaustion(errno))
                tg_respond_exhausted(req, NULL);
            else if (errno == TG_BLOB_UNAVAILABLE_ERRNO)
                tg_respond_blob_store_unavailable(req);
            else
                tg_respond_internal(req, "the stored header of %s cannot be read: %s", record->path,
                                    err.detail);
            return false;
        }
        bundle_file *f = &b->files[b->file_count++];
        f->record = record;
        f->held = held;
        memcpy(f->sha256, record->sha256, sizeof f->sha256);
        f->seen = calloc(held->tensor_count / 8 + 1, 1);
        if (f->seen == NULL) {
            tg_respond_internal(req, "out of memory");
            return false;
        }
    }
    return true;
}

/* The file (other than f) that also holds name, or SIZE_MAX. */
static size_t other_holder(const bundle *b, size_t f, const char *name, size_t len)
{
    for (size_t g = 0; g < b->file_count; g++)
        if (g != f && st_file_find(b->files[g].held, name, len) != NULL)
            return g;
    return SIZE_MAX;
}

static void respond_ambiguous(tg_request *req, const bundle *b, const st_tensor *t, size_t f,
                              size_t g)
{
    tg_respond_problem(req, "ambiguous_tensor",
                       "tensor %.200s is in %.200s and in %.200s; add file= to choose one", t->name,
                       b->files[f].record->path, b->files[g].record->path);
}

/* Resolves the selection into entries, in selector order; answers and returns false
 * on a refusal. */
static bool resolve(tg_request *req, bundle *b, const selection *sel)
{
    for (size_t s = 0; s < sel->count; s++) {
        const selector *x = &sel->items[s];
        size_t matched = 0;
        if (!x->glob) {
            size_t len = strlen(x->pattern), where = SIZE_MAX;
            const st_tensor *found = NULL;
            for (size_t f = 0; f < b->file_count; f++) {
                const st_tensor *t = st_file_find(b->files[f].held, x->pattern, len);
                if (t == NULL)
                    continue;
                if (found != NULL) {
                    respond_ambiguous(req, b, t, where, f);
                    return false;
                }
                found = t;
                where = f;
            }
            if (found != NULL) {
                matched = 1;
                if (!add_entry(b, (uint32_t)where, found, x->slice))
                    goto oom;
            }
        } else {
            for (size_t f = 0; f < b->file_count; f++) {
                const st_file *file = b->files[f].held;
                for (size_t i = 0; i < file->tensor_count; i++) {
                    const st_tensor *t = &file->tensors[i];
                    if (!glob_match(x->pattern, t->name, t->name_len))
                        continue;
                    size_t g = other_holder(b, f, t->name, t->name_len);
                    if (g != SIZE_MAX) {
                        respond_ambiguous(req, b, t, f, g);
                        return false;
                    }
                    matched++;
                    if (!add_entry(b, (uint32_t)f, t, x->slice))
                        goto oom;
                    if (b->count > BUNDLE_TENSORS_MAX)
                        break;
                }
            }
        }
        if (matched == 0) {
            tg_respond_problem(req, "tensor_not_found", "no tensor matches %.300s", x->text);
            return false;
        }
        if (b->count > BUNDLE_TENSORS_MAX) {
            tg_respond_problem(req, "bundle_too_large", "a bundle holds at most %u tensors",
                               BUNDLE_TENSORS_MAX);
            return false;
        }
    }
    return true;
oom:
    tg_respond_internal(req, "out of memory");
    return false;
}

/* Plans every entry (lengths, offsets, how it is read) and writes the header, one
 * entry at a time (a plan lives in its stream, freed at once: memory stays per entry);
 * answers and returns false on a refusal. */
static bool plan(tg_request *req, bundle *b, const char *model, const char *version_label)
{
    for (size_t i = 0; i < b->count; i++)
        b->files[b->entries[i].file].used = true;
    text t = {0};
    header_begin(&t, b, model, version_label);
    uint64_t length = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < b->count && !t.failed; i++) {
        bundle_entry *e = &b->entries[i];
        e->convert = b->dtype != NULL && is_float(e->tensor->dtype);
        tg_tensor_options options = {e->slice, e->convert ? b->dtype : NULL, NULL};
        tg_tensor_error err;
        tg_tensor_stream *stream = NULL;
        if (tg_tensor_stream_open(NULL, NULL, b->files[e->file].held, e->tensor, &options, &stream,
                                  &err) != 0) {
            tg_respond_problem(req, err.reason, "tensor %.200s: %s", e->tensor->name, err.detail);
            ok = false;
            break;
        }
        const tg_tensor_plan *p = tg_tensor_stream_plan(stream);
        header_entry(&t, e->tensor, p, length);
        e->length = p->length;
        e->contiguous = p->contiguous;
        e->source = p->contiguous_offset;
        e->begin = length; /* relative to the data for now */
        length += p->length;
        tg_tensor_stream_free(stream);
        if (e->slice != NULL && (e->slice_copy = strdup(e->slice)) == NULL) {
            tg_respond_internal(req, "out of memory");
            ok = false;
        }
    }
    if (ok && !header_end(&t)) {
        if (t.too_large)
            tg_respond_problem(req, "bundle_too_large",
                               "the bundle's header would pass the safetensors bound of %llu "
                               "bytes; select fewer tensors",
                               (unsigned long long)BUNDLE_HEADER_MAX);
        else
            tg_respond_internal(req, "out of memory");
        ok = false;
    }
    if (!ok) {
        free(t.data);
        return false;
    }
    b->header = t.data;
    b->header_len = t.len;
    for (size_t i = 0; i < b->count; i++) {
        b->entries[i].begin += b->header_len;
        b->entries[i].slice = NULL; /* the selection is freed before the body is read */
    }
    b->total = b->header_len + length;
    return true;
}

/* Strong validator: the model, the version, and each entry's blob, name and slice,
 * and the dtype: everything the bytes depend on. */
static bool bundle_etag(const bundle *b, const char *model, const char *version_label, char out[35])
{
    tg_sha256 sha;
    bool ok = tg_sha256_init(&sha, "etag") == 0;
    const char *head[] = {"bundle", model, version_label, b->dtype ? b->dtype : ""};
    for (size_t i = 0; ok && i < sizeof head / sizeof head[0]; i++)
        ok = tg_sha256_update(&sha, head[i], strlen(head[i]) + 1) == 0;
    for (size_t i = 0; ok && i < b->count; i++) {
        const bundle_entry *e = &b->entries[i];
        const char *slice = e->slice_copy ? e->slice_copy : "";
        char mark[32];
        /* the slice text decides the shape in the header, its place and length the bytes */
        snprintf(mark, sizeof mark, "%llu+%llu", (unsigned long long)e->source,
                 (unsigned long long)e->length);
        ok = tg_sha256_update(&sha, b->files[e->file].sha256, 65) == 0 &&
             tg_sha256_update(&sha, e->tensor->name, e->tensor->name_len + 1) == 0 &&
             tg_sha256_update(&sha, slice, strlen(slice) + 1) == 0 &&
             tg_sha256_update(&sha, mark, strlen(mark) + 1) == 0 &&
             tg_sha256_update(&sha, e->convert ? "c" : "s", 2) == 0;
    }
    unsigned char digest[TG_SHA256_SIZE];
    ok = tg_sha256_final(&sha, digest) == 0 && ok;
    if (ok)
        tg_hex_encode(digest, 16, out);
    return ok;
}

/* The common path of GET and POST, once the selection is known. */
static void serve_bundle(tg_request *req, const selection *sel, const char *dtype, const char *only)
{
    if (sel->too_many) {
        tg_respond_problem(req, "bundle_too_large", "a bundle takes at most %u selectors",
                           BUNDLE_TENSORS_MAX);
        return;
    }
    size_t globs = 0;
    for (size_t i = 0; i < sel->count; i++)
        globs += sel->items[i].glob;
    if (globs > BUNDLE_GLOBS_MAX) {
        tg_respond_problem(req, "bundle_too_large",
                           "a bundle takes at most %u selectors with * or ? (%zu given); name "
                           "the tensors instead",
                           BUNDLE_GLOBS_MAX, globs);
        return;
    }
    if (dtype != NULL) {
        st_dtype d;
        if (!st_dtype_from_name(dtype, strlen(dtype), &d)) {
            tg_respond_problem(req, "invalid_dtype",
                               "dtype \"%.40s\" is unknown; conversions are to F64, F32, F16, "
                               "BF16, F8_E4M3 or F8_E5M2 (names are case-sensitive)",
                               dtype);
            return;
        }
    }
    if (only != NULL && (only[0] == '\0' || strlen(only) > TG_PATH_MAX)) {
        tg_respond_problem(req, "invalid_request", "file= names a file path of the version");
        return;
    }
    tg_version version;
    tg_file_records list = {0};
    int64_t model_id = 0;
    if (!lookup_files(req, &version, &list, &model_id)) {
        free(list.items);
        return;
    }
    bundle *b = calloc(1, sizeof *b);
    if (b == NULL) {
        free(list.items);
        tg_respond_internal(req, "out of memory");
        return;
    }
    b->server = req->server;
    b->stream_entry = SIZE_MAX;
    if (dtype != NULL && (b->dtype = strdup(dtype)) == NULL) {
        tg_respond_internal(req, "out of memory");
        goto done;
    }
    if (!hold_files(req, b, &list, only, &version))
        goto done;
    selection all = {0};
    const selection *use = sel;
    if (sel->count == 0) {
        const char *why = NULL;
        if (selection_add(&all, "*", 1, &why) != 0) {
            selection_free(&all);
            tg_respond_internal(req, "out of memory");
            goto done;
        }
        use = &all;
    }
    bool resolved = resolve(req, b, use);
    char model[2 * TG_NAME_MAX + 2], label[80];
    snprintf(model, sizeof model, "%s/%s", tg_param(req, "org"), tg_param(req, "name"));
    if (version.digest[0] != '\0')
        snprintf(label, sizeof label, "sha256:%s", version.digest);
    else
        snprintf(label, sizeof label, "draft:%lld", (long long)version.number);
    bool planned = resolved && plan(req, b, model, label);
    selection_free(&all);
    if (!planned)
        goto done;
    /* every blob the body reads, opened now: a missing or damaged one is answered
     * (500 blob_damaged, 503) before any byte is sent */
    for (size_t i = 0; i < b->file_count; i++)
        if (b->files[i].used &&
            (b->files[i].blob = tg_open_file_blob(req, b->files[i].record)) == NULL)
            goto done;
    char tag[35] = "", etag[40] = "";
    bool has_etag = bundle_etag(b, model, label, tag);
    if (has_etag)
        snprintf(etag, sizeof etag, "\"%s\"", tag);
    bool is_get = strcmp(req->method, "POST") != 0;
    if (is_get && has_etag && tg_etag_matches(tg_header(req, "If-None-Match"), tag)) {
        struct MHD_Response *response =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (response) {
            MHD_add_response_header(response, "ETag", etag);
            MHD_add_response_header(response, "Accept-Ranges", "bytes");
        }
        tg_respond(req, 304, response, 0);
        goto done;
    }
    uint64_t first = 0, length = b->total;
    const char *range = tg_header(req, "Range");
    const char *if_range = tg_header(req, "If-Range");
    if (if_range != NULL && (!has_etag || strcmp(if_range, etag) != 0))
        range = NULL;
    tg_range_result result = tg_range_parse(range, b->total, &first, &length);
    if (result == TG_RANGE_UNSATISFIABLE) {
        char content_range[64];
        snprintf(content_range, sizeof content_range, "bytes */%llu", (unsigned long long)b->total);
        const char *const headers[] = {"Content-Range", content_range, "ETag",
                                       has_etag ? etag : NULL, NULL};
        tg_respond_problem_headers(req, "range_not_satisfiable", headers,
                                   "the range is outside the bundle's %llu bytes",
                                   (unsigned long long)b->total);
        goto done;
    }
    if (result != TG_RANGE_OK) {
        first = 0;
        length = b->total;
    }
    /* a download, counted once: not a HEAD, nor a Range that continues one */
    if (!req->is_head && first == 0)
        tg_downloads_count(req->server->downloads, model_id);
    b->first = first;
    b->end = first + length;
    uint64_t total = b->total;
    struct MHD_Response *response =
        MHD_create_response_from_callback(length, TG_BLOB_BLOCK, read_bundle, b, free_bundle);
    if (response == NULL) {
        tg_respond_internal(req, "out of memory");
        goto done;
    }
    b = NULL; /* owned by the response */
    MHD_add_response_header(response, "Content-Type", "application/octet-stream");
    MHD_add_response_header(response, "Accept-Ranges", "bytes");
    if (has_etag)
        MHD_add_response_header(response, "ETag", etag);
    if (result == TG_RANGE_OK) {
        char content_range[96];
        snprintf(content_range, sizeof content_range, "bytes %llu-%llu/%llu",
                 (unsigned long long)first, (unsigned long long)(first + length - 1),
                 (unsigned long long)total);
        MHD_add_response_header(response, "Content-Range", content_range);
    }
    tg_respond(req, result == TG_RANGE_OK ? 206 : 200, response, length);
done:
    bundle_free(b);
    free(list.items);
}

/* ---- GET|HEAD ---- */

void tg_route_bundle_get(tg_request *req)
{
    const char *values[64];
    unsigned n = tg_query_all(req, "tensors", values, 64);
    if (n > 64) {
        tg_respond_problem(req, "invalid_selector",
                           "at most 64 tensors= arguments; list several selectors in one, "
                           "comma-separated, or POST the selection");
        return;
    }
    const char *dtype[2], *file[2];
    if (tg_query_all(req, "dtype", dtype, 2) > 1 || tg_query_all(req, "file", file, 2) > 1) {
        tg_respond_problem(req, "invalid_request", "dtype= and file= are given at most once");
        return;
    }
    selection sel = {0};
    for (unsigned i = 0; i < n && !sel.too_many; i++) {
        const char *why = NULL;
        int rc = selection_add_list(&sel, values[i], &why);
        if (rc == -2) {
            tg_respond_internal(req, "out of memory");
            selection_free(&sel);
            return;
        }
        if (rc == -1) {
            tg_respond_problem(req, "invalid_selector", "tensors=%.200s: %s", values[i], why);
            selection_free(&sel);
            return;
        }
    }
    serve_bundle(req, &sel, tg_query(req, "dtype"), tg_query(req, "file"));
    selection_free(&sel);
}

/* ---- POST: the selection as JSON, gathered up to BUNDLE_BODY_MAX ---- */

typedef struct gather {
    char *data;
    size_t len, cap;
    bool too_large, failed;
} gather;

void tg_route_bundle_post_start(tg_request *req)
{
    uint64_t declared = tg_request_body_size(req);
    if (declared != ST_FILE_SIZE_UNKNOWN && declared > BUNDLE_BODY_MAX) {
        tg_respond_problem(req, "bundle_too_large", "a bundle's POST body is limited to %d bytes",
                           BUNDLE_BODY_MAX);
        return;
    }
    req->state = calloc(1, sizeof(gather));
    if (req->state == NULL)
        tg_respond_internal(req, "out of memory");
}

void tg_route_bundle_post_feed(tg_request *req, const uint8_t *data, size_t len)
{
    gather *g = req->state;
    if (g == NULL || g->too_large || g->failed)
        return;
    if (g->len + len > BUNDLE_BODY_MAX) {
        g->too_large = true;
        return;
    }
    if (g->len + len + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + len + 1)
            cap *= 2;
        char *grown = realloc(g->data, cap);
        if (grown == NULL) {
            g->failed = true;
            return;
        }
        g->data = grown;
        g->cap = cap;
    }
    memcpy(g->data + g->len, data, len);
    g->len += len;
    g->data[g->len] = '\0';
}

void tg_route_bundle_post_cleanup(tg_request *req)
{
    gather *g = req->state;
    if (g != NULL)
        free(g->data);
    free(g);
    req->state = NULL;
}

/* A JSON member that is absent, or a string (answers 400 and returns false). */
static bool optional_string(tg_request *req, json_t *body, const char *key, const char **out)
{
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        tg_respond_problem(req, "invalid_request", "\"%s\" is a string", key);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

void tg_route_bundle_post(tg_request *req)
{
    gather *g = req->state;
    if (g == NULL || req->responded)
        return;
    if (g->too_large) {
        tg_respond_problem(req, "bundle_too_large", "a bundle's POST body is limited to %d bytes",
                           BUNDLE_BODY_MAX);
        return;
    }
    if (g->failed) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    if (g->len > 0 && !tg_json_depth_within(g->data, g->len, TG_JSON_DEPTH_MAX)) {
        tg_respond_problem(req, "json_too_deep",
                           "the body nests arrays and objects more than %d deep",
                           TG_JSON_DEPTH_MAX);
        return;
    }
    json_error_t error;
    /* an empty body is an empty object: every tensor, as stored */
    json_t *body =
        g->len ? json_loadb(g->data, g->len, JSON_REJECT_DUPLICATES, &error) : json_object();
    if (!json_is_object(body)) {
        json_decref(body);
        tg_respond_problem(req, "invalid_json",
                           "the body is a JSON object {\"tensors\": [...], \"dtype\"?, \"file\"?}");
        return;
    }
    static const char *const fields[] = {"tensors", "dtype", "file", NULL};
    const char *dtype, *file;
    if (!tg_json_known_fields(req, body, fields) || !optional_string(req, body, "dtype", &dtype) ||
        !optional_string(req, body, "file", &file)) {
        json_decref(body);
        return;
    }
    json_t *tensors = json_object_get(body, "tensors");
    selection sel = {0};
    if (tensors != NULL && !json_is_null(tensors)) {
        if (!json_is_array(tensors) || json_array_size(tensors) == 0) {
            tg_respond_problem(req, "invalid_selector",
                               "\"tensors\" is a non-empty array of selector strings (leave it "
                               "out for every tensor)");
            json_decref(body);
            return;
        }
        size_t i;
        json_t *item;
        json_array_foreach(tensors, i, item)
        {
            const char *why = NULL;
            int rc = json_is_string(item) ? selection_add(&sel, json_string_value(item),
                                                          json_string_length(item), &why)
                                          : -1;
            if (!json_is_string(item))
                why = "a selector is a string";
            if (rc == -2) {
                tg_respond_internal(req, "out of memory");
                break;
            }
            if (rc == -1) {
                tg_respond_problem(req, "invalid_selector", "tensors[%zu]: %s", i, why);
                break;
            }
            if (sel.too_many)
                break;
        }
    }
    if (!req->responded)
        serve_bundle(req, &sel, dtype, file);
    selection_free(&sel);
    json_decref(body);
}
