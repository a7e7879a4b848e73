#!/bin/sh
# The layer check (docs/ARCHITECTURE.md): dependencies only go down.
#
#   lib -> common -> storage -> ingest | preload -> jobs -> core -> routes -> cmd
#
# Fails on
#   1. a quoted #include of a header that lives in a layer the including file may
#      not use (a layer above, or a sibling: ingest and preload never include each
#      other);
#   2. <sqlite3.h> or <libpq-fe.h> outside server/storage/, and SQL text
#      ("SELECT ...", "INSERT INTO ...") outside server/storage/;
#   3. a blob path ("blobs/") outside server/storage/;
#   4. a storage backend's own header (store.h, catalog_backend.h,
#      blobstore_backend.h) included outside server/storage/: above it there are
#      only the interfaces, catalog.h and blobstore.h;
#   5. a .c file of common/ or server/ without its unit test at the same relative
#      path under tests/unit/ (tests mirror sources);
#   6. with BUILD set (a build folder), any object of libtgserver.a that needs a
#      symbol only cmd/ defines (the server never links command code);
#   7. with BUILD set, a dependency circle inside a folder: two files that call
#      each other, directly or through others of the folder (a dispatcher and the
#      backends that call back into it: the helpers they share go in a file of
#      their own, the factory apart).
# Headers are named by base name (every layer folder is on the include path), so
# a name must be unique across the tree: a duplicate fails too.
#
# usage: scripts/layer-check.sh [BUILD]
set -eu
cd "$(dirname "$0")/.."

status=0
fail() {
    echo "layer-check: $*" >&2
    status=1
}

