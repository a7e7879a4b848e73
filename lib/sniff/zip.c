/* ZIP: PyTorch checkpoints, .npz, anything else (lib/sniff/, see sniff.h).
 *
 * The loaders that matter (PyTorch's miniz, NumPy's zipfile) are lenient, so the
 * scan is too: no CRC is checked, flag bits (encrypted, data descriptor) are
 * ignored, and both the local-header names (every PK\3\4 in the head) and the
 * central-directory names (from the EOCD found in the tail) are looked at. Member
 * content is looked at whatever its name says. */
#include "sniff_formats.h"
#include "sniff_util.h"

#include <stdio.h>
#include <string.h>

/* Total pickle-walker bytes a zip scan may spend on member contents: the walk
 * over each member is bounded by the head, and this bounds their sum. */
#define ZIP_WALK_BUDGET (2 * ST_SNIFF_HEAD_MAX)

/* End-of-central-directory signatures tried from the end before giving up. */
#define ZIP_EOCD_CANDIDATES_MAX 8

typedef struct zip_scan {
    int torch;            /* evidence of a PyTorch checkpoint: 0 none, 1 a name, 2 content */
    char torch_why[136];  /* the strongest such evidence (kind, name, why fit) */
    size_t members;       /* member records seen (local and central) */
    size_t npy_members;   /* of which .npy by content or by name */
    bool npy_objects;     /* some .npy member holds an object array */
    size_t walk_budget;   /* bytes the pickle walker may still read */
    bool have_head_start; /* a plausible local header was found in the head */
    size_t head_start;    /* offset of the first one */
    bool have_eocd;
    uint64_t eocd_entries;
    bool have_shift; /* the prefix length the EOCD implies */
    uint64_t shift;
    bool zip64;
    st_pickle_findings *findings; /* the globals of the pickles found (NULL: not kept) */
    const uint8_t *head;          /* for the findings' file offsets */
} zip_scan;

/* Keeps the strongest evidence seen: a member's content over a member's name. */
static void zip_torch(zip_scan *z, int strength, const char *kind, const uint8_t *name,
                      size_t name_len, const char *why)
{
    if (z->torch >= strength)
        return;
    char printable[64];
    st_sniff_printable(printable, sizeof printable, name, name_len);
    z->torch = strength;
    snprintf(z->torch_why, sizeof z->torch_why, "%s member '%s' %s", kind, printable, why);
}

/* Names PyTorch's writer gives members: <archive>/data.pkl, <archive>/version,
 * <archive>/data/<n>, <archive>/byteorder, <archive>/.data/..., and any name
 * with a pickle extension. */
static bool torch_member_name(const uint8_t *name, size_t n)
{
    if (st_sniff_ends_with(name, n, "data.pkl") || st_sniff_ends_with(name, n, ".pkl") ||
        st_sniff_ends_with(name, n, ".pickle") || st_sniff_ends_with(name, n, "/version") ||
        st_sniff_ends_with(name, n, "/byteorder") ||
        st_sniff_ends_with(name, n, "/.data/serialization_id"))
        return true;
    /* <anything>data/<digits> */
    size_t i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == n)
        return false;
    return (i == 5 && memcmp(name, "data/", 5) == 0) ||
           (i >= 6 && memcmp(name + i - 6, "/data/", 6) == 0);
}

static void zip_member_name(zip_scan *z, const char *kind, const uint8_t *name, size_t n)
{
    z->members++;
    if (torch_member_name(name, n))
        zip_torch(z, 1, kind, name, n, "is named like a PyTorch checkpoint part");
    else if (st_sniff_ends_with(name, n, ".npy"))
        z->npy_members++;
}

/* Looks at the first bytes of a member's data, whatever its name or flags say. */
static void zip_member_content(zip_scan *z, const uint8_t *name, size_t name_len,
                               const uint8_t *data, size_t len, bool *is_npy)
{
    *is_npy = false;
    uint64_t base = (uint64_t)(data - z->head);
    if (st_pickle_strong_magic(data, len)) {
        size_t n = len < z->walk_budget ? len : z->walk_budget;
        z->walk_budget -= n;
        st_pickle_collect_findings(data, n, base, z->findings);
        char why[48];
        snprintf(why, sizeof why, "holds a pickle (0x80 0x%02x)", data[1]);
        zip_torch(z, 2, "zip", name, name_len, why);
        return;
    }
    if (st_sniff_has_at(data, len, 0, st_sniff_npy_magic, sizeof st_sniff_npy_magic)) {
        *is_npy = true;
        /* The header scan draws on the same budget as the pickle walks. */
        size_t n = len < z->walk_budget ? len : z->walk_budget;
        z->walk_budget -= n;
        if (st_sniff_npy_has_objects(data, n)) {
            z->npy_objects = true;
            st_sniff_npy_findings(data, n, base, z->findings);
        }
        return;
    }
    size_t n = len < z->walk_budget ? len : z->walk_budget;
    if (n == 0)
        return;
    z->walk_budget -= n;
    st_pickle_walk w;
    st_pickle_walk_buffer(data, n, &w);
    if (st_pickle_walk_is_pickle(&w, n, false)) {
        st_pickle_collect_findings(data, n, base, z->findings);
        zip_torch(z, 2, "zip", name, name_len, "holds a pickle (protocol 0/1 opcodes)");
    }
}

