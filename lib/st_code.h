/* Code a loader would execute (docs/DESIGN.md §3, "Code in a repository"), judged by
 * name and in configuration; the content magics (ELF, PE, Mach-O, .pyc, #!) are the
 * sniffer's (lib/sniff/code.c). The gate (st_gate.h) applies all three to every file
 * whose name it is given, so an upload, an import, POST /v1/scan?name= and
 * `tensorgate validate` give one verdict. Pure functions, nothing allocated but
 * jansson's walk of an already parsed document. */
#ifndef ST_CODE_H
#define ST_CODE_H

#include <jansson.h>

#include "sniff.h"
#include "st_error.h"

/* The code reason a file name marks, by the suffix of its last path component (any
 * case), where a loader picks the file by name: .py/.pyw (code_python), .pyc/.pyo
 * (code_compiled_python), .ipynb (code_notebook), shell and other scripts
 * (code_script), shared objects and executables (code_native); else ST_OK.
 * NULL is ST_OK. */
st_reason st_code_reason_by_name(const char *name);

/* The code reason of content the sniffer named (ST_FORMAT_NATIVE, _PYTHON_BYTECODE,
 * _SCRIPT), else ST_OK. */
st_reason st_code_reason_of_format(st_format format);

/* What a parsed JSON sidecar says about code: a Jupyter notebook (an object with
 * "cells" and "nbformat") is code_notebook; an object whose top level holds a key that
 * points a loader at code (auto_map, custom_pipelines) with a value that is not null
 * nor empty is code_reference. Fills err with a sentence naming the file (name, or
 * "the file" when NULL) and the key; returns ST_OK, err untouched, otherwise. */
st_reason st_code_check_json(const json_t *root, const char *name, st_error *err);

#endif
