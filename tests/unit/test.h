/* The unit-test harness: a handful of macros, no framework.
 * Each test file is one program: TEST(...) functions called from main via RUN(...),
 * ending with `return test_report(argv[0]);`, which prints "N passed, N failed" and fails
 * the program when a check failed or when none ran (a test that checks nothing proves
 * nothing: a skipped RUN, a loop that never iterates, a main that forgot its tests). */
#ifndef TG_TEST_H
#define TG_TEST_H

/* The invariants stated as assert() in lib/ and server/ are checked in every test
 * build (normal and ASan): a test build never defines NDEBUG. */
#ifdef NDEBUG
#error "tests are built with assert() enabled: do not define NDEBUG"
#endif

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int test_checks_passed;
static int test_checks_failed;
static const char *test_current = "";

#define TEST(name) static void name(void)
#define RUN(name)                                                                                  \
    do {                                                                                           \
        test_current = #name;                                                                      \
        name();                                                                                    \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            test_checks_passed++;                                                                  \
        } else {                                                                                   \
            test_checks_failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, test_current,     \
                    #cond);                                                                        \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t test_a_ = (uint64_t)(a), test_b_ = (uint64_t)(b);                                 \
        if (test_a_ == test_b_) {                                                                  \
            test_checks_passed++;                                                                  \
        } else {                                                                                   \
            test_checks_failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: %s == %" PRIu64 ", expected %s == %" PRIu64 "\n",          \
                    __FILE__, __LINE__, test_current, #a, test_a_, #b, test_b_);                   \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *test_a_ = (a), *test_b_ = (b);                                                 \
        if (test_a_ != NULL && test_b_ != NULL && strcmp(test_a_, test_b_) == 0) {                 \
            test_checks_passed++;                                                                  \
        } else {                                                                                   \
            test_checks_failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__,      \
                    test_current, #a, test_a_ ? test_a_ : "(null)", test_b_ ? test_b_ : "(null)"); \
        }                                                                                          \
    } while (0)

static inline int test_report(const char *program)
{
    printf("%s: %d passed, %d failed\n", program, test_checks_passed, test_checks_failed);
    if (test_checks_passed + test_checks_failed == 0) {
        fprintf(stderr, "%s: no check ran\n", program);
        return 1;
    }
    return test_checks_failed == 0 ? 0 : 1;
}

#endif
