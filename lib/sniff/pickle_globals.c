/* What a pickle's imports mean (lib/sniff/, see sniff.h): the data table of
 * globals the pickle walker (pickle.c) grades. An entry names a module and one
 * attribute, or the whole module (name NULL: the module and its submodules).
 * dangerous: the global reaches a process, the file system, the network,
 * eval/exec, the import machinery or the unpickler itself; it covers at least
 * what modelscan and picklescan flag (docs/DESIGN.md §3). benign: known tensor
 * and container rebuilding (torch.save, np.save, pickle of plain data). Any other
 * global is unknown. A dangerous entry wins over a benign one. */
#include "sniff_formats.h"

#include <string.h>

typedef struct pickle_global_rule {
    const char *module;
    const char *name; /* NULL: every attribute of the module and of its submodules */
    st_pickle_severity severity;
} pickle_global_rule;

#define DANGER(m, n)                                                                               \
    {                                                                                              \
        m, n, ST_PICKLE_DANGEROUS                                                                  \
    }
#define BENIGN(m, n)                                                                               \
    {                                                                                              \
        m, n, ST_PICKLE_BENIGN                                                                     \
    }

static const pickle_global_rule rules[] = {
    /* eval/exec, attribute access, file access and imports through the builtins */
    DANGER("builtins", "eval"),
    DANGER("builtins", "exec"),
    DANGER("builtins", "compile"),
    DANGER("builtins", "open"),
    DANGER("builtins", "getattr"),
    DANGER("builtins", "setattr"),
    DANGER("builtins", "delattr"),
    DANGER("builtins", "__import__"),
    DANGER("builtins", "breakpoint"),
    DANGER("builtins", "input"),
    DANGER("builtins", "globals"),
    DANGER("builtins", "locals"),
    DANGER("builtins", "vars"),
    DANGER("builtins", "apply"),
    DANGER("builtins", "execfile"),
    DANGER("builtins", "file"),
    DANGER("builtins", "help"),
    DANGER("__builtin__", "eval"),
    DANGER("__builtin__", "exec"),
    DANGER("__builtin__", "compile"),
    DANGER("__builtin__", "open"),
    DANGER("__builtin__", "getattr"),
    DANGER("__builtin__", "setattr"),
    DANGER("__builtin__", "delattr"),
    DANGER("__builtin__", "__import__"),
    DANGER("__builtin__", "breakpoint"),
    DANGER("__builtin__", "input"),
    DANGER("__builtin__", "apply"),
    DANGER("__builtin__", "execfile"),
    DANGER("__builtin__", "file"),
    /* processes and the operating system */
    DANGER("os", NULL),
    DANGER("posix", NULL),
    DANGER("nt", NULL),
    DANGER("subprocess", NULL),
    DANGER("pty", NULL),
    DANGER("commands", NULL),
    DANGER("popen2", NULL),
    DANGER("sys", NULL),
    DANGER("signal", NULL),
    DANGER("multiprocessing", NULL),
    DANGER("_posixsubprocess", NULL),
    DANGER("platform", "popen"),
    DANGER("ctypes", NULL),
    DANGER("_ctypes", NULL),
    DANGER("cffi", NULL),
    /* the file system */
    DANGER("shutil", NULL),
    DANGER("tempfile", NULL),
    DANGER("glob", NULL),
    DANGER("pathlib", NULL),
    DANGER("io", "open"),
    DANGER("io", "FileIO"),
    DANGER("_io", "open"),
    DANGER("_io", "FileIO"),
    DANGER("shelve", NULL),
    DANGER("zipfile", NULL),
    DANGER("tarfile", NULL),
    DANGER("fileinput", NULL),
    DANGER("linecache", NULL),
    /* the network */
    DANGER("socket", NULL),
    DANGER("_socket", NULL),
    DANGER("ssl", NULL),
    DANGER("asyncio", NULL),
    DANGER("webbrowser", NULL),
    DANGER("httplib", NULL),
    DANGER("http.client", NULL),
    DANGER("http.server", NULL),
    DANGER("urllib", NULL),
    DANGER("urllib2", NULL),
    DANGER("requests", NULL),
    DANGER("aiohttp", NULL),
    DANGER("httpx", NULL),
    DANGER("ftplib", NULL),
    DANGER("smtplib", NULL),
    DANGER("telnetlib", NULL),
    DANGER("poplib", NULL),
    DANGER("imaplib", NULL),
    DANGER("xmlrpc", NULL),
    DANGER("socketserver", NULL),
    /* code execution and the import machinery */
    DANGER("runpy", NULL),
    DANGER("importlib", NULL),
    DANGER("imp", NULL),
    DANGER("zipimport", NULL),
    DANGER("pkgutil", NULL),
    DANGER("code", NULL),
    DANGER("codeop", NULL),
    DANGER("pdb", NULL),
    DANGER("bdb", NULL),
    DANGER("pydoc", NULL),
    DANGER("timeit", NULL),
    DANGER("trace", NULL),
    DANGER("profile", NULL),
    DANGER("cProfile", NULL),
    DANGER("doctest", NULL),
    DANGER("site", NULL),
    DANGER("marshal", NULL),
    DANGER("types", "CodeType"),
    DANGER("types", "FunctionType"),
    DANGER("operator", "attrgetter"),
    DANGER("operator", "methodcaller"),
    DANGER("functools", "partial"),
    DANGER("functools", "reduce"),
    /* unpicklers: a pickle that loads another pickle */
    DANGER("pickle", NULL),
    DANGER("_pickle", NULL),
    DANGER("cPickle", NULL),
    DANGER("dill", NULL),
    DANGER("cloudpickle", NULL),
    DANGER("joblib", NULL),
    DANGER("torch.serialization", "load"),
    DANGER("torch", "load"),
    DANGER("torch.hub", NULL),
    DANGER("torch._inductor.codecache", NULL),
    DANGER("torch.storage", "_load_from_bytes"),
    DANGER("numpy", "load"),
    DANGER("numpy.testing._private.utils", "runstring"),
    DANGER("numpy.lib.npyio", NULL),
    DANGER("keras", NULL),
    DANGER("tensorflow", NULL),

    /* tensor rebuilding as torch.save writes it */
    BENIGN("torch._utils", "_rebuild_tensor"),
    BENIGN("torch._utils", "_rebuild_tensor_v2"),
    BENIGN("torch._utils", "_rebuild_tensor_v3"),
    BENIGN("torch._utils", "_rebuild_parameter"),
    BENIGN("torch._utils", "_rebuild_parameter_with_state"),
    BENIGN("torch._utils", "_rebuild_qtensor"),
    BENIGN("torch._utils", "_rebuild_sparse_tensor"),
    BENIGN("torch._utils", "_rebuild_nested_tensor"),
    BENIGN("torch._utils", "_rebuild_meta_tensor_no_storage"),
    BENIGN("torch._utils", "_rebuild_device_tensor_from_numpy"),
    BENIGN("torch._tensor", "_rebuild_from_type_v2"),
    BENIGN("torch.serialization", "_get_layout"),
    BENIGN("torch.nn.parameter", "Parameter"),
    BENIGN("torch", "Size"),
    BENIGN("torch", "device"),
    BENIGN("torch", "FloatStorage"),
    BENIGN("torch", "DoubleStorage"),
    BENIGN("torch", "HalfStorage"),
    BENIGN("torch", "BFloat16Storage"),
    BENIGN("torch", "LongStorage"),
    BENIGN("torch", "IntStorage"),
    BENIGN("torch", "ShortStorage"),
    BENIGN("torch", "CharStorage"),
    BENIGN("torch", "ByteStorage"),
    BENIGN("torch", "BoolStorage"),
    BENIGN("torch", "ComplexFloatStorage"),
    BENIGN("torch", "ComplexDoubleStorage"),
    BENIGN("torch", "QInt8Storage"),
    BENIGN("torch", "QUInt8Storage"),
    BENIGN("torch", "QInt32Storage"),
    BENIGN("torch", "UntypedStorage"),
    BENIGN("torch", "float16"),
    BENIGN("torch", "bfloat16"),
    BENIGN("torch", "float32"),
    BENIGN("torch", "float64"),
    BENIGN("torch", "int8"),
    BENIGN("torch", "int16"),
    BENIGN("torch", "int32"),
    BENIGN("torch", "int64"),
    BENIGN("torch", "uint8"),
    BENIGN("torch", "bool"),
    BENIGN("torch", "per_tensor_affine"),
    /* containers and arrays */
    BENIGN("collections", "OrderedDict"),
    BENIGN("numpy.core.multiarray", "_reconstruct"),
    BENIGN("numpy._core.multiarray", "_reconstruct"),
    BENIGN("numpy.core.multiarray", "scalar"),
    BENIGN("numpy._core.multiarray", "scalar"),
    BENIGN("numpy", "ndarray"),
    BENIGN("numpy", "dtype"),
    BENIGN("_codecs", "encode"),
    BENIGN("builtins", "set"),
    BENIGN("builtins", "frozenset"),
    BENIGN("builtins", "bytearray"),
    BENIGN("builtins", "complex"),
    BENIGN("builtins", "slice"),
    BENIGN("__builtin__", "set"),
    BENIGN("__builtin__", "frozenset"),
    BENIGN("__builtin__", "bytearray"),
    BENIGN("__builtin__", "complex"),
};

