/* The streaming gate (st_gate.h): one decision per upload, the same whatever the
 * chunking of the input.
 *
 * Phases, in order:
 *   HEAD     the first bytes are buffered until the candidate rule below can decide
 *            whether this is a safetensors attempt (at most ST_SNIFF_HEAD_MAX bytes);
 *            a file whose name marks code (st_code.h) is refused here once the head
 *            is complete, as code or as the strong format its content has;
 *   HEADER   a safetensors attempt: buffer until 8 + N bytes are in, then parse;
 *   DATA     the data section streams through st_scanner, never buffered;
 *   SIDECAR  (sidecar kinds only) JSON or text, buffered up to sidecar_max_size; or
 *            (not *.json) an inert format named by its magic (PNG, JPEG, GIF, WebP,
 *            SentencePiece), buffered the same and admitted when its whole
 *            structure is valid (st_sniff_inert_valid);
 *   TAIL     not safetensors (nor JSON/text) and st_sniff cannot name it from the
 *            head: keep the head and the last ST_SNIFF_TAIL_MAX bytes (a ring) and
 *            sniff again with the tail at the end, so a ZIP behind a junk prefix
 *            (found from its end-of-central-directory) is named as such; streaming
 *            then gives the verdict st_gate_check_buffer gives. The refusal is
 *            already certain here (st_gate_refusal_certain): only the format's name
 *            waits, and until the end the verdict holds the refusal the head gives,
 *            so a caller that stops before the end still has a deterministic answer;
 *   GGUF_HEADER  content that starts with the GGUF magic (sidecar kind, or config.admit_gguf):
 *            buffered up to the header limit and parsed by st_gguf as it grows;
 *   GGUF_DATA    its data section streams through st_gguf_data (padding, the end);
 *   DONE     a final verdict was reached.
 *
 * The candidate rule ("is this a safetensors attempt?", docs/DESIGN.md §3: framing first).
 * Let N be the u64 LE of bytes 0..7 and H the header bytes 8 .. 8+N-1.
 *   1. Fewer than 8 bytes in the whole file: not an attempt. A strongly identified
 *      format (pickle, archives, ...) is refused as that format; anything else is
 *      file_too_small (sidecar kind: judged as JSON/text).
 *   2. Bytes 0..7 that are all UTF-8 text (TAB, LF, CR, printable ASCII, valid
 *      multi-byte sequences): not an attempt. Such N is at least 0x0909090909090909,
 *      far above any header limit, so no file within the limit is lost by this rule;
 *      it keeps JSON (`{"cfg": {...`), text and protocol-0 pickles out of the
 *      header path.
 *   3. The first byte of H that is not JSON whitespace is `{`: an attempt, whatever
 *      the rest says. N above the limit is header_too_large, unless the head is
 *      strongly identified as another format (a pickle whose argument bytes put `{`
 *      at offset 8 is still named a pickle); leading whitespace is left to the
 *      parser, which refuses it as header_start.
 *   4. Otherwise (H starts with another byte, H is empty or all whitespace): an
 *      attempt only when N is within the limit and st_sniff cannot name the format
 *      (UNKNOWN); the parser then names the precise header error. Else not an
 *      attempt.
 * A valid safetensors file always has `{` at byte 8 and N within the limit, so it
 * is an attempt (rule 3) whatever its length bytes spell (`PK\3\4\0\0\0\0`).
 * Not an attempt: safetensors kind refuses the format named by st_sniff on the
 * first ST_SNIFF_HEAD_MAX bytes at once, or, when the head names none, at the end
 * with the tail (TAIL); sidecar kind judges the content as JSON or text.
 * Code (docs/DESIGN.md §3): the sniffer's native, python-bytecode and script formats
 * are strong and refused with their code_* reason in every kind; a JSON sidecar that
 * is a notebook or points a loader at code (auto_map) is refused once parsed.
 * The JSON sidecar kind (a *.json name) skips the rule: nothing but strict JSON (an
 * object or array) passes, and a head that cannot start one is refused at once.
 *
 * Determinism: every decision reads a fixed prefix (8 bytes, the first non-space
 * header byte, min(size, ST_SNIFF_HEAD_MAX) bytes for st_sniff, 8 + N bytes for the
 * header) and is taken only once that prefix is complete or the input ended, so
 * byte-by-byte, chunked and whole-buffer feeding give identical verdicts.
 *
 * Memory: the buffer is grown by doubling up to the phase's bound (HEAD:
 * ST_SNIFF_HEAD_MAX, HEADER: 8 + N with N already checked against the limit,
 * SIDECAR: sidecar_max_size), so it never exceeds twice the bytes received nor the
 * bound; TAIL holds at most ST_SNIFF_HEAD_MAX + ST_SNIFF_TAIL_MAX bytes. */
#include "st_gate.h"
#include "st_alloc.h"
#include "st_code.h"
#include "st_gguf.h"
#include "st_utf8.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SIDECAR_DEFAULT_MAX (16u * 1024u * 1024u)

_Static_assert(0x0909090909090909ULL > ST_HEADER_SIZE_MAX,
               "text-like length bytes must never be a header size within the limit");

typedef enum gate_phase {
    PHASE_HEAD,
    PHASE_HEADER,
    PHASE_DATA,
    PHASE_SIDECAR,
    PHASE_TAIL,
    PHASE_GGUF_HEADER, /* a GGUF attempt (magic "GGUF"): buffer until st_gguf parses it */
    PHASE_GGUF_DATA,   /* its data section streams through st_gguf_data */
    PHASE_DONE,
} gate_phase;

typedef enum sidecar_class {
    SIDECAR_UNDECIDED,
    SIDECAR_JSON,
    SIDECAR_TEXT,
    SIDECAR_INERT, /* an image or a SentencePiece model by its magic: judged whole at the end */
} sidecar_class;

struct st_gate {
    st_gate_config config;
    uint64_t declared_size;
    uint64_t header_limit;  /* resolved max_header_size, <= ST_HEADER_SIZE_MAX */
    uint64_t sidecar_limit; /* resolved sidecar_max_size */
    const uint8_t *tail;    /* only st_gate_check_buffer knows the tail */
    size_t tail_len;

    gate_phase phase;
    st_gate_status status;
    uint64_t seen; /* bytes consumed: the absolute offset of the next byte */

    uint8_t *buf; /* the first buf_len bytes of the input (HEAD, HEADER, SIDECAR) */
    size_t buf_len;
    size_t buf_cap;
    size_t buf_bound; /* the phase's bound on buf_len */

    uint64_t header_size; /* N, once known */
    bool have_file;
    st_file file;
    bool have_scanner;
    bool header_in_input; /* the header is judged in config.input, not copied to buf */
    bool data_skipped;    /* st_gate_skip passed over data bytes: the stats count only part */
    st_scanner scanner;
    uint64_t data_end; /* absolute end of the data section (data_start + data_size) */

    st_reason name_reason; /* the code reason config.name marks, or ST_OK */
    /* TAIL entered for native code or bytecode admitted under config.allow_code: the
     * end accepts it unless the tail names another format (not a refusal yet) */
    bool code_pending;
    st_format code_format;
    sidecar_class sidecar;
    st_format inert; /* SIDECAR_INERT: the format its magic named */
    uint8_t *ring;   /* TAIL: the last ring_len bytes, oldest at ring_next when full */
    size_t ring_len;
    size_t ring_next;
    bool out_of_memory;
    bool over_budget; /* the out_of_memory stop was config.reserve's refusal */
    size_t reserved;  /* bytes granted by config.reserve, released by st_gate_free */
    st_verdict verdict;

