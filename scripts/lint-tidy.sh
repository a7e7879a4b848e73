#!/bin/sh
# scripts/lint-tidy.sh TIDY FILE -- FLAGS...: clang-tidy on FILE (the checks of
# .clang-tidy, every finding an error), skipped when a previous clean run saw the
# same preprocessed source, the same .clang-tidy and the same clang-tidy: the key is
# the SHA-256 of those three, kept in build/lint-cache/ (TG_LINT_CACHE). A file
# whose own text or any header it includes changed is checked again; a fresh clone
# checks every file. Exits non-zero when clang-tidy has findings.
set -u
tidy=$1
file=$2
shift 3
cache=${TG_LINT_CACHE:-build/lint-cache}
mkdir -p "$cache"
stamp=$cache/$(printf '%s' "$file" | tr '/' '_').ok
key=$( { cc -E -P "$@" "$file" 2>/dev/null; cat .clang-tidy; "$tidy" --version; } | sha256sum | cut -c1-64)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
    exit 0
fi
if "$tidy" --quiet --warnings-as-errors='*' "$file" -- "$@" 2>/dev/null; then
    echo "$key" >"$stamp"
    exit 0
fi
rm -f "$stamp"
echo "clang-tidy: $file has findings (above)" >&2
exit 255