# The folders each layer may include from (besides itself).
allowed() {
    case $1 in
    lib | lib/*) echo "lib" ;;
    common) echo "lib common" ;;
    server/storage) echo "lib common server/storage" ;;
    server/ingest) echo "lib common server/storage server/ingest" ;;
    server/preload) echo "lib common server/storage server/preload" ;;
    server/jobs) echo "lib common server/storage server/ingest server/jobs" ;;
    server/core) echo "lib common server/storage server/ingest server/preload server/jobs server/core" ;;
    server/routes) echo "lib common server/storage server/ingest server/preload server/jobs server/core server/routes" ;;
    cmd) echo "lib common server/storage server/ingest server/preload server/jobs server/core server/routes cmd clients/c" ;;
    clients/c) echo "common clients/c" ;;
    *) echo "" ;;
    esac
}

sources=$(find lib common server cmd clients/c -name '*.[ch]' | sort)

# 0. header base names are unique
dups=$(for f in $sources; do case $f in *.h) basename "$f" ;; esac; done | sort | uniq -d)
for d in $dups; do
    fail "header name $d is used twice: $(find lib common server cmd clients/c -name "$d" | tr '\n' ' ')"
done

# base name -> folder, for every header of the tree
map=$(for f in $sources; do case $f in *.h) printf '%s %s\n' "$(basename "$f")" "$(dirname "$f")" ;; esac; done)

checked=0
for f in $sources; do
    dir=$(dirname "$f")
    case $dir in lib/*) layer=lib ;; *) layer=$dir ;; esac
    ok=$(allowed "$dir")
    if [ -z "$ok" ]; then
        fail "$f: folder $dir is not a layer (add it to scripts/layer-check.sh and docs/ARCHITECTURE.md)"
        continue
    fi
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        checked=$((checked + 1))
        base=$(basename "$inc")
        target=$(printf '%s\n' "$map" | awk -v b="$base" '$1 == b { print $2; exit }')
        if [ -z "$target" ]; then
            fail "$f includes \"$inc\", which is no header of the tree"
            continue
        fi
        [ "$target" = "$dir" ] && continue
        case $target in lib/*) tl=lib ;; *) tl=$target ;; esac
        [ "$tl" = "$layer" ] && continue
        allowed_here=0
        for a in $ok; do [ "$a" = "$tl" ] && allowed_here=1; done
        [ $allowed_here -eq 1 ] || fail "$f ($layer) includes \"$inc\" from $target: a layer it may not use"
        case $base in
        store.h | catalog_backend.h | blobstore_backend.h)
            case $dir in server/storage) ;; *) fail "$f includes \"$inc\": a storage backend's own header (use catalog.h or blobstore.h)" ;; esac
            ;;
        esac
    done
done

# 2. and 3. SQL, database headers and blob paths stay in server/storage
for f in $sources; do
    case $f in server/storage/*) continue ;; esac
    if grep -nE '#[[:space:]]*include[[:space:]]*<(sqlite3|libpq-fe)\.h>' "$f" >/dev/null; then
        fail "$f includes a database header: only server/storage/ talks to the database"
    fi
    if grep -nE '"[[:space:]]*(SELECT|INSERT INTO|UPDATE [a-z_]+ SET|DELETE FROM|CREATE TABLE|BEGIN IMMEDIATE)[[:space:]]' "$f" >/dev/null; then
        fail "$f holds SQL text: only server/storage/ writes SQL ($(grep -nE '"[[:space:]]*(SELECT|INSERT INTO|UPDATE [a-z_]+ SET|DELETE FROM|CREATE TABLE|BEGIN IMMEDIATE)[[:space:]]' "$f" | head -n 1 | cut -d: -f1))"
    fi
    if grep -n '"blobs/\|/blobs/\|"blobs"' "$f" >/dev/null; then
        fail "$f names the blob folder: only server/storage/ knows where blobs live"
    fi
done

# 5. every .c of common/ and server/ has its unit test at the same path under tests/unit/
for f in $sources; do
    case $f in
    common/*.c | server/*.c)
        [ -f "tests/unit/$f" ] || fail "$f has no unit test at tests/unit/$f (tests mirror sources)"
        ;;
    esac
done

# 6. libtgserver.a never needs cmd/ code
linked=0
if [ $# -ge 1 ] && [ -f "$1/libtgserver.a" ] && [ -f "$1/libtgcmd.a" ]; then
    tmp=$(mktemp -d)
    nm --defined-only -g "$1/libtgcmd.a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/cmd"
    nm -u "$1/libtgserver.a" 2>/dev/null | awk 'NF >= 2 { print $NF }' | sort -u >"$tmp/needs"
    for s in $(comm -12 "$tmp/cmd" "$tmp/needs"); do
        fail "libtgserver.a needs $s, which only cmd/ defines"
    done
    rm -rf "$tmp"
    linked=1
fi

# 7. no circle of calls between the files of one folder. Folders whose circle is
# being untied on another branch of issue 21 (empty this list once it is merged):
circles_pending=""
circles=0
if [ $# -ge 1 ] && [ -d "$1" ]; then
    for dir in $(for f in $sources; do case $f in *.c) dirname "$f" ;; esac; done | sort -u); do
        objects=""
        for c in "$dir"/*.c; do
            o="$1/${c%.c}.o"
            [ -f "$o" ] && objects="$objects $o"
        done
        [ -n "$objects" ] || continue
        # "user definer" pairs: an object needing a symbol another of the folder defines
        # shellcheck disable=SC2086
        loop=$(for o in $objects; do
            nm --defined-only -g "$o" 2>/dev/null | awk -v o="$o" 'NF == 3 { print "D", $3, o }'
            nm -u "$o" 2>/dev/null | awk -v o="$o" 'NF >= 2 { print "U", $NF, o }'
        done | awk '$1 == "D" { def[$2] = $3; next } { use[NR] = $2; by[NR] = $3 }
            END { for (i in use) if ((use[i] in def) && def[use[i]] != by[i]) print by[i], def[use[i]] }' |
            sort -u | tsort 2>&1 >/dev/null | sed -n 's|^tsort: .*/\([^/]*\)\.o$|\1.c|p' | sort -u | tr '\n' ' ' | sed 's/ $//')
        case " $circles_pending " in *" $dir "*) loop="" ;; esac
        if [ -n "$loop" ]; then
            fail "$dir: the files $loop call each other in a circle (move the helpers they share into a file of their own)"
        fi
    done
    circles=1
fi

if [ $status -eq 0 ]; then
    echo "layer-check: $checked includes in $(echo "$sources" | wc -l) files follow the layer rule; link check: $([ $linked -eq 1 ] && echo done || echo skipped); circle check: $([ $circles -eq 1 ] && echo done || echo skipped)"
fi
exit $status