    bool have_gguf;
    st_gguf_file gguf; /* points into buf, which is kept while it lives */
    st_gguf_data gguf_data;
    size_t gguf_next_try; /* buf_len at which the header parse is tried again */
};

static bool is_json_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static uint64_t read_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Rule 2: all of the 8 length bytes are UTF-8 text without control characters other
 * than TAB, LF, CR. A multi-byte sequence cut at the end of the 8 bytes counts as text. */
static bool length_bytes_are_text(const uint8_t *p)
{
    size_t i = 0;
    while (i < 8) {
        uint8_t c = p[i];
        if (c < 0x80) {
            if (c != '\t' && c != '\n' && c != '\r' && (c < 0x20 || c == 0x7f))
                return false;
            i++;
            continue;
        }
        size_t n = st_utf8_decode(p + i, 8 - i, NULL);
        if (n == 0)
            return false;
        if (n == ST_UTF8_CUT)
            return true; /* a valid sequence the 8 bytes cut */
        i += n;
    }
    return true;
}

/* Formats named from a strong signal; weak ones (onnx) and text classes never
 * override the safetensors framing. */
static bool format_is_strong(st_format format)
{
    switch (format) {
    case ST_FORMAT_PICKLE:
    case ST_FORMAT_PYTORCH_ZIP:
    case ST_FORMAT_PYTORCH_LEGACY:
    case ST_FORMAT_ZIP:
    case ST_FORMAT_TAR:
    case ST_FORMAT_NUMPY:
    case ST_FORMAT_GGUF:
    case ST_FORMAT_HDF5:
    case ST_FORMAT_TFLITE:
    case ST_FORMAT_COMPRESSED:
    case ST_FORMAT_NATIVE:
    case ST_FORMAT_PYTHON_BYTECODE:
    case ST_FORMAT_SCRIPT:
        return true;
    default:
        return false;
    }
}

static void finish_refused(st_gate *gate, st_format format)
{
    st_error_clear(&gate->verdict.code); /* a refused file is never admitted as code */
    gate->verdict.valid = false;
    gate->verdict.format = format;
    gate->status = ST_GATE_REFUSED;
    gate->phase = PHASE_DONE;
}

static void finish_accepted(st_gate *gate, st_format format)
{
    gate->verdict.valid = true;
    gate->verdict.format = format;
    st_error_clear(&gate->verdict.error);
    gate->status = ST_GATE_ACCEPTED;
    gate->phase = PHASE_DONE;
}

/* The code policy (st_gate_config.allow_code) applies to sidecars only. */
static bool code_allowed(const st_gate *gate)
{
    return gate->config.allow_code && gate->config.kind != ST_GATE_SAFETENSORS;
}

/* Marks the file as code admitted by the policy; the first mark (the name's) stays. */
static void mark_code(st_gate *gate, const st_error *why)
{
    if (gate->verdict.code.reason == ST_OK)
        gate->verdict.code = *why;
}

/* Allocation failure is not a verdict on the content: the gate stops with
 * valid = false, reason ST_OUT_OF_MEMORY, and st_gate_out_of_memory() true. */
static void fail_out_of_memory(st_gate *gate)
{
    gate->out_of_memory = true;
    st_error_set(&gate->verdict.error, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                 "out of memory in the gate");
    finish_refused(gate, ST_FORMAT_UNKNOWN);
}

/* The size the input is known to have now: the bytes seen at the end, else the
 * declared size (possibly ST_FILE_SIZE_UNKNOWN). */
static uint64_t known_size(const st_gate *gate, bool at_end)
{
    return at_end ? gate->seen : gate->declared_size;
}

static size_t sniff_head_len(const st_gate *gate)
{
    return gate->buf_len < ST_SNIFF_HEAD_MAX ? gate->buf_len : ST_SNIFF_HEAD_MAX;
}

/* The tail st_sniff may see now: the caller's (st_gate_check_buffer), or at the end
 * of an input buffered whole, its last ST_SNIFF_TAIL_MAX bytes; else none. */
static const uint8_t *current_tail(const st_gate *gate, bool at_end, size_t *tail_len)
{
    if (gate->tail != NULL) {
        *tail_len = gate->tail_len;
        return gate->tail;
    }
    if (at_end && gate->seen == gate->buf_len && gate->buf_len > 0) {
        *tail_len = gate->buf_len < ST_SNIFF_TAIL_MAX ? gate->buf_len : ST_SNIFF_TAIL_MAX;
        return gate->buf + (gate->buf_len - *tail_len);
    }
    *tail_len = 0;
    return NULL;
}

/* st_sniff on the first head_len bytes, with the tail only at the end (with_tail):
 * a decision taken before the end must read the head alone, so that it is the same
 * in st_gate_check_buffer (which knows the tail from the start) and in streaming. */
static st_format sniff_head_window(const st_gate *gate, size_t head_len, bool with_tail,
                                   bool at_end, st_sniff_info *info)
{
    memset(info, 0, sizeof *info);
    size_t tail_len = 0;
    const uint8_t *tail = with_tail && at_end ? current_tail(gate, at_end, &tail_len) : NULL;
    return st_sniff(gate->buf, head_len, tail, tail_len, known_size(gate, at_end), info);
}

/* On the first min(size, ST_SNIFF_HEAD_MAX) bytes; callers make sure that many are
 * buffered (or the input ended). */
static st_format sniff_head(const st_gate *gate, bool with_tail, bool at_end, st_sniff_info *info)
{
    return sniff_head_window(gate, sniff_head_len(gate), with_tail, at_end, info);
}

static bool head_complete(const st_gate *gate, bool at_end)
{
    return at_end || gate->buf_len >= ST_SNIFF_HEAD_MAX;
}

/* Fills the verdict with a refused_format refusal; the caller decides whether it is
 * final (finish_refused) or provisional (TAIL). */
/* The first finding of the highest severity, NULL when there are none. */
static const st_pickle_finding *worst_finding(const st_pickle_findings *findings)
{
    const st_pickle_finding *worst = NULL;
    for (size_t i = 0; i < findings->count; i++)
        if (worst == NULL || findings->items[i].severity > worst->severity)
            worst = &findings->items[i];
    return worst;
}

static void set_format_refusal(st_gate *gate, st_format format, const st_sniff_info *info)
{
    /* A pickle's worst import is named in the sentence too: that is what a rejection
     * record's detail keeps (the full list is the verdict's findings). */
    char imports[160] = "";
    const st_pickle_finding *worst = info != NULL ? worst_finding(&info->findings) : NULL;
    if (worst != NULL)
        snprintf(imports, sizeof imports, "; imports %s (%s%s)%s", worst->global,
                 st_pickle_severity_name(worst->severity), worst->calls ? ", called" : "",
                 info->findings.count + info->findings.omitted > 1 ? " and more" : "");
    st_reason code = st_code_reason_of_format(format);
    if (code != ST_OK)
        st_error_set(&gate->verdict.error, code, 0, NULL, "%.120s is code: %s",
                     gate->config.name != NULL ? gate->config.name : "the file",
                     info != NULL && info->detail[0] != '\0' ? info->detail
                                                             : st_format_name(format));
    else if (info != NULL && info->detail[0] != '\0')
        st_error_set(&gate->verdict.error, ST_REFUSED_FORMAT, ST_NO_OFFSET, NULL,
                     "not safetensors: %s (%s)%s", st_format_name(format), info->detail, imports);
    else
        st_error_set(&gate->verdict.error, ST_REFUSED_FORMAT, ST_NO_OFFSET, NULL,
                     "not safetensors: %s", st_format_name(format));
    gate->verdict.valid = false;
    gate->verdict.format = format;
    if (info != NULL)
        gate->verdict.findings = info->findings;
    else
        memset(&gate->verdict.findings, 0, sizeof gate->verdict.findings);
}