/* Every "PK\3\4" in the head: a local header when its name fits and has no control bytes. */
static void zip_scan_local_headers(zip_scan *z, const uint8_t *head, size_t head_len)
{
    for (size_t pos = 0; pos + 30 <= head_len; pos++) {
        if (head[pos] != 'P' || memcmp(head + pos, "PK\3\4", 4) != 0)
            continue;
        size_t name_len = st_sniff_le16(head + pos + 26),
               extra_len = st_sniff_le16(head + pos + 28);
        const uint8_t *name = head + pos + 30;
        if (name_len == 0 || name_len > head_len - pos - 30)
            continue;
        bool clean = true;
        for (size_t i = 0; i < name_len && clean; i++)
            clean = name[i] >= 0x20 && name[i] != 0x7f;
        if (!clean)
            continue;
        if (!z->have_head_start) {
            z->have_head_start = true;
            z->head_start = pos;
        }
        size_t npy_before = z->npy_members;
        zip_member_name(z, "zip", name, name_len);
        size_t data_start = pos + 30 + name_len;
        if (extra_len > head_len - data_start)
            continue;
        data_start += extra_len;
        /* The stored size is not trusted (0 with a data descriptor, or forged): look at
         * what the head holds, with the walk budget bounding the total work. */
        bool is_npy = false;
        zip_member_content(z, name, name_len, head + data_start, head_len - data_start, &is_npy);
        if (is_npy && z->npy_members == npy_before)
            z->npy_members++;
    }
}

/* Finds the end-of-central-directory record in the view of the file's end and
 * walks the central directory names. view_abs is the view's offset in the file
 * when known (for the prefix length). */
static void zip_scan_central(zip_scan *z, const uint8_t *view, size_t view_len, bool view_abs_known,
                             uint64_t view_abs)
{
    if (view == NULL || view_len < 22)
        return;
    size_t lowest = view_len - 22 > 65535 ? view_len - 22 - 65535 : 0;
    /* Each candidate record may cost a scan of the view, so only the last few are
     * tried: the work stays linear when the tail is full of fake records. */
    unsigned candidates = 0;
    for (size_t pos = view_len - 22 + 1; pos-- > lowest;) {
        if (view[pos] != 'P' || memcmp(view + pos, "PK\5\6", 4) != 0)
            continue;
        if (++candidates > ZIP_EOCD_CANDIDATES_MAX)
            return;
        uint64_t entries = st_sniff_le16(view + pos + 10);
        uint64_t cd_size = st_sniff_le32(view + pos + 12);
        uint64_t cd_offset = st_sniff_le32(view + pos + 16);
        size_t cd_end = pos;
        bool zip64 = false;
        /* Zip64: a locator 20 bytes before the EOCD, the zip64 record 56 bytes before it. */
        if (pos >= 20 + 56 && memcmp(view + pos - 20, "PK\6\7", 4) == 0 &&
            memcmp(view + pos - 76, "PK\6\6", 4) == 0) {
            zip64 = true;
            cd_end = pos - 76;
            entries = st_sniff_le64(view + cd_end + 32);
            cd_size = st_sniff_le64(view + cd_end + 40);
            cd_offset = st_sniff_le64(view + cd_end + 48);
        }
        /* The central directory ends where the (zip64) EOCD begins. */
        size_t cd_start;
        if (cd_size <= cd_end) {
            cd_start = cd_end - (size_t)cd_size;
            bool empty = cd_size == 0 && entries == 0;
            if (!empty && (cd_end - cd_start < 4 || memcmp(view + cd_start, "PK\1\2", 4) != 0))
                continue;
        } else {
            /* The directory starts before the view: resynchronize on the first entry. */
            if (entries == 0)
                continue;
            cd_start = 0;
            while (cd_start + 4 <= cd_end && memcmp(view + cd_start, "PK\1\2", 4) != 0)
                cd_start++;
            if (cd_start + 4 > cd_end)
                continue;
        }
        z->have_eocd = true;
        z->eocd_entries = entries;
        z->zip64 = zip64;
        uint64_t cd_start_abs;
        if (view_abs_known && cd_size <= cd_end &&
            !__builtin_add_overflow(view_abs, (uint64_t)cd_start, &cd_start_abs) &&
            cd_start_abs >= cd_offset) {
            z->have_shift = true;
            z->shift = cd_start_abs - cd_offset;
        }
        /* Central directory entries: 46 fixed bytes, then name, extra, comment. */
        size_t p = cd_start;
        while (p + 46 <= cd_end && memcmp(view + p, "PK\1\2", 4) == 0) {
            size_t name_len = st_sniff_le16(view + p + 28);
            size_t extra_len = st_sniff_le16(view + p + 30);
            size_t comment_len = st_sniff_le16(view + p + 32);
            if (name_len > cd_end - p - 46)
                break;
            if (name_len > 0)
                zip_member_name(z, "zip central-directory", view + p + 46, name_len);
            size_t next = p + 46 + name_len;
            if (extra_len + comment_len > cd_end - next)
                break;
            p = next + extra_len + comment_len;
        }
        return;
    }
}

