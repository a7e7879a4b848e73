/* Inside the content classifier (sniff.h): what the per-format files of lib/sniff/
 * share with each other and with the dispatcher (sniff.c). Each format file answers
 * for its format alone, ST_FORMAT_UNKNOWN when its signal is absent; the order in
 * which the formats are tried, and so which wins, is the dispatcher's. Everything
 * here reads untrusted bytes under the rules of sniff.c: every offset and length
 * from the input is checked against the bytes present, nothing is allocated. The
 * helpers every format file uses are sniff_util.h's. Not for use outside lib/sniff/. */
#ifndef ST_SNIFF_FORMATS_H
#define ST_SNIFF_FORMATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sniff.h"
#include "sniff_util.h"

/* ---- inert formats (png.c, jpeg.c, gif.c, webp.c, sentencepiece.c) ---- */

/* Each: the magic at offset 0 of the head, and the whole file's structure (see
 * st_sniff_inert_valid in sniff.h). */
bool st_sniff_png_magic(const uint8_t *head, size_t len);
bool st_sniff_png_valid(const uint8_t *buf, size_t len, st_sniff_info *info);
bool st_sniff_jpeg_magic(const uint8_t *head, size_t len);
bool st_sniff_jpeg_valid(const uint8_t *buf, size_t len, st_sniff_info *info);
bool st_sniff_gif_magic(const uint8_t *head, size_t len);
bool st_sniff_gif_valid(const uint8_t *buf, size_t len, st_sniff_info *info);
bool st_sniff_webp_magic(const uint8_t *head, size_t len);
bool st_sniff_webp_valid(const uint8_t *buf, size_t len, st_sniff_info *info);
bool st_sniff_sentencepiece_magic(const uint8_t *head, size_t len);
bool st_sniff_sentencepiece_valid(const uint8_t *buf, size_t len, st_sniff_info *info);

/* ---- text (text.c) ---- */

/* UTF-8 without NUL, C0 controls other than tab, LF, FF, CR, DEL or C1 controls.
 * When complete is false, a valid but cut multi-byte character at the end is allowed. */
bool st_sniff_utf8_text(const uint8_t *buf, size_t len, bool complete);
/* JSON (text starting with '{' or '[') or text, else ST_FORMAT_UNKNOWN; whole says
 * the head is the whole file. Run after the pickle walk: protocol-0 pickles are text. */
st_format st_sniff_text(const uint8_t *head, size_t head_len, bool whole, st_sniff_info *info);

/* ---- code a loader would execute (code.c) ---- */

/* ELF, PE (MZ with its PE signature in the head), Mach-O and the 0xCAFEBABE magic
 * (ST_FORMAT_NATIVE), or Python bytecode (ST_FORMAT_PYTHON_BYTECODE), at offset 0. */