static void refuse_format(st_gate *gate, st_format format, const st_sniff_info *info)
{
    set_format_refusal(gate, format, info);
    finish_refused(gate, format);
}

/* The refusal of content that is not safetensors and that no strong signal named:
 * refused_format with what st_sniff said (unknown, text, JSON, a weak signal), except
 * that a sidecar's unknown/text/JSON (which failed the JSON and text checks) is
 * sidecar_text_invalid. Fills the verdict without finishing (see set_format_refusal). */
static void set_unnamed_refusal(st_gate *gate, st_format format, const st_sniff_info *info)
{
    if (gate->config.kind != ST_GATE_SAFETENSORS &&
        (format == ST_FORMAT_TEXT || format == ST_FORMAT_JSON || format == ST_FORMAT_UNKNOWN)) {
        st_error_set(&gate->verdict.error, ST_SIDECAR_TEXT_INVALID, ST_NO_OFFSET, NULL,
                     "neither JSON nor UTF-8 text");
        gate->verdict.valid = false;
        gate->verdict.format = ST_FORMAT_UNKNOWN;
        return;
    }
    set_format_refusal(gate, format, info);
}

/* Grows buf to hold at least want bytes (want <= buf_bound), doubling. */
static bool buffer_reserve(st_gate *gate, size_t want)
{
    if (want <= gate->buf_cap)
        return true;
    size_t cap = gate->buf_cap ? gate->buf_cap : 4096;
    while (cap < want) {
        if (cap > SIZE_MAX / 2) {
            cap = want;
            break;
        }
        cap *= 2;
    }
    if (cap > gate->buf_bound && want <= gate->buf_bound)
        cap = gate->buf_bound;
    /* Only growth past what was granted before is asked for: a buffer released after
     * the header keeps its grant, so a later one (none today) would reuse it. */
    if (gate->config.reserve != NULL && cap > gate->reserved) {
        if (!gate->config.reserve(gate->config.budget_context, cap - gate->reserved)) {
            gate->over_budget = true;
            return false;
        }
        gate->reserved = cap;
    }
    uint8_t *grown = st_realloc(gate->buf, cap);
    if (grown == NULL)
        return false;
    gate->buf = grown;
    gate->buf_cap = cap;
    return true;
}

static void release_buffer(st_gate *gate)
{
    free(gate->buf);
    gate->buf = NULL;
    gate->buf_len = gate->buf_cap = 0;
}

/* ---- DATA phase ---- */

/* len bytes at absolute offset gate->seen, data NULL when they are skipped unread
 * (st_gate_skip); consumes all len of them. */
static void data_consume(st_gate *gate, const uint8_t *data, uint64_t len)
{
    uint64_t inside = 0;
    if (gate->seen < gate->data_end) {
        inside = gate->data_end - gate->seen;
        if (inside > len)
            inside = len;
        if (data != NULL && gate->have_scanner)
            st_scanner_feed(&gate->scanner, data, (size_t)inside);
    }
    gate->seen = len > UINT64_MAX - gate->seen ? UINT64_MAX : gate->seen + len;
    if (inside < len) {
        st_error_set(&gate->verdict.error, ST_DATA_TRAILING, gate->data_end, NULL,
                     "bytes after the end of the data section at offset %llu",
                     (unsigned long long)gate->data_end);
        finish_refused(gate, ST_FORMAT_SAFETENSORS);
    }
}

static void data_finish(st_gate *gate)
{
    const st_file *file = &gate->file;
    if (gate->seen < gate->data_end) {
        /* the tensor cut by the end of the input: the first one (file order) that
         * ends after it */
        uint64_t relative = gate->seen - file->data_start;
        const char *cut = NULL;
        for (size_t i = 0; i < file->tensor_count; i++) {
            if (file->tensors != NULL && file->tensors[i].end > relative) {
                cut = file->tensors[i].name;
                break;
            }
        }
        st_error_set(&gate->verdict.error, ST_DATA_TRUNCATED, gate->seen, cut,
                     "the input ends at offset %llu but the data section ends at %llu",
                     (unsigned long long)gate->seen, (unsigned long long)gate->data_end);
        finish_refused(gate, ST_FORMAT_SAFETENSORS);
        return;
    }
    if (gate->config.refuse_nonfinite &&
        (gate->scanner.total_nan != 0 || gate->scanner.total_inf != 0)) {
        for (size_t i = 0; i < file->tensor_count; i++) {
            const st_tensor_stats *s = &gate->scanner.stats[i];
            if (s->nan == 0 && s->inf == 0)
                continue;
            const st_tensor *t = &file->tensors[i];
            st_error_set(&gate->verdict.error, ST_NONFINITE_VALUES, file->data_start + t->begin,
                         t->name, "tensor holds %llu NaN and %llu infinite values",
                         (unsigned long long)s->nan, (unsigned long long)s->inf);
            finish_refused(gate, ST_FORMAT_SAFETENSORS);
            return;
        }
    }
    finish_accepted(gate, ST_FORMAT_SAFETENSORS);
}

/* ---- HEADER phase ---- */

/* Enters the header phase of a safetensors attempt. N has not been checked yet. */
static void header_begin(st_gate *gate, bool at_end)
{
    uint64_t header_size = 0;
    st_reason reason = st_header_length(gate->buf, 8, known_size(gate, at_end),
                                        &gate->config.limits, &header_size, &gate->verdict.error);
    if (reason != ST_OK) {
        finish_refused(gate, ST_FORMAT_SAFETENSORS);
        return;
    }
    /* N <= header_limit <= ST_HEADER_SIZE_MAX, so 8 + N fits in size_t */
    gate->header_size = header_size;
    gate->phase = PHASE_HEADER;
    gate->buf_bound = (size_t)(8 + header_size);
    if (gate->buf_bound < gate->buf_len)
        gate->buf_bound = gate->buf_len; /* bytes past the header already buffered */
    /* the caller holds the input: what the head did not buffer is not copied */
    gate->header_in_input = gate->config.input != NULL && gate->buf_len == gate->seen &&
                            gate->buf_len < 8 + header_size &&
                            gate->config.input_len >= 8 + header_size;
}

