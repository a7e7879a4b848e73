/* lib/: the bottom layer (docs/ARCHITECTURE.md), the safetensors format library
 * (prefix st_): strict header parsing, this gate, content sniffing (sniff/), dtypes,
 * slicing, conversion, writing, .npy, stats and UTF-8. Pure functions over bytes
 * the caller supplies: no I/O, no HTTP, no SQL, nothing above it; the server, the
 * CLI, the fuzzers and the property tests share it, so they give one verdict.
 *
 * The gate: one streaming decision for a whole upload, used by `tensorgate validate`,
 * POST /v1/scan and the upload path alike, so all three give the same verdict.
 *
 * Feed the bytes in order. As soon as the first 8 + N bytes are in, the header
 * is judged; a refused file is refused then, before the body. Content that is
 * not safetensors is classified from its first ST_SNIFF_HEAD_MAX bytes.
 * Safetensors framing is always checked first: a valid file whose length bytes
 * spell another format's magic is still valid.
 *
 * Memory is bounded: the header buffer by limits.max_header_size, the sniff
 * buffer by ST_SNIFF_HEAD_MAX; the data section is never buffered. */
#ifndef ST_GATE_H
#define ST_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sniff.h"
#include "st_error.h"
#include "st_header.h"
#include "st_stats.h"

typedef enum st_gate_kind {
    ST_GATE_SAFETENSORS,  /* only safetensors passes */
    ST_GATE_SIDECAR,      /* safetensors, strict JSON, UTF-8 text or a structurally valid inert
                             format (PNG, JPEG, GIF, WebP, SentencePiece) pass (bounded in size) */
    ST_GATE_SIDECAR_JSON, /* a sidecar named *.json: only strict JSON passes (bounded in size) */
} st_gate_kind;

/* The kind of a sidecar (a file not named *.safetensors) by its name: a name ending in
 * ".json" (any case) must hold strict JSON, ST_GATE_SIDECAR_JSON; any other name is
 * ST_GATE_SIDECAR, judged by content alone. Strict JSON (docs/DESIGN.md §3): one RFC 8259
 * object or array, UTF-8 with no byte order mark, no duplicate key, numbers that fit a
 * double, only whitespace around it; anything else is sidecar_json_invalid, or
 * refused_format when the content is strongly identified (a pickle, an archive). */
st_gate_kind st_gate_sidecar_kind(const char *name);

typedef struct st_gate_config {
    st_limits limits;
    st_gate_kind kind;
    /* The file's name or path in its repository, or NULL (content alone decides). A
     * name a loader takes for code (st_code.h: modeling_x.py, run.sh, lib.so) is
     * refused with its code_* reason once the head is in, unless the content names a
     * stronger format; the name also goes into the sentences of code refusals. Borrowed:
     * it must outlive the gate. */
    const char *name;
    bool refuse_nonfinite; /* NaN/Inf in floating tensors is ST_NONFINITE_VALUES */
    /* The caller wants the verdict alone and knows the input's size (declared_size):
     * a safetensors header is judged by st_header_check (the same rules and verdict,
     * no tensor table), so st_gate_file has the counts with tensors NULL and
     * st_gate_stats is NULL. Ignored with refuse_nonfinite (its check needs the table)
     * or when the size is unknown. `tensorgate validate` sets it. */
    bool verdict_only;
    /* Optional: the whole input already in the caller's memory (a read-only mapping of
     * the file), input_len bytes, the same bytes it feeds. A safetensors header longer
     * than the head the gate buffers is then judged where it lies instead of being
     * copied: the header's bytes fed are counted, not kept, and limits.release (if
     * set) is told as the parse moves through it (st_header.h). Borrowed: it must stay
     * mapped until st_gate_finish has returned. */
    const uint8_t *input;
    uint64_t input_len;
    uint64_t sidecar_max_size; /* 0 means 16 MiB */
    /* GGUF content (magic "GGUF") is judged by the strict validator (st_gguf.h) and
     * admitted as format gguf in the ST_GATE_SIDECAR kind (an upload not named
     * *.safetensors), and in the safetensors kind too when this is set (`tensorgate
     * validate`); otherwise the safetensors kind refuses it as refused_format. */
    bool admit_gguf;
    /* The namespace's code policy allows code (docs/DESIGN.md, "The code policy"): in the
     * sidecar kinds, a file refused only because it is code is admitted instead, with
     * verdict.code saying which code and why. Everything else about the file is judged
     * as without the policy: a .py must still be UTF-8 text, a config.json with auto_map
     * strict JSON, a native binary or bytecode must not end in another strong format,
     * and a pickle (or an archive, ...) stays refused under any name. The safetensors
     * kind ignores it: a *.safetensors name promises safetensors. */
    bool allow_code;
    /* Optional memory budget (NULL: none). reserve is asked before the gate's buffer
     * (the head, the header, a sidecar) grows by bytes; false stops the gate as an
     * allocation failure would, with st_gate_over_budget() true. What was granted is
     * given back in one release call by st_gate_free, not when the buffer goes: the
     * parsed header that replaces it lives as long as the gate. */
    bool (*reserve)(void *budget_context, size_t bytes);
    void (*release)(void *budget_context, size_t bytes);
    void *budget_context;
} st_gate_config;

