#!/bin/sh
# embed.sh FILE SYMBOL OUT.c: writes a C file defining SYMBOL (bytes, NUL-terminated)
# and SYMBOL_len, so the binary carries FILE (e.g. openapi.yaml) with no path to find.
set -eu
in=$1 sym=$2 out=$3
{
    echo "/* generated from $in by scripts/embed.sh; do not edit */"
    echo "#include <stddef.h>"
    echo "const unsigned char $sym[] = {"
    od -An -v -tx1 "$in" | sed -e 's/ *$//' -e 's/  */,0x/g' -e 's/^,//' -e 's/$/,/'
    echo "0x00};"
    echo "const size_t ${sym}_len = sizeof $sym - 1;"
} >"$out.tmp"
mv "$out.tmp" "$out"