/* Called when the header phase may be able to proceed. */
static void header_step(st_gate *gate, bool at_end)
{
    size_t header_end = (size_t)(8 + gate->header_size);
    uint64_t have = gate->header_in_input ? gate->seen : gate->buf_len;
    if (have < header_end) {
        if (at_end) {
            /* the input ended inside the header */
            uint64_t ignored;
            if (st_header_length(gate->buf, 8, gate->seen, &gate->config.limits, &ignored,
                                 &gate->verdict.error) == ST_OK)
                st_error_set(&gate->verdict.error, ST_HEADER_TRUNCATED, gate->seen, NULL,
                             "the input ends at offset %llu inside the %llu-byte header",
                             (unsigned long long)gate->seen, (unsigned long long)gate->header_size);
            finish_refused(gate, ST_FORMAT_SAFETENSORS);
        }
        return;
    }
    uint64_t file_size = known_size(gate, false);
    /* the verdict alone: no tensor table, no per-tensor stats (nothing reads them) */
    bool lean = gate->config.verdict_only && !gate->config.refuse_nonfinite &&
                file_size != ST_FILE_SIZE_UNKNOWN;
    /* the release hook is for the caller's input, never for the gate's own copy */
    st_limits limits = gate->config.limits;
    const uint8_t *header = gate->header_in_input ? gate->config.input : gate->buf;
    if (!gate->header_in_input)
        limits.release = NULL;
    st_reason reason = (lean ? st_header_check : st_header_parse)(
        header, header_end, file_size, &limits, &gate->file, &gate->verdict.error);
    if (reason == ST_OUT_OF_MEMORY) {
        /* the header could not be held: no verdict on it */
        fail_out_of_memory(gate);
        return;
    }
    if (reason != ST_OK) {
        finish_refused(gate, ST_FORMAT_SAFETENSORS);
        return;
    }
    gate->have_file = true;
    if (__builtin_add_overflow(gate->file.data_start, gate->file.data_size, &gate->data_end))
        gate->data_end = UINT64_MAX; /* cannot be reached: the input is then truncated */
    if (!lean) {
        if (st_scanner_init(&gate->scanner, &gate->file) != 0) {
            fail_out_of_memory(gate);
            return;
        }
        gate->have_scanner = true;
    }
    gate->phase = PHASE_DATA;
    /* bytes buffered past the header belong to the data section */
    /* the input's header is fed up to its end and no further (st_gate_feed) */
    size_t extra_len = gate->header_in_input ? 0 : gate->buf_len - header_end;
    uint8_t *extra = gate->buf + (gate->header_in_input ? 0 : header_end);
    gate->seen -= extra_len;
    data_consume(gate, extra, extra_len);
    release_buffer(gate);
    if (at_end && gate->phase == PHASE_DATA)
        data_finish(gate);
}

/* ---- TAIL phase ---- */

static void ring_append(st_gate *gate, const uint8_t *data, size_t len)
{
    /* only the last ST_SNIFF_TAIL_MAX bytes can stay */
    if (len > ST_SNIFF_TAIL_MAX) {
        data += len - ST_SNIFF_TAIL_MAX;
        len = ST_SNIFF_TAIL_MAX;
    }
    while (len > 0) {
        size_t room = ST_SNIFF_TAIL_MAX - gate->ring_next;
        size_t n = len < room ? len : room;
        memcpy(gate->ring + gate->ring_next, data, n);
        gate->ring_next = (gate->ring_next + n) % ST_SNIFF_TAIL_MAX;
        gate->ring_len =
            gate->ring_len + n > ST_SNIFF_TAIL_MAX ? ST_SNIFF_TAIL_MAX : gate->ring_len + n;
        data += n;
        len -= n;
    }
}

/* Every byte seen so far is in buf (HEAD and SIDECAR buffer all they see), so the
 * ring starts from buf's end; of buf only the head_keep bytes st_sniff was given
 * stay, the same whatever the chunking. The refusal is certain from here on: the
 * verdict holds the head's refusal (head_format, head_info: st_sniff on those
 * head_keep bytes alone) until tail_finish replaces it. */
static void tail_begin(st_gate *gate, size_t head_keep, st_format head_format,
                       const st_sniff_info *head_info)
{
    set_unnamed_refusal(gate, head_format, head_info);
    gate->ring = st_malloc(ST_SNIFF_TAIL_MAX);
    if (gate->ring == NULL) {
        fail_out_of_memory(gate);
        return;
    }
    ring_append(gate, gate->buf, gate->buf_len);
    if (gate->buf_len > head_keep)
        gate->buf_len = head_keep;
    gate->phase = PHASE_TAIL;
}

/* Native code or bytecode the policy admits must be that and nothing more: sniffed
 * again with its magic blanked, a strong format behind it (a ZIP found from its end, a
 * tar, a pickle) is what it also is, and refused as such. Returns that format (info
 * filled) or ST_FORMAT_UNKNOWN; ST_FORMAT_UNKNOWN too when the copy cannot be made
 * (then *failed is set). */
static st_format format_behind_code(const uint8_t *head, size_t head_len, const uint8_t *tail,
                                    size_t tail_len, uint64_t size, st_sniff_info *info,
                                    bool *failed)
{
    *failed = false;
    if (head_len > ST_SNIFF_HEAD_MAX)
        head_len = ST_SNIFF_HEAD_MAX;
    uint8_t *copy = st_malloc(head_len ? head_len : 1);
    if (copy == NULL) {
        *failed = true;
        return ST_FORMAT_UNKNOWN;
    }
    memcpy(copy, head, head_len);
    memset(copy, 0, head_len < 8 ? head_len : 8);
    st_format format = st_sniff(copy, head_len, tail, tail_len, size, info);
    free(copy);
    if (format_is_strong(format) && st_code_reason_of_format(format) == ST_OK)
        return format;
    return ST_FORMAT_UNKNOWN;
}

/* Admits the native code or bytecode in buf (its head), with the tail given, unless
 * another format hides behind it. */
static void finish_code_binary(st_gate *gate, st_format format, const uint8_t *tail,
                               size_t tail_len)
{
    st_sniff_info behind_info;
    memset(&behind_info, 0, sizeof behind_info);
    bool failed;
    st_format behind = format_behind_code(gate->buf, sniff_head_len(gate), tail, tail_len,
                                          gate->seen, &behind_info, &failed);
    if (failed) {
        fail_out_of_memory(gate);
        return;
    }
    if (behind != ST_FORMAT_UNKNOWN) {
        refuse_format(gate, behind, &behind_info);
        return;
    }
    finish_accepted(gate, format); /* code admitted by the policy, verdict.code says so */
}

static void tail_finish(st_gate *gate)
{
    uint8_t *tail = st_malloc(gate->ring_len ? gate->ring_len : 1);
    if (tail == NULL) {
        fail_out_of_memory(gate);
        return;
    }
    /* oldest byte first: at ring_next once the ring has wrapped, else at 0 */
    size_t start = gate->ring_len == ST_SNIFF_TAIL_MAX ? gate->ring_next : 0;
    size_t first = gate->ring_len == ST_SNIFF_TAIL_MAX ? ST_SNIFF_TAIL_MAX - start : gate->ring_len;
    memcpy(tail, gate->ring + start, first);
    memcpy(tail + first, gate->ring, gate->ring_len - first);
    st_sniff_info info;
    memset(&info, 0, sizeof info);
    st_format format =
        st_sniff(gate->buf, sniff_head_len(gate), tail, gate->ring_len, gate->seen, &info);
    if (gate->code_pending && format == gate->code_format) {
        finish_code_binary(gate, format, tail, gate->ring_len);
        free(tail);
        return;
    }
    free(tail);
    set_unnamed_refusal(gate, format, &info);
    finish_refused(gate, gate->verdict.format);
}

/* ---- SIDECAR phase ---- */

/* The first token of a JSON object is `{` then `"` or `}`; of an array `[` then a
 * value or `]` (whitespace allowed between). Anything else (`[![badge]...`, a
 * `{{ template }}`) is judged as text. Looks within the buffered head; when false,
 * *bad is the offset of the byte that rules JSON out (len: only whitespace). */