/* Whether module equals rule_module, or (whole is true) is a submodule of it. */
static bool module_matches(const char *module, size_t module_len, const char *rule_module,
                           bool whole)
{
    size_t n = strlen(rule_module);
    if (module_len < n || memcmp(module, rule_module, n) != 0)
        return false;
    return module_len == n || (whole && module[n] == '.');
}

/* The name's first component (a dotted name is an attribute chain from it). */
static bool name_matches(const char *name, const char *rule_name)
{
    size_t n = strlen(rule_name);
    return strncmp(name, rule_name, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

size_t st_pickle_dangerous_rule_count(void)
{
    size_t count = 0;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        count += rules[i].severity == ST_PICKLE_DANGEROUS;
    return count;
}

st_pickle_severity st_pickle_global_severity(const char *module, const char *name)
{
    size_t module_len = strlen(module);
    st_pickle_severity found = ST_PICKLE_UNKNOWN;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const pickle_global_rule *r = &rules[i];
        if (!module_matches(module, module_len, r->module, r->name == NULL))
            continue;
        if (r->name != NULL && !name_matches(name, r->name))
            continue;
        if (r->severity == ST_PICKLE_DANGEROUS)
            return ST_PICKLE_DANGEROUS;
        found = r->severity;
    }
    return found;
}

const char *st_pickle_severity_name(st_pickle_severity severity)
{
    switch (severity) {
    case ST_PICKLE_DANGEROUS:
        return "dangerous";
    case ST_PICKLE_BENIGN:
        return "benign";
    default:
        return "unknown";
    }
}
