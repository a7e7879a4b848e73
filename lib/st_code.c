/* Code a loader would execute, by name and in configuration (st_code.h). The suffix
 * tables say which names a loader (an interpreter, the dynamic linker, Jupyter, a
 * shell) picks as code; a name that merely contains one (".py.txt") is not code. */
#include "st_code.h"

#include <string.h>
#include <strings.h>

typedef struct code_suffix {
    const char *suffix;
    st_reason reason;
} code_suffix;

static const code_suffix code_suffixes[] = {
    {".py", ST_CODE_PYTHON},           {".pyw", ST_CODE_PYTHON},
    {".pyc", ST_CODE_COMPILED_PYTHON}, {".pyo", ST_CODE_COMPILED_PYTHON},
    {".ipynb", ST_CODE_NOTEBOOK},      {".sh", ST_CODE_SCRIPT},
    {".bash", ST_CODE_SCRIPT},         {".zsh", ST_CODE_SCRIPT},
    {".ksh", ST_CODE_SCRIPT},          {".csh", ST_CODE_SCRIPT},
    {".fish", ST_CODE_SCRIPT},         {".ps1", ST_CODE_SCRIPT},
    {".psm1", ST_CODE_SCRIPT},         {".bat", ST_CODE_SCRIPT},
    {".cmd", ST_CODE_SCRIPT},          {".vbs", ST_CODE_SCRIPT},
    {".js", ST_CODE_SCRIPT},           {".mjs", ST_CODE_SCRIPT},
    {".cjs", ST_CODE_SCRIPT},          {".rb", ST_CODE_SCRIPT},
    {".pl", ST_CODE_SCRIPT},           {".pm", ST_CODE_SCRIPT},
    {".php", ST_CODE_SCRIPT},          {".lua", ST_CODE_SCRIPT},
    {".tcl", ST_CODE_SCRIPT},          {".so", ST_CODE_NATIVE},
    {".dll", ST_CODE_NATIVE},          {".dylib", ST_CODE_NATIVE},
    {".exe", ST_CODE_NATIVE},          {".pyd", ST_CODE_NATIVE},
    {".bundle", ST_CODE_NATIVE},
};

/* The keys of a config a loader follows to code: transformers' auto_map (config.json,
 * tokenizer_config.json, processor, preprocessor, feature extractor and image
 * processor configs: "AutoModel": "modeling_x.Model") and custom_pipelines. */
static const char *const code_keys[] = {"auto_map", "custom_pipelines"};

st_reason st_code_reason_by_name(const char *name)
{
    if (name == NULL)
        return ST_OK;
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    size_t len = strlen(base);
    for (size_t i = 0; i < sizeof code_suffixes / sizeof code_suffixes[0]; i++) {
        size_t n = strlen(code_suffixes[i].suffix);
        if (len >= n && strcasecmp(base + len - n, code_suffixes[i].suffix) == 0)
            return code_suffixes[i].reason;
    }
    return ST_OK;
}

st_reason st_code_reason_of_format(st_format format)
{
    switch (format) {
    case ST_FORMAT_NATIVE:
        return ST_CODE_NATIVE;
    case ST_FORMAT_PYTHON_BYTECODE:
        return ST_CODE_COMPILED_PYTHON;
    case ST_FORMAT_SCRIPT:
        return ST_CODE_SCRIPT;
    default:
        return ST_OK;
    }
}

static bool is_empty_value(const json_t *value)
{
    return json_is_null(value) || (json_is_object(value) && json_object_size(value) == 0) ||
           (json_is_array(value) && json_array_size(value) == 0) ||
           (json_is_string(value) && json_string_length(value) == 0);
}

/* The first string a code key's value names ("modeling_x.Model"), for the sentence:
 * the value itself, or the first string member of an object or array, one level down. */
static const char *first_target(const json_t *value)
{
    if (json_is_string(value))
        return json_string_value(value);
    const json_t *item = NULL;
    if (json_is_object(value)) {
        const char *key;
        json_object_foreach((json_t *)value, key, item)
        {
            (void)key;
            if (json_is_string(item))
                return json_string_value(item);
        }
    } else if (json_is_array(value)) {
        size_t i;
        json_array_foreach(value, i, item) if (json_is_string(item)) return json_string_value(item);
    }
    return NULL;
}

st_reason st_code_check_json(const json_t *root, const char *name, st_error *err)
{
    if (!json_is_object(root))
        return ST_OK;
    const char *file = name != NULL ? name : "the file";
    if (json_object_get(root, "cells") != NULL && json_object_get(root, "nbformat") != NULL)
        return st_error_set(err, ST_CODE_NOTEBOOK, ST_NO_OFFSET, NULL,
                            "%.120s is a Jupyter notebook (\"cells\" and \"nbformat\"): code",
                            file);
    for (size_t i = 0; i < sizeof code_keys / sizeof code_keys[0]; i++) {
        const json_t *value = json_object_get(root, code_keys[i]);
        if (value == NULL || is_empty_value(value))
            continue;
        const char *target = first_target(value);
        if (target != NULL)
            return st_error_set(err, ST_CODE_REFERENCE, ST_NO_OFFSET, NULL,
                                "%.120s: key \"%s\" points a loader at code (\"%.60s\")", file,
                                code_keys[i], target);
        return st_error_set(err, ST_CODE_REFERENCE, ST_NO_OFFSET, NULL,
                            "%.120s: key \"%s\" points a loader at code", file, code_keys[i]);
    }
    return ST_OK;
}
