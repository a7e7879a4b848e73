/* Unit tests for server/preload/cuda_driver.c without a GPU: loading the driver table
 * from libraries this test builds at run time (every entry point present, one
 * missing, only the pre-_v2 ABI names), which field each symbol lands in, what a
 * failed load leaves (a zeroed table, the library closed), a file that is not a
 * library, and the error sentences of a driver that names only some errors.
 * The CUDA backend over the table, the toolkit's stub library and libc as a
 * "driver" are tests/unit/server/preload/preload_cuda.c's. */
#include "cuda_driver.h"
#include "test.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef TG_HAVE_CUDA_H

/* Every entry point the table holds, by the exact symbol cuda_driver.h names in the
 * field's comment: written out here again so that a table row that fills the wrong
 * field, or a field no row fills, shows. */
typedef struct entry_point {
    const char *symbol;
    size_t field;
} entry_point;

#define ENTRY(symbol, field)                                                                       \
    {                                                                                              \
        symbol, offsetof(tg_cuda_driver, field)                                                    \
    }

static const entry_point entry_points[] = {
    ENTRY("cuGetErrorName", get_error_name),
    ENTRY("cuGetErrorString", get_error_string),
    ENTRY("cuInit", init),
    ENTRY("cuDriverGetVersion", driver_get_version),
    ENTRY("cuDeviceGetCount", device_get_count),
    ENTRY("cuDeviceGet", device_get),
    ENTRY("cuDeviceGetName", device_get_name),
    ENTRY("cuDeviceGetUuid_v2", device_get_uuid),
    ENTRY("cuDeviceTotalMem_v2", device_total_mem),
    ENTRY("cuDeviceGetAttribute", device_get_attribute),
    ENTRY("cuDevicePrimaryCtxRetain", primary_ctx_retain),
    ENTRY("cuDevicePrimaryCtxRelease_v2", primary_ctx_release),
    ENTRY("cuCtxSetCurrent", ctx_set_current),
    ENTRY("cuMemGetAllocationGranularity", mem_get_allocation_granularity),
    ENTRY("cuMemCreate", mem_create),
    ENTRY("cuMemRelease", mem_release),
    ENTRY("cuMemAddressReserve", mem_address_reserve),
    ENTRY("cuMemAddressFree", mem_address_free),
    ENTRY("cuMemMap", mem_map),
    ENTRY("cuMemUnmap", mem_unmap),
    ENTRY("cuMemSetAccess", mem_set_access),
    ENTRY("cuMemExportToShareableHandle", mem_export_to_shareable_handle),
    ENTRY("cuMemHostAlloc", mem_host_alloc),
    ENTRY("cuMemFreeHost", mem_free_host),
    ENTRY("cuStreamCreate", stream_create),
    ENTRY("cuStreamDestroy_v2", stream_destroy),
    ENTRY("cuStreamSynchronize", stream_synchronize),
    ENTRY("cuMemcpyHtoDAsync_v2", memcpy_htod_async),
};
#define ENTRY_POINTS (sizeof entry_points / sizeof entry_points[0])

static char temp_dir[64];

/* The function pointer in a table field, as a data pointer (POSIX: same size). */
static void *field_at(const tg_cuda_driver *driver, size_t offset)
{
    void *address;
    memcpy(&address, (const char *)driver + offset, sizeof address);
    return address;
}

static bool table_is_zero(const tg_cuda_driver *driver)
{
    static const tg_cuda_driver zero;
    return memcmp(driver, &zero, sizeof zero) == 0;
}

/* True while path is loaded in this process (RTLD_NOLOAD loads nothing). */
static bool library_loaded(const char *path)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle != NULL)
        dlclose(handle);
    return handle != NULL;
}

/* Builds DIR/name.so defining every entry point except the one named skip (NULL:
 * none), with its name suffix "_v2" dropped when old_abi (the names cuda.h maps
 * to the _v2 ABI: an older driver's symbols of a different signature), plus the
 * symbols named in extra. Each function is distinct, so every symbol has its own
 * address. The functions are never called. Returns the path (static) or NULL. */
