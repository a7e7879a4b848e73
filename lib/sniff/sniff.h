/* lib/sniff/: the content classifier, which names what a file is when it is not
 * safetensors (docs/DESIGN.md §3): pickle, PyTorch zip and legacy checkpoints, zip,
 * tar, NumPy .npy/.npz, GGUF, HDF5, TFLite, ONNX, compressed streams, JSON, text, and
 * the inert formats admitted beside a model (PNG, JPEG, GIF, WebP, SentencePiece). It
 * never looks at a file name; it works on the first bytes of a file (head) and, when
 * available, its last bytes (tail) plus the total size, allocates nothing, and does
 * work linear in the bytes it looks at. sniff.c is the dispatcher: it owns the order
 * in which formats are tried (and so which wins); each other file of the folder
 * recognises one format (pickle.c, zip.c, tar.c, npy.c, onnx.c, gguf.c, hdf5.c,
 * tflite.c, compressed.c, text.c, code.c) through sniff_formats.h. The gate (st_gate.h)
 * calls st_sniff on whatever fails the safetensors framing. */
#ifndef ST_SNIFF_H
#define ST_SNIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum st_format {
    ST_FORMAT_SAFETENSORS,
    ST_FORMAT_PICKLE,
    ST_FORMAT_PYTORCH_ZIP,
    ST_FORMAT_PYTORCH_LEGACY,
    ST_FORMAT_ZIP,
    ST_FORMAT_TAR,
    ST_FORMAT_NUMPY,
    ST_FORMAT_GGUF,
    ST_FORMAT_HDF5,
    ST_FORMAT_TFLITE,
    ST_FORMAT_ONNX,
    ST_FORMAT_COMPRESSED,
    ST_FORMAT_TEXT,
    ST_FORMAT_JSON,
    ST_FORMAT_UNKNOWN,
    /* inert formats admitted as sidecars when their structure is valid (st_sniff_inert) */
    ST_FORMAT_PNG,
    ST_FORMAT_JPEG,
    ST_FORMAT_GIF,
    ST_FORMAT_WEBP,
    ST_FORMAT_SENTENCEPIECE,
    /* code a loader would execute (code.c): always refused, with a code_* reason */
    ST_FORMAT_NATIVE,          /* ELF, PE, Mach-O (and the fat/Java 0xCAFEBABE magic) */
    ST_FORMAT_PYTHON_BYTECODE, /* a .pyc: version magic, CR LF, then a marshalled code object */
    ST_FORMAT_SCRIPT,          /* text whose first line is a #! interpreter line */
    ST_FORMAT_COUNT
} st_format;

/* How much of the head st_sniff looks at, at most; callers pass up to this much. */
#define ST_SNIFF_HEAD_MAX (64 * 1024)
#define ST_SNIFF_TAIL_MAX (64 * 1024)

/* What a pickle would do (pickle.c, pickle_globals.c): each global it imports, by
 * GLOBAL, STACK_GLOBAL, INST or an extension code, whether a call opcode (REDUCE,
 * NEWOBJ, NEWOBJ_EX, OBJ, INST) is applied to it, and the severity of the global
 * (the table of pickle_globals.c, docs/DESIGN.md §3). */
typedef enum st_pickle_severity {
    ST_PICKLE_BENIGN,    /* known tensor or container rebuilding */
    ST_PICKLE_UNKNOWN,   /* in neither list */
    ST_PICKLE_DANGEROUS, /* process, file system, network, eval/exec, imports, unpicklers */
} st_pickle_severity;

#define ST_PICKLE_GLOBAL_MAX 96 /* "module.name", printable ASCII, cut at 95 bytes */
/* distinct globals listed; more are counted in omitted. A dangerous global takes the
 * place of a listed one of lower severity when the list is full, so that padding a
 * pickle with harmless imports cannot push its payload out of the list. */
#define ST_PICKLE_FINDINGS_MAX 16

typedef struct st_pickle_finding {
    char global[ST_PICKLE_GLOBAL_MAX]; /* "posix.system"; "?" when not resolvable */
    bool calls;                        /* a call opcode applies it */
    st_pickle_severity severity;
    uint64_t offset; /* of the importing opcode in the file (or in the zip member) */
} st_pickle_finding;

