#!/bin/sh
# tests/readme/run.sh BINARY: runs the README's walk-through as a new user pastes it,
# with the manual's examples that continue it. Every ```sh and ```python block, in
# this order, in ONE shell (`sh -e`; variables, functions and the working directory
# carry from block to block): the README's sections "Publish a model and fetch a
# tensor slice with curl" and "Read tensors remotely from Python"; then docs/MANUAL.md's
# sections "Push and pull with the CLI" through "Tokens", "Code in a namespace",
# "Reports for a security team", "Audit log" and "The CLI"; then the README's "Clean
# up". They run against a real server started on a free port with a fresh data
# directory, from a stand-in repository root (build/tensorgate is BINARY;
# clients/ and examples/ are the tree's). A ```python block runs with /usr/bin/python3
# and clients/python on PYTHONPATH, as the README says. The first block of "The CLI"
# runs line by line, and each line may exit 0 or 1 (a refusal), not 2 or more.
# Fails when a block fails (the first failing block is shown), when a block is a
# transcript (lines starting with "$ " cannot be pasted), when a file holds fewer
# walk-through blocks than it should (a renamed section would drop them silently),
# when the walk-through leaves a file in the repository root or in TMPDIR, or when
# an output the README or the manual promises is missing. Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
TREE=$(cd "$(dirname "$0")/../.." && pwd)
README=$TREE/README.md
MANUAL=$TREE/docs/MANUAL.md
T=$(mktemp -d "${TMPDIR:-/tmp}/tg-readme.XXXXXX")
W=$T/repo
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
}

# the stand-in repository root: what the walk-through reads from the repository
mkdir -p "$W/build" "$T/tmp" "$T/blocks"
ln -s "$BIN" "$W/build/tensorgate"
ln -s "$TREE/clients" "$W/clients"
ln -s "$TREE/examples" "$W/examples"