typedef enum st_gate_status {
    ST_GATE_CONTINUE, /* keep feeding */
    ST_GATE_REFUSED,  /* final: see st_gate_verdict */
    ST_GATE_ACCEPTED, /* final, only from st_gate_finish */
} st_gate_status;

typedef struct st_verdict {
    bool valid;
    st_format format; /* what the content is (safetensors when valid) */
    st_error error;   /* reason ST_OK when valid */
    /* A refused pickle (plain, in a PyTorch zip, in a NumPy file): the globals it
     * imports, whether it calls them, and their severity (sniff.h); count 0 otherwise. */
    st_pickle_findings findings;
    /* Admitted under config.allow_code although it is code: code.reason is the code_*
     * reason it would have been refused with and code.detail that refusal's sentence;
     * ST_OK when the file is not code (always ST_OK when refused). */
    st_error code;
} st_verdict;

typedef struct st_gate st_gate;

/* declared_size: the total size if known (Content-Length, stat), else ST_FILE_SIZE_UNKNOWN.
 * Returns NULL on allocation failure. */
st_gate *st_gate_new(const st_gate_config *config, uint64_t declared_size);
void st_gate_free(st_gate *gate);

/* Consumes the next len bytes. Once ST_GATE_REFUSED is returned, further feeds are ignored. */
st_gate_status st_gate_feed(st_gate *gate, const uint8_t *data, size_t len);

/* True when the rest of the input can change the verdict only by its length, not by
 * its bytes: a safetensors file whose header was accepted, now in its data section,
 * with no check on the values asked (refuse_nonfinite off). A caller that knows the
 * input's exact length (a regular file's size) may then pass over the data section
 * with st_gate_skip instead of reading and feeding it: the verdict is the same. */
bool st_gate_data_skippable(const st_gate *gate);

/* Counts the next len bytes of the input as fed without looking at them (bytes past
 * the data section's end are refused as data_trailing, as fed ones are). Does nothing
 * unless st_gate_data_skippable; st_gate_stats is NULL after a skip. */
st_gate_status st_gate_skip(st_gate *gate, uint64_t len);

/* End of input: checks the exact size and the policy; returns ACCEPTED or REFUSED. */
st_gate_status st_gate_finish(st_gate *gate);

/* The verdict once the gate is final. While st_gate_refusal_certain() holds and the
 * gate is not final yet: the refusal the head alone gives (what an answer given before
 * the end of the input says); st_gate_finish may still name the format from the tail. */
void st_gate_verdict(const st_gate *gate, st_verdict *out);

/* True once the input can no longer be accepted, whatever follows: the gate refused,
 * or it only waits for the end to name the format of content that is not safetensors
 * (nor JSON/text) from its tail (a ZIP behind a prefix). A caller storing the input may
 * stop storing it then; feeding on (memory stays bounded) and finishing gives the same
 * final verdict as st_gate_check_buffer. */
bool st_gate_refusal_certain(const st_gate *gate);

/* After acceptance of a safetensors file: the parsed header and per-tensor stats
 * (NULL for JSON/text sidecars; stats NULL after st_gate_skip). Owned by the gate. */
const st_file *st_gate_file(const st_gate *gate);
const st_tensor_stats *st_gate_stats(const st_gate *gate);
uint64_t st_gate_bytes_seen(const st_gate *gate);

/* True when the gate stopped because an allocation failed: the verdict is then not
 * a judgement of the content (valid false, reason ST_OUT_OF_MEMORY); callers answer
 * with a server error, not a refusal, and never record it as the file's fault. */
bool st_gate_out_of_memory(const st_gate *gate);
/* True when that stop was the budget's refusal (st_gate_config.reserve said no). */
bool st_gate_over_budget(const st_gate *gate);

/* The verdict's findings as a JSON array of {"global", "calls", "severity",
 * "offset"} (empty when none); NULL on allocation failure. */
json_t *st_verdict_findings_json(const st_verdict *verdict);
/* The same array as compact JSON text in out (what a rejection record keeps); ""
 * when there are no findings or the text does not fit out_size. */
void st_verdict_findings_text(const st_verdict *verdict, char *out, size_t out_size);

/* Whole-buffer convenience: runs the gate over buf as one file. */
void st_gate_check_buffer(const st_gate_config *config, const uint8_t *buf, size_t len,
                          st_verdict *out);

#endif