typedef struct st_pickle_findings {
    size_t count;   /* entries in items */
    size_t omitted; /* distinct globals past ST_PICKLE_FINDINGS_MAX (or displaced) */
    st_pickle_finding items[ST_PICKLE_FINDINGS_MAX];
    /* the walker's bookkeeping: a number per listed item, so that a call reaches the
     * item its global became even after the list changed */
    uint32_t ids[ST_PICKLE_FINDINGS_MAX];
    uint32_t next_id;
} st_pickle_findings;

typedef struct st_sniff_info {
    char detail[160]; /* why: "pickle protocol 4 (0x80 0x04)", "zip member 'x/y' holds a pickle" */
    st_pickle_findings findings; /* a pickle's globals, in the order first imported */
} st_sniff_info;

/* "dangerous", "unknown", "benign". */
const char *st_pickle_severity_name(st_pickle_severity severity);
/* The severity of module.name by the table of pickle_globals.c. */
st_pickle_severity st_pickle_global_severity(const char *module, const char *name);
/* How many dangerous entries the table holds (documentation, tests). */
size_t st_pickle_dangerous_rule_count(void);
/* The highest severity among the findings (BENIGN when there are none). */
st_pickle_severity st_pickle_findings_worst(const st_pickle_findings *findings);
/* Walks the pickle (or successive pickles) at the start of buf, len bytes, within a
 * bounded budget, and adds every global it imports to findings (deduplicated by
 * name; offsets are base + the offset in buf). */
void st_pickle_collect_findings(const uint8_t *buf, size_t len, uint64_t base,
                                st_pickle_findings *findings);

/* Stable names: "safetensors", "pickle", "pytorch-zip", "pytorch-legacy", "zip", "tar",
 * "numpy", "gguf", "hdf5", "tflite", "onnx", "compressed", "text", "json", "unknown",
 * "png", "jpeg", "gif", "webp", "sentencepiece", "native", "python-bytecode", "script". */
const char *st_format_name(st_format format);

/* Classifies content that is not valid safetensors. Never returns
 * ST_FORMAT_SAFETENSORS (that is the header validator's call). tail may be NULL.
 * info may be NULL. */
st_format st_sniff(const uint8_t *head, size_t head_len, const uint8_t *tail, size_t tail_len,
                   uint64_t file_size, st_sniff_info *info);

/* True when the bytes parse as the start of a pickle opcode stream (any protocol,
 * including protocol 0/1 text pickles and streams that break after a payload).
 * The text sidecar check uses it: a protocol-0 pickle is ASCII but never text. */
bool st_sniff_is_pickle(const uint8_t *buf, size_t len);

/* True when the bytes are a pickle that can import, call or build objects: a binary
 * PROTO header, or an opcode stream st_sniff_is_pickle accepts that is not a
 * data-only pickle (one that reaches STOP with no GLOBAL, STACK_GLOBAL, INST, OBJ,
 * REDUCE, NEWOBJ, NEWOBJ_EX, BUILD, EXT or persistent id, nor any such in the
 * pickles after it). Text that is a data-only pickle ("N.B." is NONE STOP) is text. */
bool st_sniff_is_code_pickle(const uint8_t *buf, size_t len, bool complete);

/* True when buf is valid UTF-8 text without NUL or other control characters than
 * tab, CR, LF, FF, and not a pickle that can import or call (st_sniff_is_code_pickle). `complete`
 * says buf is the whole file (else a multi-byte character cut at the end is allowed). */
bool st_sniff_is_text(const uint8_t *buf, size_t len, bool complete);

/* The inert formats a model repository holds beside its weights (the model card's
 * images, a SentencePiece tokenizer.model): which one the head's magic names
 * (ST_FORMAT_PNG, _JPEG, _GIF, _WEBP, _SENTENCEPIECE), else ST_FORMAT_UNKNOWN. A magic
 * alone admits nothing: st_sniff_inert_valid judges the whole file. */
st_format st_sniff_inert(const uint8_t *head, size_t head_len);

/* True when buf (the whole file) is a structurally valid file of that inert format
 * (png.c, jpeg.c, gif.c, webp.c, sentencepiece.c); else false with info's detail
 * saying what is wrong. Bounded: no allocation, work linear in len. */
bool st_sniff_inert_valid(st_format format, const uint8_t *buf, size_t len, st_sniff_info *info);

#endif
