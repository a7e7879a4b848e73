/* GGUF headers as JSON (gguf_view.h), from the validator's parse: values are decoded
 * with st_gguf_value_decode over bytes the gate already checked. */
#include "gguf_view.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

uint64_t tg_gguf_parameters(const st_gguf_file *file)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < file->tensor_count; i++)
        if (__builtin_add_overflow(total, file->tensors[i].elements, &total))
            return UINT64_MAX;
    return total;
}

static const char *type_name(uint32_t ggml_type)
{
    const char *name = "unknown";
    (void)st_gguf_ggml_type(ggml_type, &name, NULL, NULL);
    return name;
}

json_t *tg_gguf_tensor_json(const st_gguf_file *file, const st_gguf_tensor *t)
{
    uint64_t dims[ST_GGUF_DIMS_MAX];
    st_gguf_row_major_shape(t, dims);
    json_t *shape = json_array();
    for (uint32_t d = 0; d < t->n_dims; d++)
        json_array_append_new(shape, json_integer((json_int_t)dims[d]));
    uint64_t offset = file->data_start + t->offset;
    return json_pack("{s:s%, s:s, s:o, s:I, s:I, s:[I,I]}", "name", (const char *)t->name,
                     t->name_len, "dtype", type_name(t->type), "shape", shape, "offset",
                     (json_int_t)offset, "size", (json_int_t)t->size, "data_offsets",
                     (json_int_t)offset, (json_int_t)(offset + t->size));
}

/* At most limit bytes of s, cut back to a UTF-8 character boundary. */
static size_t utf8_prefix(const uint8_t *s, uint64_t len, size_t limit)
{
    if (len <= limit)
        return (size_t)len;
    size_t n = limit;
    while (n > 0 && (s[n] & 0xc0) == 0x80) /* s[n] is a continuation: cut before its lead */
        n--;
    return n;
}

/* A decoded scalar or string as JSON; *cut set when a string was shortened. */
static json_t *value_json(const st_gguf_value *v, size_t string_limit, bool *cut)
{
    char text[24];
    switch (v->type) {
    case ST_GGUF_V_STRING: {
        size_t n = utf8_prefix(v->str, v->str_len, string_limit);
        *cut = n < v->str_len;
        return json_stringn((const char *)v->str, n);
    }
    case ST_GGUF_V_BOOL:
        return json_boolean(v->u != 0);
    case ST_GGUF_V_I8:
    case ST_GGUF_V_I16:
    case ST_GGUF_V_I32:
    case ST_GGUF_V_I64:
        return json_integer((json_int_t)v->i);
    case ST_GGUF_V_F32:
    case ST_GGUF_V_F64:
        if (isfinite(v->f))
            return json_real(v->f);
        /* JSON has no NaN or infinity: their names, as text */
        return json_string(isnan(v->f) ? "NaN" : v->f > 0 ? "Infinity" : "-Infinity");
    default: /* unsigned: above INT64_MAX as a decimal string (JSON numbers are int64 here) */
        if (v->u <= (uint64_t)INT64_MAX)
            return json_integer((json_int_t)v->u);
        snprintf(text, sizeof text, "%" PRIu64, v->u);
        return json_string(text);
    }
}

json_t *tg_gguf_kv_json(const st_gguf_kv *kv)
{
    json_t *out = json_pack("{s:s}", "type", st_gguf_value_type_name(kv->type));
    if (out == NULL)
        return NULL;
    bool cut = false;
    st_gguf_value v;
    if (kv->type != ST_GGUF_V_ARRAY) {
        (void)st_gguf_value_decode(kv->type, kv->value, &v);
        json_object_set_new(out, "value", value_json(&v, TG_GGUF_STRING_SHOWN, &cut));
        if (cut) {
            json_object_set_new(out, "length", json_integer((json_int_t)v.str_len));
            json_object_set_new(out, "truncated", json_true());
        }
        return out;
    }
    json_object_set_new(out, "element_type", json_string(st_gguf_value_type_name(kv->array_type)));
    json_object_set_new(out, "length", json_integer((json_int_t)kv->array_count));
    json_t *items = json_array();
    const uint8_t *p = kv->value;
    uint64_t shown = kv->array_count < TG_GGUF_ARRAY_SHOWN ? kv->array_count : TG_GGUF_ARRAY_SHOWN;
    bool any_cut = shown < kv->array_count;
    for (uint64_t i = 0; i < shown; i++) {
        p = st_gguf_value_decode(kv->array_type, p, &v);
        json_array_append_new(items, value_json(&v, TG_GGUF_ELEMENT_SHOWN, &cut));
        any_cut = any_cut || cut;
    }
    json_object_set_new(out, "value", items);
    if (any_cut)
        json_object_set_new(out, "truncated", json_true());
    return out;
}

json_t *tg_gguf_header_json(const char *path, const char *sha256, uint64_t size,
                            const st_gguf_file *file)
{
    json_t *metadata = json_object();
    for (uint64_t i = 0; i < file->kv_count; i++) {
        const st_gguf_kv *kv = &file->kvs[i];
        json_object_setn_new(metadata, (const char *)kv->key, kv->key_len, tg_gguf_kv_json(kv));
    }
    json_t *tensors = json_array();
    uint64_t per_type[64] = {0};
    for (uint64_t i = 0; i < file->tensor_count; i++) {
        const st_gguf_tensor *t = &file->tensors[i];
        json_array_append_new(tensors, tg_gguf_tensor_json(file, t));
        if (t->type < 64)
            per_type[t->type] += t->elements;
    }
    json_t *parameters = json_object();
    for (uint32_t type = 0; type < 64; type++)
        if (per_type[type] > 0)
            json_object_set_new(parameters, type_name(type),
                                json_integer((json_int_t)per_type[type]));
    return json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:s%, s:I, s:I, s:I, s:I, s:o, s:o, s:o, "
                     "s:I}",
                     "format", "gguf", "path", path, "sha256", sha256, "size", (json_int_t)size,
                     "version", (int)file->version, "alignment", (int)file->alignment,
                     "architecture", (const char *)file->architecture, file->architecture_len,
                     "header_size", (json_int_t)file->header_end, "data_start",
                     (json_int_t)file->data_start, "metadata_count", (json_int_t)file->kv_count,
                     "tensor_count", (json_int_t)file->tensor_count, "metadata", metadata,
                     "tensors", tensors, "parameters", parameters, "parameters_total",
                     (json_int_t)tg_gguf_parameters(file));
}

json_t *tg_gguf_hub_json(const st_gguf_file *file)
{
    json_t *out =
        json_pack("{s:I, s:s%}", "total", (json_int_t)tg_gguf_parameters(file), "architecture",
                  (const char *)file->architecture, file->architecture_len);
    if (out == NULL)
        return NULL;
    char key[128];
    int n = snprintf(key, sizeof key, "%.*s.context_length", (int)file->architecture_len,
                     (const char *)file->architecture);
    const st_gguf_kv *kv =
        n > 0 && (size_t)n < sizeof key ? st_gguf_find_kv(file, key, (size_t)n) : NULL;
    if (kv != NULL && kv->type != ST_GGUF_V_ARRAY && kv->type != ST_GGUF_V_STRING &&
        kv->type != ST_GGUF_V_BOOL && kv->type != ST_GGUF_V_F32 && kv->type != ST_GGUF_V_F64) {
        st_gguf_value v;
        bool cut = false;
        (void)st_gguf_value_decode(kv->type, kv->value, &v);
        json_object_set_new(out, "context_length", value_json(&v, 0, &cut));
    }
    return out;
}