static bool sidecar_looks_like_json(const uint8_t *p, size_t len, size_t *bad)
{
    size_t i = 0;
    while (i < len && is_json_space(p[i]))
        i++;
    *bad = i;
    if (i >= len || (p[i] != '{' && p[i] != '['))
        return false;
    uint8_t open = p[i++];
    while (i < len && is_json_space(p[i]))
        i++;
    if (i >= len)
        return true; /* `{` or `[` then only whitespace: invalid JSON, say so */
    *bad = i;
    uint8_t c = p[i];
    if (open == '{')
        return c == '"' || c == '}';
    return c == ']' || c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') ||
           c == 't' || c == 'f' || c == 'n';
}

static size_t sidecar_window(const st_gate *gate)
{
    uint64_t window = ST_SNIFF_HEAD_MAX;
    if (gate->sidecar_limit < window)
        window = gate->sidecar_limit;
    return (size_t)window;
}

static void sidecar_refuse_too_large(st_gate *gate)
{
    st_error_set(&gate->verdict.error, ST_SIDECAR_TOO_LARGE, gate->sidecar_limit, NULL,
                 "sidecar larger than the limit of %llu bytes",
                 (unsigned long long)gate->sidecar_limit);
    finish_refused(gate, gate->sidecar == SIDECAR_JSON    ? ST_FORMAT_JSON
                         : gate->sidecar == SIDECAR_INERT ? gate->inert
                                                          : ST_FORMAT_TEXT);
}

static size_t sidecar_head_len(const st_gate *gate)
{
    size_t window = sidecar_window(gate);
    return gate->buf_len < window ? gate->buf_len : window;
}

/* A JSON sidecar (*.json) whose first tokens cannot start an object or array (bad:
 * the byte that rules it out, inside the head): no strict JSON can follow, so it is
 * refused from the head, as sidecar_json_invalid unless a strong format names it. The
 * sentence and the offset depend on the head alone. */
static void json_sidecar_refuse_start(st_gate *gate, size_t len, size_t bad, bool at_end)
{
    st_sniff_info info;
    st_format format = sniff_head_window(gate, len, true, at_end, &info);
    if (format_is_strong(format)) {
        refuse_format(gate, format, &info);
        return;
    }
    if (len - bad >= 3 && memcmp(gate->buf + bad, "\xef\xbb\xbf", 3) == 0)
        st_error_set(&gate->verdict.error, ST_SIDECAR_JSON_INVALID, bad, NULL,
                     "a .json file must hold a JSON object or array; it starts with a UTF-8 "
                     "byte order mark, which strict JSON does not allow");
    else
        st_error_set(&gate->verdict.error, ST_SIDECAR_JSON_INVALID, bad, NULL,
                     "a .json file must hold a JSON object or array; byte 0x%02x at offset "
                     "%zu cannot appear there",
                     gate->buf[bad], bad);
    finish_refused(gate, ST_FORMAT_JSON);
}

/* Neither JSON nor text: a strong format is named from the head at once; anything
 * else waits for the end, where the tail may name it (the refusal is certain). */
static void sidecar_classify_other(st_gate *gate, size_t len, bool at_end)
{
    st_sniff_info info;
    st_format format = sniff_head_window(gate, len, true, at_end, &info);
    if (code_allowed(gate) && gate->config.kind == ST_GATE_SIDECAR &&
        (format == ST_FORMAT_NATIVE || format == ST_FORMAT_PYTHON_BYTECODE)) {
        /* native code or bytecode the policy admits: streamed like any other content
         * that is not text, and accepted at the end unless its tail names another
         * format (a ZIP appended to an ELF) */
        set_format_refusal(gate, format, &info);
        mark_code(gate, &gate->verdict.error);
        if (at_end) {
            size_t tail_len = 0;
            const uint8_t *tail = current_tail(gate, true, &tail_len);
            finish_code_binary(gate, format, tail, tail_len);
            return;
        }
        tail_begin(gate, len, format, &info);
        gate->code_pending = true;
        gate->code_format = format;
        return;
    }
    if (format_is_strong(format)) {
        refuse_format(gate, format, &info);
    } else if (!at_end) {
        tail_begin(gate, len, format, &info);
    } else {
        set_unnamed_refusal(gate, format, &info);
        finish_refused(gate, gate->verdict.format);
    }
}

/* Text that opens with a #! interpreter line is a script: refused as code. */
static bool sidecar_refuse_script(st_gate *gate, size_t len, bool at_end)
{
    if (len < 2 || gate->buf[0] != '#' || gate->buf[1] != '!')
        return false;
    st_sniff_info info;
    st_format format = sniff_head_window(gate, len, true, at_end, &info);
    if (format != ST_FORMAT_SCRIPT)
        return false;
    if (code_allowed(gate)) {
        /* a script the policy admits: judged as text from here on */
        set_format_refusal(gate, format, &info);
        mark_code(gate, &gate->verdict.error);
        st_error_clear(&gate->verdict.error);
        gate->verdict.format = ST_FORMAT_UNKNOWN;
        memset(&gate->verdict.findings, 0, sizeof gate->verdict.findings);
        return false;
    }
    refuse_format(gate, format, &info);
    return true;
}

/* Classifies the sidecar from its first sidecar_window bytes (or all of it). */
static void sidecar_classify(st_gate *gate, bool at_end)
{
    size_t len = sidecar_head_len(gate);
    size_t bad = 0;
    bool json_kind = gate->config.kind == ST_GATE_SIDECAR_JSON;
    if (sidecar_looks_like_json(gate->buf, len, &bad) || (json_kind && bad == len)) {
        /* (a *.json head of whitespace only: the parser judges the whole) */
        gate->sidecar = SIDECAR_JSON;
    } else if (st_sniff_is_code_pickle(gate->buf, len, at_end && len == gate->buf_len)) {
        st_sniff_info info;
        (void)sniff_head_window(gate, len, true, at_end, &info);
        refuse_format(gate, ST_FORMAT_PICKLE, &info);
        return;
    } else if (json_kind) {
        json_sidecar_refuse_start(gate, len, bad, at_end);
        return;
    } else if (st_sniff_is_text(gate->buf, len, at_end && len == gate->buf_len)) {
        if (sidecar_refuse_script(gate, len, at_end))
            return;
        gate->sidecar = SIDECAR_TEXT;
    } else if (st_sniff_inert(gate->buf, len) != ST_FORMAT_UNKNOWN) {
        /* a model card's image or a tokenizer.model: buffered whole (bounded by the
         * sidecar limit) and admitted only when its whole structure is valid */
        gate->sidecar = SIDECAR_INERT;
        gate->inert = st_sniff_inert(gate->buf, len);
    } else {
        sidecar_classify_other(gate, len, at_end);
        return;
    }
    if (gate->declared_size != ST_FILE_SIZE_UNKNOWN && gate->declared_size > gate->sidecar_limit)
        sidecar_refuse_too_large(gate);
}

/* A sidecar that failed the JSON or text check: if the whole content names a strong
 * format (a ZIP appended to JSON, text before a ZIP), that is the more useful verdict. */
static bool sidecar_refuse_strong_format(st_gate *gate)
{
    st_sniff_info info;
    st_format format = sniff_head_window(gate, sidecar_head_len(gate), true, true, &info);
    if (!format_is_strong(format))
        return false;
    refuse_format(gate, format, &info);
    return true;
}