bool st_sniff_zip_magic_at_zero(const uint8_t *head, size_t head_len)
{
    return st_sniff_has_at(head, head_len, 0, "PK\3\4", 4) ||
           st_sniff_has_at(head, head_len, 0, "PK\5\6", 4) ||
           st_sniff_has_at(head, head_len, 0, "PK\7\10", 4) ||
           st_sniff_has_at(head, head_len, 0, "PK\1\2", 4) ||
           st_sniff_has_at(head, head_len, 0, "PK\6\6", 4);
}

st_format st_sniff_zip(const uint8_t *head, size_t head_len, const uint8_t *end_view,
                       size_t end_view_len, bool end_abs_known, uint64_t end_abs,
                       bool magic_at_zero, st_sniff_info *info)
{
    zip_scan z;
    memset(&z, 0, sizeof z);
    z.walk_budget = ZIP_WALK_BUDGET;
    z.findings = info != NULL ? &info->findings : NULL;
    z.head = head;
    zip_scan_local_headers(&z, head, head_len);
    zip_scan_central(&z, end_view, end_view_len, end_abs_known, end_abs);
    if (!magic_at_zero && !z.have_head_start && !z.have_eocd)
        return ST_FORMAT_UNKNOWN;

    /* Where the zip starts: the first local header in the head, else what the EOCD implies. */
    uint64_t prefix = 0;
    if (!magic_at_zero) {
        if (z.have_head_start)
            prefix = z.head_start;
        else if (z.have_shift)
            prefix = z.shift;
    }
    /* A prefix that is itself a pickle is what torch.load would run: it sees no zip
     * magic at offset 0 and unpickles the file from the start. */
    if (prefix > 0) {
        st_pickle_walk w;
        size_t n = prefix < head_len ? (size_t)prefix : head_len;
        if (st_pickle_strong_magic(head, n)) {
            if (info != NULL) {
                info->findings.count = info->findings.omitted = 0;
                st_pickle_collect_findings(head, n, 0, &info->findings);
            }
            st_sniff_note(
                info, "pickle protocol %u (0x80 0x%02x) at offset 0, before a zip at offset %llu",
                head[1], head[1], (unsigned long long)prefix);
            return ST_FORMAT_PICKLE;
        }
        st_pickle_walk_buffer(head, n, &w);
        if (st_pickle_walk_is_pickle(&w, n, false)) {
            if (info != NULL) {
                info->findings.count = info->findings.omitted = 0;
                st_pickle_collect_findings(head, n, 0, &info->findings);
            }
            char where[64];
            snprintf(where, sizeof where, " before a zip at offset %llu",
                     (unsigned long long)prefix);
            st_pickle_note_walk(info, &w, where);
            return ST_FORMAT_PICKLE;
        }
    }
    char where[64] = "";
    if (prefix > 0)
        snprintf(where, sizeof where, " (zip after a %llu-byte prefix)",
                 (unsigned long long)prefix);
    if (z.torch) {
        st_sniff_note(info, "%s%s", z.torch_why, where);
        return ST_FORMAT_PYTORCH_ZIP;
    }
    if (z.members > 0 && z.npy_members == z.members) {
        st_sniff_note(info, "NumPy .npz: zip of .npy members%s%s",
                      z.npy_objects ? ", object array (|O): pickled objects" : "", where);
        return ST_FORMAT_NUMPY;
    }
    if (prefix > 0)
        st_sniff_note(info, "zip after a %llu-byte prefix%s", (unsigned long long)prefix,
                      z.have_eocd ? " (end-of-central-directory in the tail)" : "");
    else if (z.members == 0 && z.have_eocd && z.eocd_entries == 0)
        st_sniff_note(info, "empty zip (end-of-central-directory only)");
    else
        st_sniff_note(info, "zip at offset 0, %zu member record%s, none a pickle or PyTorch part%s",
                      z.members, z.members == 1 ? "" : "s", z.zip64 ? " (zip64)" : "");
    return ST_FORMAT_ZIP;
}