static const char *build_library(const char *name, const char *skip, bool old_abi,
                                 const char *const *extra)
{
    static char lib_path[4][128];
    static int next;
    char *path = lib_path[next++ % 4];
    char source[128];
    snprintf(source, sizeof source, "%s/%s.c", temp_dir, name);
    snprintf(path, 128, "%s/%s.so", temp_dir, name);
    FILE *f = fopen(source, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return NULL;
    int n = 0;
    for (size_t i = 0; i < ENTRY_POINTS; i++) {
        char symbol[64];
        snprintf(symbol, sizeof symbol, "%s", entry_points[i].symbol);
        if (skip != NULL && strcmp(symbol, skip) == 0)
            continue;
        size_t len = strlen(symbol);
        if (old_abi && len > 3 && strcmp(symbol + len - 3, "_v2") == 0)
            symbol[len - 3] = '\0';
        fprintf(f, "int %s(void) { return %d; }\n", symbol, ++n);
    }
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        fprintf(f, "int %s(void) { return %d; }\n", extra[i], ++n);
    CHECK(fclose(f) == 0);
    const char *cc = getenv("CC");
    char command[512];
    snprintf(command, sizeof command, "%s -shared -fPIC -O0 -o %s %s", cc && *cc ? cc : "cc", path,
             source);
    int rc = system(command);
    CHECK(rc == 0);
    if (rc != 0) {
        fprintf(stderr, "cannot build the fake driver (%s): the tests below need a C compiler\n",
                command);
        return NULL;
    }
    return path;
}

TEST(every_symbol_lands_in_its_own_field)
{
    const char *path = build_library("full", NULL, false, NULL);
    if (path == NULL)
        return;
    tg_cuda_driver driver;
    memset(&driver, 0xab, sizeof driver); /* whatever it held goes */
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, path, why, sizeof why) == 0);
    CHECK_STR(why, "");
    CHECK(driver.library != NULL);
    if (driver.library == NULL)
        return;
    for (size_t i = 0; i < ENTRY_POINTS; i++) {
        void *want = dlsym(driver.library, entry_points[i].symbol);
        CHECK(want != NULL);
        if (field_at(&driver, entry_points[i].field) != want)
            fprintf(stderr, "field of %s holds another symbol\n", entry_points[i].symbol);
        CHECK(field_at(&driver, entry_points[i].field) == want);
    }
    /* Every function pointer of the table is filled, each with a different symbol:
     * a field that no row fills (a new entry point forgotten in the table) shows here. */
    size_t slots = sizeof driver / sizeof(void *);
    CHECK_EQ_U64(slots, ENTRY_POINTS + 1); /* + the library handle */
    for (size_t i = 0; i < slots; i++) {
        void *a = field_at(&driver, i * sizeof(void *));
        CHECK(a != NULL);
        for (size_t j = i + 1; j < slots; j++)
            CHECK(a != field_at(&driver, j * sizeof(void *)));
    }
    CHECK(library_loaded(path)); /* kept open while the table is in use */
    tg_cuda_driver_unload(&driver);
    CHECK(table_is_zero(&driver));
    CHECK(!library_loaded(path));
    tg_cuda_driver_unload(&driver); /* a zeroed table: nothing to close */
    CHECK(table_is_zero(&driver));
}

/* The last entry point missing: the fields filled before it do not survive, the
 * library is closed, and the sentence names the symbol and the library. */
TEST(a_missing_entry_point_leaves_nothing)
{
    const char *const old_name[] = {"cuMemcpyHtoDAsync", NULL}; /* the pre-_v2 symbol */
    const char *path = build_library("no_memcpy_v2", "cuMemcpyHtoDAsync_v2", false, old_name);
    if (path == NULL)
        return;
    tg_cuda_driver driver;
    memset(&driver, 0xab, sizeof driver);
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, path, why, sizeof why) == -1);
    char want[512];
    snprintf(want, sizeof want,
             "the CUDA driver %s has no cuMemcpyHtoDAsync_v2 (a driver older than CUDA 11.4 "
             "lacks the virtual memory and UUID entry points tensorgate needs)",
             path);
    CHECK_STR(why, want);
    CHECK(table_is_zero(&driver));
    CHECK(!library_loaded(path));
    tg_cuda_driver_unload(&driver); /* safe on what a failed load leaves */
    CHECK(table_is_zero(&driver));

    /* One in the middle of the table. */
    path = build_library("no_mem_map", "cuMemMap", false, NULL);
    if (path == NULL)
        return;
    CHECK(tg_cuda_driver_load(&driver, path, why, sizeof why) == -1);
    CHECK(strstr(why, " has no cuMemMap (") != NULL);
    CHECK(table_is_zero(&driver));
    CHECK(!library_loaded(path));
}

/* A driver with only the old names of the _v2 entry points (cuDeviceTotalMem, ...):
 * those symbols have other signatures, so the loader never falls back to them. */
TEST(old_abi_names_are_not_taken_for_v2)
{
    const char *path = build_library("old_abi", NULL, true, NULL);
    if (path == NULL)
        return;
    tg_cuda_driver driver;
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, path, why, sizeof why) == -1);
    CHECK(strstr(why, " has no cuDeviceGetUuid_v2 (") != NULL); /* the first _v2 of the table */
    CHECK(table_is_zero(&driver));
}

