#!/bin/sh
# tests/readme/run.sh BINARY: runs the README's curl walk-through ("Publish a model
# and fetch a tensor slice with curl": every ```sh block of that section that is not
# a transcript, i.e. whose lines do not start with "$ "), the same of "Push and pull
# with the CLI", and the CLI block of "The CLI" against a real server started on a free port with a fresh data directory, in a
# temp directory where build/tensorgate is BINARY. Each walk-through block runs with
# `sh -e`: a command that fails (an undefined file, a token create that is refused)
# fails the test; the CLI block's lines run one by one and may exit 0 or 1 (a
# refusal), not 2 or more. Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
README=$(cd "$(dirname "$0")/../.." && pwd)/README.md
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-readme.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
passed=0
failed=0
cd "$W" || exit 2
mkdir build && ln -s "$BIN" build/tensorgate

# the section's sh blocks, one file each (transcripts, whose lines start with "$ ", left out)
awk -v dir="$W" '
    /^## / { in_section = ($0 ~ /^## Publish a model/ || $0 ~ /^## Push and pull/ || $0 ~ /^## The CLI/); cli = ($0 ~ /^## The CLI/) }
    in_section && /^```sh$/ { n++; file = sprintf("%s/block%02d%s.sh", dir, n, cli ? "-cli" : ""); inside = 1; next }
    inside && /^```$/ { inside = 0; close(file); next }
    inside { print > file }
' "$README"

"$BIN" serve --listen 127.0.0.1:0 --data ./data >server.out 2>server.log &
pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' server.log | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAIL: the server did not start"
    cat server.log
    echo "0 passed, 1 failed"
    exit 1
fi

for block in block*.sh; do
    if grep -q '^\$ ' "$block"; then
        continue # a transcript
    fi
    sed -i "s|127.0.0.1:8080|127.0.0.1:$port|g" "$block"
    case $block in
    *-cli.sh)
        # the CLI lines one by one: a refusal (exit 1) is what some of them show;
        # a usage or I/O error (2) or a missing file is not
        ok=true
        while IFS= read -r line; do
            [ -z "$line" ] && continue
            sh -c "$line" >>"$block.out" 2>&1
            rc=$?
            if [ "$rc" -gt 1 ]; then
                echo "exit $rc: $line" >>"$block.out"
                ok=false
            fi
        done <"$block"
        [ -f out.safetensors ] || { echo "no out.safetensors" >>"$block.out" && ok=false; }
        ;;
    *)
        ok=false
        S=http://127.0.0.1:$port sh -e "$block" >"$block.out" 2>&1 && ok=true
        ;;
    esac
    if $ok; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: README block $block:"
        sed 's/^/  | /' "$block"
        sed 's/^/  out: /' "$block.out" | tail -n 20
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
