#!/bin/sh
# embed-migrations.sh OUT.c [--table NAME] MIGRATION.sql...: writes a C file defining
# tg_migrations (or NAME: tg_migrations_pg for migrations/postgresql/), the table of
# (version, name, sql) declared in common/embedded.h, one row per file in version order. Each file must be named NNNN_*.sql and the numbers must run 1, 2, 3...
# with no gap, since the catalog applies row i as schema version i + 1.
set -eu
out=$1
shift
table=tg_migrations
if [ "${1:-}" = "--table" ]; then
    table=$2
    shift 2
fi
tmp="$out.tmp"
rows=""
expected=1
: >"$tmp.parts"
for path in $(printf '%s\n' "$@" | LC_ALL=C sort); do
    name=$(basename "$path")
    digits=$(printf '%s\n' "$name" | sed -n 's/^\([0-9][0-9][0-9][0-9]\)_.*\.sql$/\1/p')
    if [ -z "$digits" ]; then
        echo "embed-migrations.sh: $path is not named NNNN_*.sql" >&2
        exit 1
    fi
    version=$(printf '%s\n' "$digits" | sed 's/^0*//')
    if [ "$version" != "$expected" ]; then
        echo "embed-migrations.sh: $path has version ${version:-0}, expected $expected" >&2
        exit 1
    fi
    scripts/embed.sh "$path" "${table}_$digits" "$tmp.one"
    # Keep the bytes; the include and the header comment are written once below.
    grep -v '^/\*\|^#include' "$tmp.one" >>"$tmp.parts"
    rows="$rows    {$version, \"$name\", (const char *)${table}_$digits},
"
    expected=$((expected + 1))
done
rm -f "$tmp.one"
{
    echo "/* generated from migration files by scripts/embed-migrations.sh; do not edit */"
    echo "#include \"embedded.h\""
    cat "$tmp.parts"
    echo "const tg_migration ${table}[] = {"
    printf '%s' "$rows"
    echo "};"
    echo "const size_t ${table}_count = sizeof ${table} / sizeof ${table}[0];"
} >"$tmp"
rm -f "$tmp.parts"
mv "$tmp" "$out"