/* dlopen itself fails: the sentence carries dlerror's text, which names the file. */
TEST(a_file_that_is_not_a_library)
{
    char path[128];
    snprintf(path, sizeof path, "%s/libcuda.so.1", temp_dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    fputs("not an ELF file\n", f);
    fclose(f);
    tg_cuda_driver driver;
    memset(&driver, 0xab, sizeof driver);
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, path, why, sizeof why) == -1);
    CHECK(strncmp(why, "cannot load the CUDA driver: ", 29) == 0);
    CHECK(strstr(why, path) != NULL);
    CHECK(table_is_zero(&driver));

    CHECK(tg_cuda_driver_load(&driver, temp_dir, why, sizeof why) == -1); /* a directory */
    CHECK(strncmp(why, "cannot load the CUDA driver: ", 29) == 0);
    CHECK(table_is_zero(&driver));

    /* why is bounded: a short buffer gets a truncated, terminated sentence */
    char short_why[16];
    memset(short_why, 'x', sizeof short_why);
    CHECK(tg_cuda_driver_load(&driver, path, short_why, sizeof short_why) == -1);
    CHECK(memchr(short_why, '\0', sizeof short_why) != NULL);
    CHECK(strncmp(short_why, "cannot load the", 15) == 0);
}

/* A driver (table filled by hand) that names some errors and describes none. */
static CUresult names_only_name(CUresult error, const char **name)
{
    if (error == CUDA_ERROR_ILLEGAL_ADDRESS) {
        *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
        return CUDA_SUCCESS;
    }
    if (error == CUDA_ERROR_LAUNCH_FAILED) {
        *name = NULL; /* "success" with no name: not taken */
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult names_only_string(CUresult error, const char **text)
{
    (void)error;
    *text = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

TEST(error_sentences_mix_the_driver_and_the_built_in_table)
{
    tg_cuda_driver driver;
    memset(&driver, 0, sizeof driver);
    driver.get_error_name = names_only_name;
    driver.get_error_string = names_only_string;
    char out[256];
    /* the driver's name, no text anywhere */
    tg_cuda_driver_describe(&driver, "cuMemcpyHtoDAsync", CUDA_ERROR_ILLEGAL_ADDRESS, out,
                            sizeof out);
    CHECK_STR(out, "cuMemcpyHtoDAsync: CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_STR(tg_cuda_driver_error_name(&driver, CUDA_ERROR_ILLEGAL_ADDRESS),
              "CUDA_ERROR_ILLEGAL_ADDRESS");
    /* the driver knows neither: both from the built-in table */
    tg_cuda_driver_describe(&driver, "cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY, out, sizeof out);
    CHECK_STR(out, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    /* a NULL name reported as success is not used */
    CHECK(tg_cuda_driver_error_name(&driver, CUDA_ERROR_LAUNCH_FAILED) == NULL);
    tg_cuda_driver_describe(&driver, "cuStreamSynchronize", CUDA_ERROR_LAUNCH_FAILED, out,
                            sizeof out);
    CHECK_STR(out, "cuStreamSynchronize: CUDA error 719");

    /* a table without the naming entry points at all (filled by hand) */
    driver.get_error_name = NULL;
    driver.get_error_string = NULL;
    CHECK_STR(tg_cuda_driver_error_name(&driver, CUDA_ERROR_STUB_LIBRARY),
              "CUDA_ERROR_STUB_LIBRARY");
    tg_cuda_driver_describe(&driver, "cuInit", CUDA_SUCCESS, out, sizeof out);
    CHECK_STR(out, "cuInit: CUDA_SUCCESS: no error");
    CHECK(tg_cuda_driver_error_name(NULL, (CUresult)99999) == NULL);
    tg_cuda_driver_describe(NULL, "cuMemMap", (CUresult)99999, out, sizeof out);
    CHECK_STR(out, "cuMemMap: CUDA error 99999");

    /* out is bounded */
    char small[12];
    tg_cuda_driver_describe(&driver, "cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY, small, sizeof small);
    CHECK_STR(small, "cuMemCreate");
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-cuda-driver-XXXXXX");
    CHECK(mkdtemp(temp_dir) != NULL);
    RUN(every_symbol_lands_in_its_own_field);
    RUN(a_missing_entry_point_leaves_nothing);
    RUN(old_abi_names_are_not_taken_for_v2);
    RUN(a_file_that_is_not_a_library);
    RUN(error_sentences_mix_the_driver_and_the_built_in_table);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}

#else

/* Built without the CUDA Toolkit's cuda.h: there is no table, only the library name
 * the backend would load (preload_cuda.c then reports itself unavailable). */
int main(int argc, char **argv)
{
    (void)argc;
    CHECK_STR(TG_CUDA_DRIVER_LIBRARY, "libcuda.so.1");
    printf("note: built without cuda.h; the driver table tests are skipped\n");
    return test_report(argv[0]);
}

#endif