# blocks FILE TAG SECTIONS: writes the ```sh and ```python blocks of FILE's "## "
# sections whose title starts with one of SECTIONS (an ERE alternation) as one file
# each, numbered on from the blocks already written, in file order: blockNN-TAG.sh,
# .py, or .cli for the first block of "The CLI"; prints how many it wrote
blocks() {
    awk -v dir="$T/blocks" -v tag="$2" -v sections="$3" -v n="$(ls "$T/blocks" | wc -l)" '
        BEGIN { first = n }
        /^## / {
            walk = (substr($0, 4) ~ ("^(" sections ")"))
            cli = ($0 ~ /^## The CLI/)
        }
        walk && /^```(sh|python)$/ {
            n++
            ext = ($0 == "```python") ? "py" : (cli && !cli_done ? "cli" : "sh")
            if (cli) cli_done = 1
            file = sprintf("%s/block%02d-%s.%s", dir, n, tag, ext)
            inside = 1
            next
        }
        inside && /^```$/ { inside = 0; close(file); next }
        inside { print > file }
        END { print n - first }
    ' "$1"
}
# at_least N WHAT COUNT: a file holds the walk-through blocks it should
at_least() {
    if [ "$3" -ge "$1" ]; then ok; else fail "$2 has only $3 walk-through blocks (at least $1 expected)"; fi
}
# the README's walk-through, the manual's examples that continue it, the README's clean-up
at_least 6 "the README walk-through" "$(blocks "$README" readme 'Publish a model|Read tensors remotely')"
at_least 10 "the manual's walk-through sections" "$(blocks "$MANUAL" manual \
    'Push and pull|Tensors|Web page|Derived versions|Import from a URL|Preloads|Hugging Face clients|Tags, search|Tokens|Code in a namespace|Reports for a security team|Audit log|The CLI')"
at_least 1 "the README's Clean up" "$(blocks "$README" cleanup 'Clean up')"
blocks=$(ls "$T/blocks")

cd "$W" || exit 2
"$BIN" serve --listen 127.0.0.1:0 --data ./data >"$T/server.out" 2>"$T/server.log" &
pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$T/server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    fail "the server did not start"
    cat "$T/server.log"
    echo "$passed passed, $failed failed"
    exit 1
fi
before=$(ls -A "$W")

# one driver sources every block in order; "@@ blockNN" says which one runs
driver=$T/driver.sh
: >"$driver"
for b in $blocks; do
    f=$T/blocks/$b
    if grep -q '^\$ ' "$f"; then
        fail "block $b is a transcript (lines start with \"\$ \"), not paste-safe"
        sed 's/^/  | /' "$f"
    fi
    sed -i "s|127.0.0.1:8080|127.0.0.1:$port|g; s|localhost:8080|localhost:$port|g" "$f"
    echo "echo '@@ $b'" >>"$driver"
    case $b in
    *.py)
        echo "PYTHONPATH=\"$TREE/clients/python\" /usr/bin/python3 '$f'" >>"$driver"
        ;;
    *.cli)
        # each line by itself: exit 1 (a refusal) is what some lines show, 2 or more is not
        while IFS= read -r line; do
            [ -z "$line" ] && continue
            printf '(\n%s\n) || [ $? -eq 1 ]\n' "$line" >>"$driver"
        done <"$f"
        ;;
    *)
        echo ". '$f'" >>"$driver"
        ;;
    esac
done
echo "echo '@@ end'" >>"$driver"

# a new user's shell: none of the client's variables set, TMPDIR ours to check
if env -u TENSORGATE_URL -u TENSORGATE_TOKEN -u TENSORGATE_DATA -u TENSORGATE_CATALOG \
    -u PYTHONPATH TMPDIR="$T/tmp" sh -e "$driver" >"$T/out" 2>&1; then
    ok
else
    last=$(grep '^@@ ' "$T/out" | tail -n 1 | cut -c4-)
    fail "block $last failed (the blocks before it ran):"
    [ -f "$T/blocks/$last" ] && sed 's/^/  | /' "$T/blocks/$last"
    sed -n "/^@@ $last\$/,\$p" "$T/out" | tail -n 30 | sed 's/^/  out: /'
fi
grep -q '^@@ end$' "$T/out" && ok || fail "the walk-through did not reach its end"

# what the README and the manual say the blocks print
expect() {
    if grep -Eq -- "$2" "$T/out"; then ok; else fail "the walk-through did not print $1 (/$2/)"; fi
}
expect "the header length" '^ +72$'
expect "the slice's floats" '^ +3 +5 +6 +8$'
expect "the slice as .npy" '^\[\[3\. 5\.\]'
expect "the refusal of the PyTorch zip" '"reason":"refused_format".*"format":"pytorch-zip"'
expect "the Python block's line" "^\['weight'\] None \(4, 3\) \[\[3\.0, 5\.0\], \[6\.0, 8\.0\]\]$"
expect "the converted version" '"state":"done".*"version_url":"/v1/models/acme/tiny/versions/'
expect "the BF16 tensor" '"name":"weight","dtype":"BF16"'
expect "the import's refusal" '^import_address_forbidden$'
expect "the preload resident" '"state":"resident"'
expect "the preload consumer's check" '^ok 1 of 1$'
expect "the Python preload's line" "^preload: \\['weight'\\] \\(4, 3\\) False [0-9.]+$"
expect "the Hub's error code" '^X-Error-Code: EntryNotFound'
expect "the SARIF report's rule ids" "^\['refused_format'"

# nothing left behind: the repository root as before, TMPDIR empty
after=$(ls -A "$W")
[ "$before" = "$after" ] && ok || fail "the walk-through left files in the repository root: $after"
[ -z "$(ls -A "$T/tmp")" ] && ok || fail "the walk-through left files in TMPDIR: $(ls -A "$T/tmp")"

[ "$failed" -eq 0 ] || sed 's/^/  log: /' "$T/server.log" | tail -n 20
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
