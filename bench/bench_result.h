/* bench/bench_result.h: the C side of bench/results.sh. bench_result() appends one
 * figure (name, value, unit, anchor name, anchor value, ratio) as a JSON line to the
 * file $BENCH_RESULTS names (bench/run.sh sets it and gathers the lines into
 * build/bench/results.json); nothing happens when it is unset. Header-only: every
 * bench program is one .c file. */
#ifndef TG_BENCH_RESULT_H
#define TG_BENCH_RESULT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void bench_json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

/* anchor NULL: a figure with no anchor (anchor_value and ratio are null). */
static inline void bench_result(const char *name, double value, const char *unit,
                                const char *anchor, double anchor_value)
{
    const char *path = getenv("BENCH_RESULTS");
    if (path == NULL || path[0] == '\0')
        return;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        return;
    fputs("{\"name\":", f);
    bench_json_string(f, name);
    fputs(",\"value\":", f);
    bench_json_number(f, value);
    fputs(",\"unit\":", f);
    bench_json_string(f, unit);
    fputs(",\"anchor\":", f);
    if (anchor)
        bench_json_string(f, anchor);
    else
        fputs("null", f);
    fputs(",\"anchor_value\":", f);
    bench_json_number(f, anchor ? anchor_value : NAN);
    fputs(",\"ratio\":", f);
    bench_json_number(f, anchor && anchor_value != 0 ? value / anchor_value : NAN);
    fputs("}\n", f);
    if (fclose(f) != 0)
        fprintf(stderr, "bench_result: cannot write %s\n", path);
}

#endif