/* Judges a sidecar classified as JSON, whole, with jansson (RFC 8259, an object or
 * array at the top, no duplicate key, no NUL in strings, numbers that fit a double). */
static void sidecar_final_json(st_gate *gate)
{
    if (gate->buf_len == 0) {
        /* only a *.json sidecar is judged as JSON when empty (jansson wants a buffer) */
        st_error_set(&gate->verdict.error, ST_SIDECAR_JSON_INVALID, 0, NULL,
                     "a .json file must hold a JSON object or array; this one is empty");
        finish_refused(gate, ST_FORMAT_JSON);
        return;
    }
    json_error_t jerr;
    json_t *root =
        json_loadb((const char *)gate->buf, gate->buf_len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL && json_error_code(&jerr) == json_error_out_of_memory) {
        fail_out_of_memory(gate); /* jansson's allocation, not the file's fault */
        return;
    }
    if (root == NULL) {
        if (sidecar_refuse_strong_format(gate))
            return;
        st_error_set(&gate->verdict.error, ST_SIDECAR_JSON_INVALID,
                     jerr.position >= 0 ? (uint64_t)jerr.position : ST_NO_OFFSET, NULL,
                     "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        finish_refused(gate, ST_FORMAT_JSON);
        return;
    }
    st_reason code = st_code_check_json(root, gate->config.name, &gate->verdict.error);
    json_decref(root);
    if (code != ST_OK && code_allowed(gate)) {
        mark_code(gate, &gate->verdict.error); /* a notebook, an auto_map the policy admits */
        finish_accepted(gate, ST_FORMAT_JSON);
        return;
    }
    if (code != ST_OK) {
        finish_refused(gate, ST_FORMAT_JSON);
        return;
    }
    finish_accepted(gate, ST_FORMAT_JSON);
}

/* Judges a sidecar whose magic named an inert format: its whole structure must be
 * valid, and no strong format (a ZIP appended to an image) may be found in it. */
static void sidecar_final_inert(st_gate *gate)
{
    st_sniff_info info;
    if (!st_sniff_inert_valid(gate->inert, gate->buf, gate->buf_len, &info)) {
        if (sidecar_refuse_strong_format(gate))
            return;
        st_error_set(&gate->verdict.error, ST_SIDECAR_TEXT_INVALID, ST_NO_OFFSET, NULL,
                     "neither UTF-8 text nor a valid %s file: %s", st_format_name(gate->inert),
                     info.detail);
        finish_refused(gate, ST_FORMAT_UNKNOWN);
        return;
    }
    if (sidecar_refuse_strong_format(gate))
        return;
    finish_accepted(gate, gate->inert);
}

static void sidecar_final(st_gate *gate)
{
    if (gate->sidecar == SIDECAR_JSON) {
        sidecar_final_json(gate);
        return;
    }
    if (gate->sidecar == SIDECAR_INERT) {
        sidecar_final_inert(gate);
        return;
    }
    if (!st_sniff_is_text(gate->buf, gate->buf_len, true)) {
        if (sidecar_refuse_strong_format(gate))
            return;
        st_error_set(&gate->verdict.error, ST_SIDECAR_TEXT_INVALID, ST_NO_OFFSET, NULL,
                     "not UTF-8 text (invalid UTF-8, a control character, or a pickle)");
        finish_refused(gate, ST_FORMAT_UNKNOWN);
        return;
    }
    finish_accepted(gate, ST_FORMAT_TEXT);
}

static void sidecar_step(st_gate *gate, bool at_end)
{
    if (gate->sidecar == SIDECAR_UNDECIDED) {
        if (!at_end && gate->buf_len < sidecar_window(gate))
            return;
        sidecar_classify(gate, at_end);
        if (gate->phase != PHASE_SIDECAR)
            return;
    }
    if (gate->buf_len > gate->sidecar_limit) {
        sidecar_refuse_too_large(gate);
        return;
    }
    if (at_end)
        sidecar_final(gate);
}

static void sidecar_begin(st_gate *gate, bool at_end)
{
    gate->phase = PHASE_SIDECAR;
    gate->sidecar = SIDECAR_UNDECIDED;
    /* the head may already hold more than the sidecar limit; sidecar_step refuses it */
    gate->buf_bound =
        gate->sidecar_limit > gate->buf_len ? (size_t)gate->sidecar_limit : gate->buf_len;
    sidecar_step(gate, at_end);
}

/* ---- GGUF phases (st_gguf.h; docs/DESIGN.md, "GGUF") ----
 *
 * The header is buffered (bounded by the header limit) and parsed again each time the
 * buffer doubles or reaches what the last parse needed: a parse of a prefix either
 * asks for more bytes or gives the verdict of the whole, so the chunking never changes
 * the answer. The data section then streams through st_gguf_data. */

static void gguf_refuse(st_gate *gate)
{
    finish_refused(gate, ST_FORMAT_GGUF);
}

static void gguf_data_consume(st_gate *gate, const uint8_t *data, size_t len)
{
    gate->seen += len;
    if (st_gguf_data_feed(&gate->gguf, &gate->gguf_data, data, len, &gate->verdict.error) != ST_OK)
        gguf_refuse(gate);
}

static void gguf_data_finish(st_gate *gate)
{
    if (st_gguf_data_finish(&gate->gguf, &gate->gguf_data, &gate->verdict.error) != ST_OK) {
        gguf_refuse(gate);
        return;
    }
    finish_accepted(gate, ST_FORMAT_GGUF);
}

static void gguf_header_step(st_gate *gate, bool at_end)
{
    if (!at_end && gate->buf_len < gate->gguf_next_try && gate->buf_len < gate->buf_bound)
        return;
    uint64_t need = 0;
    st_reason reason =
        st_gguf_parse_header(gate->buf, gate->buf_len, known_size(gate, false), gate->header_limit,
                             &gate->gguf, &need, &gate->verdict.error);
    if (reason == ST_OUT_OF_MEMORY) {
        fail_out_of_memory(gate);
        return;
    }
    if (reason == ST_GGUF_TRUNCATED && need != 0 && !at_end) {
        /* wait for what the parse needs, and for the buffer to double at least */
        uint64_t next = (uint64_t)gate->buf_len * 2;
        gate->gguf_next_try = (size_t)(need > next ? need : next);
        return;
    }
    if (reason != ST_OK) {
        gguf_refuse(gate);
        return;
    }
    gate->have_gguf = true;
    gate->phase = PHASE_GGUF_DATA;
    st_gguf_data_init(&gate->gguf, &gate->gguf_data);
    /* the bytes buffered past the header belong to the data section; buf stays (the
     * parsed header points into it) */
    size_t header_end = (size_t)gate->gguf.header_end;
    gate->seen -= gate->buf_len - header_end;
    gguf_data_consume(gate, gate->buf + header_end, gate->buf_len - header_end);
    if (at_end && gate->phase == PHASE_GGUF_DATA)
        gguf_data_finish(gate);
}

static void gguf_begin(st_gate *gate, bool at_end)
{
    gate->phase = PHASE_GGUF_HEADER;
    gate->verdict.format = ST_FORMAT_GGUF;
    gate->buf_bound =
        gate->header_limit > gate->buf_len ? (size_t)gate->header_limit : gate->buf_len;
    gate->gguf_next_try = 0;
    gguf_header_step(gate, at_end);
}

/* ---- HEAD phase: the candidate rule ---- */

static void not_an_attempt(st_gate *gate, bool at_end)
{
    if (gate->config.kind == ST_GATE_SIDECAR) {
        sidecar_begin(gate, at_end);
        return;
    }
    if (!head_complete(gate, at_end))
        return;
    /* a strong format is named from the head at once; anything else (unknown, text,
     * JSON, a weak signal) waits for the end, where the tail may name it (a ZIP behind
     * a prefix) */
    st_sniff_info info;
    st_format format = sniff_head(gate, true, at_end, &info);
    if (!at_end && !format_is_strong(format)) {
        tail_begin(gate, ST_SNIFF_HEAD_MAX, format, &info);
        return;
    }
    refuse_format(gate, format, &info);
}

/* What each code reason a name gives says of the file. */
static const char *code_by_name_sentence(st_reason reason)
{
    switch (reason) {
    case ST_CODE_PYTHON:
        return "Python source, which a loader imports and runs";
    case ST_CODE_COMPILED_PYTHON:
        return "compiled Python, which a loader imports and runs";
    case ST_CODE_NOTEBOOK:
        return "a Jupyter notebook, whose cells are code";
    case ST_CODE_SCRIPT:
        return "a script, which a shell or an interpreter runs";
    default:
        return "a shared object or executable, which the system loads and runs";
    }
}

/* A name that marks code (st_code_reason_by_name): once the head is in, the content's
 * own strong format (a pickle, an ELF named run.sh) is the more precise refusal; else
 * the name's code reason, with the format the content has (text, JSON, unknown).
 * Under the code policy the name's mark is kept and the content is judged as any
 * sidecar's (a strong format that is not code is still refused as that format): false
 * then, the head goes on; true when the gate decided or waits for the head. */
static bool refuse_code_by_name(st_gate *gate, st_reason reason, bool at_end)
{
    if (!head_complete(gate, at_end))
        return true;
    st_sniff_info info;
    st_format format = sniff_head(gate, true, at_end, &info);
    if (code_allowed(gate) &&
        (!format_is_strong(format) || st_code_reason_of_format(format) != ST_OK)) {
        st_error why;
        st_error_set(&why, reason, ST_NO_OFFSET, NULL, "%.120s is %s (by its name)",
                     gate->config.name, code_by_name_sentence(reason));
        mark_code(gate, &why);
        gate->name_reason = ST_OK;
        return false;
    }
    if (format_is_strong(format)) {
        refuse_format(gate, format, &info);
        return true;
    }
    st_error_set(&gate->verdict.error, reason, ST_NO_OFFSET, NULL, "%.120s is %s (by its name)",
                 gate->config.name, code_by_name_sentence(reason));
    finish_refused(gate, format);
    return true;
}

static void head_step(st_gate *gate, bool at_end)
{
    if (gate->name_reason != ST_OK && refuse_code_by_name(gate, gate->name_reason, at_end))
        return;
    /* a *.json sidecar is never a safetensors attempt: only strict JSON passes */
    if (gate->config.kind == ST_GATE_SIDECAR_JSON) {
        sidecar_begin(gate, at_end);
        return;
    }
    if (gate->buf_len < 8) {
        if (!at_end)
            return;
        /* rule 1 */
        if (gate->config.kind == ST_GATE_SIDECAR) {
            sidecar_begin(gate, at_end);
            return;
        }
        st_sniff_info info;
        st_format format = sniff_head(gate, true, at_end, &info);
        if (format_is_strong(format)) {
            refuse_format(gate, format, &info);
            return;
        }
        uint64_t ignored;
        if (st_header_length(gate->buf, gate->buf_len, gate->seen, &gate->config.limits, &ignored,
                             &gate->verdict.error) == ST_OK)
            st_error_set(&gate->verdict.error, ST_FILE_TOO_SMALL, 0, NULL,
                         "%llu bytes, fewer than the 8 of the length prefix",
                         (unsigned long long)gate->seen);
        finish_refused(gate, ST_FORMAT_UNKNOWN);
        return;
    }
    /* GGUF by its magic: no safetensors file starts so (N would be above the limit) */
    if ((gate->config.kind == ST_GATE_SIDECAR || gate->config.admit_gguf) &&
        st_gguf_is_attempt(gate->buf, gate->buf_len)) {
        gguf_begin(gate, at_end);
        return;
    }
    /* rule 2 */
    if (length_bytes_are_text(gate->buf)) {
        not_an_attempt(gate, at_end);
        return;
    }
    uint64_t header_size = read_u64le(gate->buf);
    uint64_t header_end;
    if (__builtin_add_overflow(header_size, 8, &header_end))
        header_end = UINT64_MAX;
    size_t i = 8;
    while (i < gate->buf_len && i < header_end && is_json_space(gate->buf[i]))
        i++;
    bool brace = false;
    if (i < gate->buf_len && i < header_end) {
        brace = gate->buf[i] == '{';
    } else if (i < header_end && !head_complete(gate, at_end)) {
        return; /* only whitespace so far: the first header byte is still to come */
    }
    if (brace) {
        /* rule 3 */
        if (header_size > gate->header_limit) {
            if (!head_complete(gate, at_end))
                return;
            st_sniff_info info;
            st_format format = sniff_head(gate, false, at_end, &info);
            if (format_is_strong(format)) {
                refuse_format(gate, format, &info);
                return;
            }
        }
        header_begin(gate, at_end);
        return;
    }
    /* rule 4 */
    if (header_size > gate->header_limit) {
        not_an_attempt(gate, at_end);
        return;
    }
    if (!head_complete(gate, at_end))
        return;
    st_sniff_info info;
    st_format format = sniff_head(gate, false, at_end, &info);
    if (format != ST_FORMAT_UNKNOWN) {
        not_an_attempt(gate, at_end);
        return;
    }
    header_begin(gate, at_end);
}

/* Advances the state machine as far as the buffered bytes allow. */
static void gate_step(st_gate *gate, bool at_end)
{
    for (;;) {
        gate_phase before = gate->phase;
        size_t before_len = gate->buf_len;
        switch (gate->phase) {
        case PHASE_HEAD:
            head_step(gate, at_end);
            break;
        case PHASE_HEADER:
            header_step(gate, at_end);
            break;
        case PHASE_SIDECAR:
            sidecar_step(gate, at_end);
            break;
        case PHASE_DATA:
            if (at_end)
                data_finish(gate);
            return;
        case PHASE_TAIL:
            if (at_end)
                tail_finish(gate);
            return;
        case PHASE_GGUF_HEADER:
            gguf_header_step(gate, at_end);
            break;
        case PHASE_GGUF_DATA:
            if (at_end)
                gguf_data_finish(gate);
            return;
        case PHASE_DONE:
            return;
        }
        if (gate->phase == before && gate->buf_len == before_len)
            return;
    }
}

/* ---- public API ---- */

st_gate_kind st_gate_sidecar_kind(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;
    if (len >= 5 && strcasecmp(name + len - 5, ".json") == 0)
        return ST_GATE_SIDECAR_JSON;
    return ST_GATE_SIDECAR;
}

bool st_gate_refusal_certain(const st_gate *gate)
{
    /* TAIL is entered only for content already refused whatever its end holds */
    return gate->status == ST_GATE_REFUSED || (gate->phase == PHASE_TAIL && !gate->code_pending);
}

st_gate *st_gate_new(const st_gate_config *config, uint64_t declared_size)
{
    st_gate *gate = st_calloc(1, sizeof *gate);
    if (gate == NULL)
        return NULL;
    gate->config = *config;
    gate->declared_size = declared_size;
    gate->header_limit = config->limits.max_header_size;
    if (gate->header_limit == 0 || gate->header_limit > ST_HEADER_SIZE_MAX)
        gate->header_limit = ST_HEADER_SIZE_MAX;
    gate->config.limits.max_header_size = gate->header_limit;
    gate->sidecar_limit = config->sidecar_max_size ? config->sidecar_max_size : SIDECAR_DEFAULT_MAX;
    /* a sidecar is buffered whole: keep its bound addressable */
    if (gate->sidecar_limit > SIZE_MAX / 2)
        gate->sidecar_limit = SIZE_MAX / 2;
    gate->name_reason = st_code_reason_by_name(config->name);
    gate->phase = PHASE_HEAD;
    gate->status = ST_GATE_CONTINUE;
    gate->buf_bound = ST_SNIFF_HEAD_MAX;
    gate->verdict.valid = false;
    gate->verdict.format = ST_FORMAT_UNKNOWN;
    st_error_clear(&gate->verdict.error);
    st_error_clear(&gate->verdict.code);
    return gate;
}

void st_gate_free(st_gate *gate)
{
    if (gate == NULL)
        return;
    if (gate->have_scanner)
        st_scanner_free(&gate->scanner);
    if (gate->have_file)
        st_file_free(&gate->file);
    if (gate->have_gguf)
        st_gguf_file_free(&gate->gguf);
    free(gate->buf);
    free(gate->ring);
    if (gate->reserved > 0 && gate->config.release != NULL)
        gate->config.release(gate->config.budget_context, gate->reserved);
    free(gate);
}

st_gate_status st_gate_feed(st_gate *gate, const uint8_t *data, size_t len)
{
    while (len > 0 && gate->status == ST_GATE_CONTINUE) {
        if (gate->phase == PHASE_DATA) {
            data_consume(gate, data, len);
            break;
        }
        if (gate->phase == PHASE_GGUF_DATA) {
            gguf_data_consume(gate, data, len);
            break;
        }
        if (gate->phase == PHASE_TAIL) {
            ring_append(gate, data, len);
            gate->seen += len;
            break;
        }
        if (gate->phase == PHASE_HEADER && gate->header_in_input) {
            /* counted up to the header's end, not kept: the parse reads config.input */
            uint64_t want = 8 + gate->header_size - gate->seen;
            size_t take = len < want ? len : (size_t)want;
            gate->seen += take;
            data += take;
            len -= take;
            gate_step(gate, false);
            continue;
        }
        size_t room = gate->buf_bound - gate->buf_len;
        if (room == 0) {
            /* only the sidecar phase fills its bound: one byte more is too large */
            if (gate->phase == PHASE_SIDECAR) {
                if (gate->sidecar == SIDECAR_UNDECIDED)
                    sidecar_classify(gate, false);
                if (gate->phase == PHASE_SIDECAR) {
                    gate->seen += len;
                    sidecar_refuse_too_large(gate);
                }
                break;
            }
            /* HEAD with a full window or HEADER with 8 + N bytes always decide in
             * gate_step, so this is unreachable; refuse rather than loop */
            fail_out_of_memory(gate);
            break;
        }
        size_t take = len < room ? len : room;
        if (!buffer_reserve(gate, gate->buf_len + take)) {
            fail_out_of_memory(gate);
            break;
        }
        memcpy(gate->buf + gate->buf_len, data, take);
        gate->buf_len += take;
        gate->seen += take;
        data += take;
        len -= take;
        gate_step(gate, false);
    }
    return gate->status;
}

bool st_gate_data_skippable(const st_gate *gate)
{
    return gate->status == ST_GATE_CONTINUE && gate->phase == PHASE_DATA &&
           !gate->config.refuse_nonfinite;
}

st_gate_status st_gate_skip(st_gate *gate, uint64_t len)
{
    if (len == 0 || !st_gate_data_skippable(gate))
        return gate->status;
    gate->data_skipped = true;
    data_consume(gate, NULL, len);
    return gate->status;
}

st_gate_status st_gate_finish(st_gate *gate)
{
    if (gate->status == ST_GATE_CONTINUE)
        gate_step(gate, true);
    if (gate->status == ST_GATE_CONTINUE) {
        /* every phase decides at the end; keep the contract even if one did not */
        st_error_set(&gate->verdict.error, ST_FILE_TOO_SMALL, gate->seen, NULL,
                     "the input ended before the gate could decide");
        finish_refused(gate, ST_FORMAT_UNKNOWN);
    }
    return gate->status;
}

void st_gate_verdict(const st_gate *gate, st_verdict *out)
{
    *out = gate->verdict;
}

const st_file *st_gate_file(const st_gate *gate)
{
    return gate->have_file ? &gate->file : NULL;
}

const st_tensor_stats *st_gate_stats(const st_gate *gate)
{
    return gate->have_scanner && !gate->data_skipped ? gate->scanner.stats : NULL;
}

uint64_t st_gate_bytes_seen(const st_gate *gate)
{
    return gate->seen;
}

bool st_gate_out_of_memory(const st_gate *gate)
{
    return gate->out_of_memory;
}

bool st_gate_over_budget(const st_gate *gate)
{
    return gate->over_budget;
}

json_t *st_verdict_findings_json(const st_verdict *verdict)
{
    json_t *array = json_array();
    for (size_t i = 0; array != NULL && i < verdict->findings.count; i++) {
        const st_pickle_finding *f = &verdict->findings.items[i];
        json_t *item =
            json_pack("{s:s, s:b, s:s, s:I}", "global", f->global, "calls", f->calls, "severity",
                      st_pickle_severity_name(f->severity), "offset", (json_int_t)f->offset);
        if (item == NULL || json_array_append_new(array, item) != 0) {
            json_decref(array);
            return NULL;
        }
    }
    return array;
}

void st_verdict_findings_text(const st_verdict *verdict, char *out, size_t out_size)
{
    if (out_size == 0)
        return;
    out[0] = '\0';
    if (verdict->findings.count == 0)
        return;
    json_t *array = st_verdict_findings_json(verdict);
    if (array == NULL)
        return;
    size_t need = json_dumpb(array, NULL, 0, JSON_COMPACT);
    if (need > 0 && need < out_size) {
        json_dumpb(array, out, out_size, JSON_COMPACT);
        out[need] = '\0';
    }
    json_decref(array);
}

void st_gate_check_buffer(const st_gate_config *config, const uint8_t *buf, size_t len,
                          st_verdict *out)
{
    st_gate *gate = st_gate_new(config, len);
    if (gate == NULL) {
        memset(out, 0, sizeof *out);
        out->valid = false;
        out->format = ST_FORMAT_UNKNOWN;
        st_error_set(&out->error, ST_OK, ST_NO_OFFSET, NULL, "out of memory in the gate");
        return;
    }
    if (len > 0) {
        size_t tail_len = len < ST_SNIFF_TAIL_MAX ? len : ST_SNIFF_TAIL_MAX;
        gate->tail = buf + (len - tail_len);
        gate->tail_len = tail_len;
    }
    st_gate_feed(gate, buf, len);
    st_gate_finish(gate);
    st_gate_verdict(gate, out);
    st_gate_free(gate);
}