st_format st_sniff_code(const uint8_t *head, size_t head_len, st_sniff_info *info);
/* A #! interpreter line at offset 0 ("#!/..." or "#! /..."): ST_FORMAT_SCRIPT. */
st_format st_sniff_shebang(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- pickle (pickle.c) ---- */

/* What a walk of the opcodes at the start of a buffer found (see pickle.c). */
typedef struct st_pickle_walk {
    size_t opcodes;       /* valid opcodes read */
    size_t end;           /* offset after the last valid opcode */
    bool reached_stop;    /* a valid STOP ended the walk */
    bool clean_stop;      /* ... with one item, no mark, at the end or before another opcode */
    bool invalid;         /* the walk ended on an opcode CPython would refuse */
    bool jumped;          /* a binary argument was read (text can be skipped over by it) */
    bool runs_code;       /* a call of an imported or unknown callable, or INST */
    bool imports_as_text; /* GLOBAL/INST in a stream of text opcodes only */
    bool code_ops;        /* any opcode that imports, calls or builds: not a data-only pickle */
    int protocol;         /* last PROTO argument, -1 when none */
    uint8_t code_op;      /* the opcode that made runs_code or imports_as_text */
    size_t code_offset;   /* and its offset */
    uint8_t global_op;    /* the first GLOBAL or INST, for the detail */
    const uint8_t *global_module, *global_name;
    size_t global_module_len, global_name_len;
    st_pickle_findings *findings; /* where the globals go (NULL: not collected) */
    uint64_t base;                /* added to offsets in findings */
} st_pickle_walk;

void st_pickle_walk_buffer(const uint8_t *buf, size_t len, st_pickle_walk *w);
/* The same walk, adding the globals it imports to findings (base: buf's offset). */
void st_pickle_walk_findings(const uint8_t *buf, size_t len, uint64_t base,
                             st_pickle_findings *findings, st_pickle_walk *w);
/* A walked prefix that is a data-only pickle reaching a clean STOP, and whose
 * following bytes are no pickle or data-only pickles too (complete: buf is whole). */
bool st_pickle_walk_data_only(const st_pickle_walk *w, const uint8_t *buf, size_t len,
                              bool complete);
/* The verdict on a walked prefix of len bytes; complete says they are the whole stream. */
bool st_pickle_walk_is_pickle(const st_pickle_walk *w, size_t len, bool complete);
/* PROTO 2..5 at offset 0. */
bool st_pickle_strong_magic(const uint8_t *buf, size_t len);
/* A strong magic, or a walk that says pickle. */
bool st_pickle_is_stream(const uint8_t *buf, size_t len, bool complete);
/* Describes a walked pickle in the detail: what made it one and where. */
void st_pickle_note_walk(st_sniff_info *info, const st_pickle_walk *w, const char *where);
/* The magics at offset 0: PyTorch's legacy magic-number pickle, then PROTO 2..5. */
st_format st_sniff_pickle_magic(const uint8_t *head, size_t head_len, st_sniff_info *info);
/* Headerless (protocol 0/1) or mixed-protocol pickles, by walking the head; is_text
 * says the head is UTF-8 text (st_sniff_utf8_text), and then a data-only pickle is
 * left to the text check (UNKNOWN). */
st_format st_sniff_pickle_walk(const uint8_t *head, size_t head_len, bool whole, bool is_text,
                               st_sniff_info *info);

/* ---- NumPy .npy (npy.c) ---- */

extern const uint8_t st_sniff_npy_magic[6];
/* Whether the .npy header dict in buf holds an object dtype ('|O'): its data is a pickle. */
bool st_sniff_npy_has_objects(const uint8_t *buf, size_t len);
/* An object .npy in buf (len bytes, at offset base in the file): adds the globals
 * of the pickle after its header, as far as buf holds it, to findings (may be NULL). */
void st_sniff_npy_findings(const uint8_t *buf, size_t len, uint64_t base,
                           st_pickle_findings *findings);
/* The .npy magic at offset 0. */
st_format st_sniff_npy(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- GGUF (gguf.c) ---- */

st_format st_sniff_gguf(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- HDF5 (hdf5.c) ---- */

/* The superblock signature at offset 0. */
st_format st_sniff_hdf5(const uint8_t *head, size_t head_len, st_sniff_info *info);
/* The signature after a user block: at 512, 1024, 2048, ... */
st_format st_sniff_hdf5_user_block(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- compressed streams and archives (compressed.c) ---- */

/* 7z, xz, gzip, zstd, lz4, bzip2 and zstd skippable frames at offset 0. */
st_format st_sniff_compressed(const uint8_t *head, size_t head_len, st_sniff_info *info);
/* A zlib stream header: a weak signal, tried only on binary content. */
st_format st_sniff_zlib(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- ZIP: PyTorch checkpoints, .npz, others (zip.c) ---- */

/* A zip signature at offset 0 (local header, EOCD, spanning marker, central
 * directory, zip64 record). */
bool st_sniff_zip_magic_at_zero(const uint8_t *head, size_t head_len);
/* A zip at offset 0 (magic_at_zero) or after a prefix: local headers in the head,
 * the end-of-central-directory in end_view (the file's end; end_abs its offset in
 * the file when end_abs_known). ST_FORMAT_UNKNOWN when neither is found. */
st_format st_sniff_zip(const uint8_t *head, size_t head_len, const uint8_t *end_view,
                       size_t end_view_len, bool end_abs_known, uint64_t end_abs,
                       bool magic_at_zero, st_sniff_info *info);

/* ---- tar, and PyTorch's legacy tar checkpoints (tar.c) ---- */

/* 'ustar' at offset 257: walks the member headers in the head. */
st_format st_sniff_tar(const uint8_t *head, size_t head_len, st_sniff_info *info);

/* ---- TFLite (tflite.c) ---- */

st_format st_sniff_tflite(const uint8_t *head, size_t head_len, uint64_t file_size,
                          st_sniff_info *info);

/* ---- ONNX / protobuf, a weak signal (onnx.c) ---- */

st_format st_sniff_onnx(const uint8_t *head, size_t head_len, uint64_t file_size,
                        st_sniff_info *info);

#endif
