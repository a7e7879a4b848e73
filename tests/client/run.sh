#!/bin/sh
# CLI tests of the server commands: tests/client/run.sh BINARY
# Starts `BINARY serve` on a free loopback port with a fresh data directory, then
# runs push (one pickle refused with its reason; --publish, --alias, --json; a
# refused publish says so and what to do), pull
# (--include, resume from a part file, a corrupt part file started over once, SHA-256
# mismatch, no partial file under its final name after a killed pull), pull against
# a hostile peer (tests/client/hostile_peer.py: an endless body, a 4 GiB announced
# length, a 4-bytes-every-2-s trickle, an answer that never comes, file names with
# terminal escapes), ls, header, tensor (--slice and --dtype, the
# .npy compared by /usr/bin/python3 + NumPy with slicing the original), scan,
# rejections (filters, --jsonl, the refused pickle's SHA-256 against sha256sum), the
# registry commands (model show|tag|describe, models, version, draft, alias, namespace
# show|quota: refusals without a token, with another namespace's token, bad input)
# and the exit codes. Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
PY=/usr/bin/python3
SRC_DIR=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-client.XXXXXX")
pid=
peer=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ -n "$peer" ] && kill "$peer" 2>/dev/null && wait "$peer" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
passed=0
failed=0
cd "$W" || exit 2

ok() { passed=$((passed + 1)); }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ -s out ] && sed 's/^/  out: /' out | head -n 20
    [ -s err ] && sed 's/^/  err: /' err | head -n 20
}
# run WANT_EXIT DESCRIPTION CMD...: stdout in out, stderr in err
run() {
    want=$1
    desc=$2
    shift 2
    "$@" >out 2>err
    got=$?
    if [ "$got" -eq "$want" ]; then ok; else fail "$desc: exit $got, want $want"; fi
}
out_has() { if grep -Eq -- "$2" out; then ok; else fail "$1: stdout lacks /$2/"; fi; }
err_has() { if grep -Eq -- "$2" err; then ok; else fail "$1: stderr lacks /$2/"; fi; }
check() { if eval "$2"; then ok; else fail "$1"; fi; }
# py DESCRIPTION CODE: the Python code must exit 0
py() {
    if "$PY" -c "$2" >pyout 2>&1; then ok; else
        fail "$1"
        sed 's/^/  py: /' pyout | tail -n 10
    fi
}

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
export TENSORGATE_URL="http://127.0.0.1:$port"
TOKEN=$("$BIN" token create --data ./data --scope write --namespace acme 2>/dev/null | tail -n 1)
READ=$("$BIN" token create --data ./data --scope read 2>/dev/null | tail -n 1)
export TENSORGATE_TOKEN="$TOKEN"

# fixtures: a model directory (safetensors F32 [4,3] 0..11, a 4 MiB F32 tensor in a
# second shard, config.json, a nested README) and a pickle beside it
mkdir -p m/docs
"$PY" - <<'EOF' || { echo "fixtures failed"; echo "0 passed, 1 failed"; exit 1; }
import json, struct, pickle, numpy as np
def st(path, tensors):
    h, data, off = {}, b"", 0
    for name, a in tensors:
        b = a.tobytes()
        h[name] = {"dtype": {"float32": "F32"}[str(a.dtype)], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + data)
st("m/model-00001-of-00002.safetensors", [("weight", np.arange(12, dtype=np.float32).reshape(4, 3))])
rng = np.random.default_rng(5)
st("m/model-00002-of-00002.safetensors", [("big", rng.standard_normal((1024, 1024)).astype(np.float32))])
open("m/config.json", "w").write('{"model_type": "tiny"}\n')
open("m/docs/README.md", "w").write("# tiny\n")
pickle.dump({"w": 1}, open("bad.bin", "wb"), protocol=2)
# os.system('echo hi') as protocol 4 (STACK_GLOBAL posix.system + REDUCE), built as bytes
open("evil.bin", "wb").write(b"\x80\x04\x8c\x05posix\x94\x8c\x06system\x94\x93\x94"
                             b"\x8c\x07echo hi\x94\x85\x94R\x94.")
EOF

# --help: usage on stdout, exit 0
for c in push pull ls header tensor scan; do
    run 0 "$c --help" "$BIN" "$c" --help
    out_has "$c --help" "^usage: tensorgate $c"
done
run 2 "push without arguments" "$BIN" push
run 2 "pull with a bad reference" "$BIN" pull acme
run 2 "tensor without -o" "$BIN" tensor acme/tiny weight
run 2 "push --alias without --publish" "$BIN" push m acme/tiny --alias x

# push: a pickle among the files is refused with its reason; nothing is published
cp bad.bin m/pytorch_model.bin
run 1 "push with a pickle" "$BIN" push m acme/tiny --publish
out_has "push names the refusal" "^refused pytorch_model.bin: refused_format: .*pickle"
out_has "push uploads the rest" "^uploaded model-00001-of-00002.safetensors"
err_has "push says the version stays a draft" "stays a draft"
run 1 "nothing published yet" "$BIN" ls acme/tiny@latest
rm m/pytorch_model.bin

# push: every file, published, an alias; plain lines when not a terminal
run 0 "push --publish --alias" "$BIN" push m acme/tiny --publish --alias stable --parallel 2
out_has "push published" "^published acme/tiny version 2 \(digest [0-9a-f]{64}\), alias stable"
out_has "push nested file" "^uploaded docs/README.md"
check "push prints no progress bar off a terminal" "! grep -q '#' err"
run 0 "push --json" "$BIN" push m acme/other --json --publish
py "push --json lines" "
import json
lines = [json.loads(l) for l in open('out')]
assert all(l['ok'] for l in lines[:-1]) and len(lines) == 5, lines
s = lines[-1]
assert s['published'] and s['uploaded'] == 4 and s['refused'] == 0 and len(s['digest']) == 64, s"
# on a terminal (script(1) gives one): a progress bar, then the same lines
if command -v script >/dev/null 2>&1; then
    run 0 "push on a terminal" script -qec "'$BIN' push m acme/tty --publish" /dev/null
    out_has "a progress bar on a terminal" "\[#+ *\] +[0-9]+%"
    out_has "the files still listed on a terminal" "uploaded config.json"
fi
# push into an existing draft: a failed push prints the command that continues it;
# that command sends only what did not arrive and makes no new draft
rm -rf mr && cp -r m mr && cp bad.bin mr/pytorch_model.bin
run 1 "push with a pickle, to continue" "$BIN" push mr acme/resume --publish
err_has "push prints how to continue" "to continue .*: tensorgate push mr acme/resume --draft 1 --publish$"
rm mr/pytorch_model.bin
run 0 "push --draft 1 continues" "$BIN" push mr acme/resume --draft 1 --publish
err_has "push --draft finds what arrived" "draft version 1: 4 files \(4 already in the draft\)"
check "push --draft sends nothing again" "! grep -q '^uploaded' out"
out_has "push --draft publishes the draft" "^published acme/resume version 1 "
run 1 "push --draft into a published version" "$BIN" push mr acme/resume --draft 1
err_has "push --draft names a published version" "version_not_draft"
run 2 "push --draft and --resume" "$BIN" push mr acme/resume --draft 1 --resume
printf 'changed\n' >>mr/docs/README.md
run 0 "push --resume with no draft makes one" "$BIN" push mr acme/resume
run 0 "push --resume sends what changed only" "$BIN" push mr acme/resume --resume
err_has "push --resume takes the newest draft" "draft version 2: 4 files \(4 already in the draft\)"
printf 'again\n' >>mr/docs/README.md
run 0 "push --resume re-sends a changed file" "$BIN" push mr acme/resume --resume
out_has "the changed file is sent" "^uploaded docs/README.md"
check "the unchanged files are not" "! grep -q '^uploaded model-' out"
run 0 "push --resume sends nothing at the end" "$BIN" push mr acme/resume --resume --publish
out_has "the draft is published" "^published acme/resume version 2 "

# push --publish whose publish is refused (an index naming a tensor no shard holds):
# it says what happened and what to do, not "push --publish to publish"
mkdir -p badidx
cp m/model-00001-of-00002.safetensors badidx/
printf '{"metadata":{},"weight_map":{"weight":"model-00001-of-00002.safetensors","gone":"model-00001-of-00002.safetensors"}}' \
    >badidx/model.safetensors.index.json
run 1 "push --publish, the publish refused" "$BIN" push badidx acme/badidx --publish
err_has "push names the publish's refusal" "index_mismatch"
err_has "push says the publish failed and what to do" \
    "acme/badidx version 1 stays a draft: its files are stored but the publish failed; fix what it names and push again"
check "push does not tell to add --publish when it was given" "! grep -q 'push --publish to publish' out err"
run 1 "the refused publish published nothing" "$BIN" ls acme/badidx@latest
# push without --publish: a draft, and how to publish
run 0 "push without --publish" "$BIN" push badidx acme/draftonly
out_has "push without --publish says how to publish" \
    "^acme/draftonly version 1 is a draft \(not published: add --publish to publish it\)"
run 1 "push with a read token: forbidden" "$BIN" push m acme/tiny --token "$READ"
err_has "push 403 reason" "forbidden"

# ls
run 0 "ls" "$BIN" ls
out_has "ls lists models" "^acme/tiny"
run 0 "ls org" "$BIN" ls acme
out_has "ls org" "^acme/other"
run 0 "ls model" "$BIN" ls acme/tiny
out_has "ls model versions" "^2 +published"
out_has "ls model aliases" "^alias stable -> 2"
run 0 "ls version" "$BIN" ls acme/tiny@stable
out_has "ls version files" "model-00002-of-00002.safetensors$"
run 0 "ls --tensors" "$BIN" ls acme/tiny@stable --tensors
out_has "ls --tensors rows" "^big +F32 +\[1024, 1024\] +model-00002-of-00002.safetensors$"
out_has "ls --tensors rows" "^weight +F32 +\[4, 3\] +model-00001-of-00002.safetensors$"
run 0 "ls --json" "$BIN" ls acme/tiny@2 --json
py "ls --json is the file list" "
import json
files = json.load(open('out'))
assert sorted(f['path'] for f in files) == ['config.json', 'docs/README.md', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'], files"
run 1 "ls of a missing model" "$BIN" ls acme/nope
err_has "ls 404 reason" "model_not_found"
run 1 "ls --json error" "$BIN" ls acme/nope --json
py "the --json error object" "
import json
e = json.load(open('out'))['error']
assert e['status'] == 404 and e['reason'] == 'model_not_found', e"

# header
run 0 "header" "$BIN" header acme/tiny@stable model-00001-of-00002.safetensors
out_has "header tensor row" "weight +F32 +\[4, 3\] +[0-9]+ +[0-9]+ +0 +0"
run 0 "header --json" "$BIN" header acme/tiny model-00001-of-00002.safetensors --json
py "header --json" "
import json
h = json.load(open('out'))
assert h['tensors'][0]['name'] == 'weight' and h['parameters_total'] == 12, h"
run 1 "header of a sidecar" "$BIN" header acme/tiny config.json
err_has "header of a sidecar: reason" "not_safetensors"

# tensor: slice + dtype as .npy, compared with NumPy on the original
run 0 "tensor --slice --dtype -o .npy" "$BIN" tensor acme/tiny weight --slice '1:3,::2' --dtype F16 -o s.npy
out_has "tensor prints dtype and shape" "weight: F16 \[2,2\] -> s.npy"
py "tensor .npy equals NumPy slicing" "
import numpy as np, json, struct
b = open('m/model-00001-of-00002.safetensors', 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
w = np.frombuffer(b[8 + n:], dtype=np.float32).reshape(4, 3)
got = np.load('s.npy')
want = w[1:3, ::2].astype(np.float16)
assert got.dtype == np.float16 and got.shape == want.shape and (got == want).all(), (got, want)"
run 0 "tensor of a 4 MiB tensor, sliced, raw" "$BIN" tensor acme/tiny@2 big --slice '::3,100:-7:5' -o big.bin
py "tensor raw bytes equal NumPy slicing" "
import numpy as np, struct
b = open('m/model-00002-of-00002.safetensors', 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
big = np.frombuffer(b[8 + n:], dtype=np.float32).reshape(1024, 1024)
got = np.fromfile('big.bin', dtype=np.float32)
assert (got == big[::3, 100:-7:5].ravel()).all()"
run 0 "tensor --json" "$BIN" tensor acme/tiny weight --dtype BF16 -o w.bin --json
py "tensor --json" "
import json
d = json.load(open('out'))
assert d['dtype'] == 'BF16' and d['source_dtype'] == 'F32' and d['shape'] == '[4,3]' and d['bytes'] == 24, d"
run 1 "tensor slice out of range" "$BIN" tensor acme/tiny weight --slice 9 -o x.npy
err_has "tensor reason" "slice_out_of_range"
check "a refused tensor writes nothing" "[ ! -e x.npy ] && [ ! -e x.npy.part ]"

# pull: everything, SHA-256 equal to the originals
run 0 "pull" "$BIN" pull acme/tiny@stable dl
for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors config.json docs/README.md; do
    check "pull $f equals the original" "cmp -s m/$f dl/$f"
done
check "pull leaves no part file" "[ -z \"\$(find dl -name '*.part')\" ]"
run 0 "pull again: up to date" "$BIN" pull acme/tiny dl
out_has "pull again" "^up to date config.json"
run 0 "pull --include" "$BIN" pull acme/tiny inc --include '*.json' --include 'docs/*'
check "pull --include took only the matches" "[ -f inc/config.json ] && [ -f inc/docs/README.md ] && [ ! -e inc/model-00001-of-00002.safetensors ]"
run 1 "pull --include matching nothing" "$BIN" pull acme/tiny none --include '*.gguf'
run 0 "pull into NAME by default" "$BIN" pull acme/tiny --include config.json
check "pull default dir" "[ -f tiny/config.json ]"
# --no-fsync (scratch space): the same files, each still checked before its rename
run 0 "pull --no-fsync" "$BIN" pull acme/tiny nofsync --no-fsync
for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors config.json docs/README.md; do
    check "pull --no-fsync $f equals the original" "cmp -s m/$f nofsync/$f"
done
check "pull --no-fsync leaves no part file" "[ -z \"\$(find nofsync -name '*.part')\" ]"

# resume: a correct half in the part file is completed
mkdir -p res
head -c 2000000 m/model-00002-of-00002.safetensors >res/model-00002-of-00002.safetensors.part
run 0 "pull resumes a part file" "$BIN" pull acme/tiny res --include 'model-00002*'
check "resumed file is whole" "cmp -s m/model-00002-of-00002.safetensors res/model-00002-of-00002.safetensors"
check "resumed: no part left" "[ ! -e res/model-00002-of-00002.safetensors.part ]"
# a wrong prefix: the download resumes after it, the SHA-256 differs, and the file is
# started over from byte 0 once, by itself: whole in one run
mkdir -p bad
head -c 2000000 /dev/zero >bad/model-00002-of-00002.safetensors.part
run 0 "pull starts a corrupt part file over, in one run" "$BIN" pull acme/tiny bad --include 'model-00002*'
check "the restarted file is whole" "cmp -s m/model-00002-of-00002.safetensors bad/model-00002-of-00002.safetensors"
check "restarted: no part left" "[ ! -e bad/model-00002-of-00002.safetensors.part ]"
out_has "restarted: downloaded" "^downloaded model-00002-of-00002.safetensors$"
# a pull killed mid-file leaves only NAME.part; the next pull resumes it
mkdir -p killed
timeout -s KILL 1 "$BIN" pull acme/tiny killed --include 'model-00002*' --limit-rate 1M >out 2>err
check "killed pull: no file under its final name" "[ ! -e killed/model-00002-of-00002.safetensors ]"
check "killed pull: a part file" "[ -s killed/model-00002-of-00002.safetensors.part ]"
run 0 "pull resumes the killed pull" "$BIN" pull acme/tiny killed --include 'model-00002*' --json
check "resumed killed pull is whole" "cmp -s m/model-00002-of-00002.safetensors killed/model-00002-of-00002.safetensors"
py "pull --json summary" "
import json
lines = [json.loads(l) for l in open('out')]
assert lines[0]['ok'] and lines[0]['status'] == 'downloaded', lines
assert lines[-1]['downloaded'] == 1 and lines[-1]['failed'] == 0 and lines[-1]['version'] == 2, lines"
run 1 "pull of a missing model" "$BIN" pull acme/nope x
# an empty file is made locally (a size of 0 cannot bound a body)
mkdir -p empties && : >empties/empty.txt && echo x >empties/x.txt
run 0 "push a version with an empty file" "$BIN" push empties acme/empties --publish
run 0 "pull a version with an empty file" "$BIN" pull acme/empties empties-out
out_has "pull: the empty file is made" "^empty empty.txt$"
check "pull: the empty file and the other" "[ -f empties-out/empty.txt ] && [ ! -s empties-out/empty.txt ] && cmp -s empties/x.txt empties-out/x.txt"
run 2 "pull --stall-timeout 0 is a usage error" "$BIN" pull acme/tiny x --stall-timeout 0

# pull against a hostile peer (tests/client/hostile_peer.py, plain python3)
python3 "$SRC_DIR/tests/client/hostile_peer.py" >peer.port 2>peer.log &
peer=$!
pport=
for _ in $(seq 1 50); do
    pport=$(head -n 1 peer.port)
    [ -n "$pport" ] && break
    sleep 0.1
done
if [ -z "$pport" ]; then
    fail "the hostile peer did not start"
else
    PEER="http://127.0.0.1:$pport"
    # seconds since the epoch with a fraction, for the timing checks
    now() { date +%s.%N; }
    took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
    # a file listed at 4176 bytes whose body never ends: the file fails at its size
    # (a client without the bound is stopped by the file size limit, 10-20 MB)
    t0=$(now)
    TENSORGATE_RETRIES=0 run 3 "pull: an endless body fails the file" sh -c 'ulimit -f 20000; exec timeout 30 "$@"' sh "$BIN" pull acme/endless hp-endless --url "$PEER"
    out_has "endless: body_too_large" "^failed model.safetensors: body_too_large: .*4176 bytes"
    check "endless: stopped at once ($(took "$t0") s)" "[ \$(awk -v t=$(took "$t0") 'BEGIN { print (t < 10) }') -eq 1 ]"
    check "endless: nothing kept (no part, no file)" "[ -z \"\$(ls -A hp-endless)\" ]"
    check "endless: at most a few KiB on disk at any time" "[ \$(du -sk hp-endless | cut -f1) -le 16 ]"
    # the same file announced at 4 GiB: refused from the announcement, before any byte
    TENSORGATE_RETRIES=0 run 3 "pull: a 4 GiB announcement fails the file" sh -c 'ulimit -f 20000; exec timeout 30 "$@"' sh "$BIN" pull acme/longer hp-longer --url "$PEER"
    out_has "longer: body_too_large names the announcement" "body_too_large: .*announced 4294967296 bytes"
    check "longer: nothing kept" "[ -z \"\$(ls -A hp-longer)\" ]"
    # 4 bytes every 2 s: stalled after --stall-timeout, not retried
    t0=$(now)
    run 3 "pull: a trickle stalls" timeout 60 "$BIN" pull acme/trickle hp-trickle --url "$PEER" --stall-timeout 3
    t=$(took "$t0")
    out_has "trickle: stalled" "^failed model.safetensors: stalled: fewer than 1024 bytes arrived in 3 s"
    check "trickle: failed within the timeout ($t s)" "[ \$(awk -v t=$t 'BEGIN { print (t >= 2.5 && t < 8) }') -eq 1 ]"
    check "trickle: only the part file, for a resume" "[ ! -e hp-trickle/model.safetensors ] && [ -s hp-trickle/model.safetensors.part ]"
    # an answer that never comes
    t0=$(now)
    run 3 "pull: no answer stalls" timeout 60 "$BIN" pull acme/silent hp-silent --url "$PEER" --stall-timeout 2
    t=$(took "$t0")
    out_has "silent: stalled" "stalled"
    check "silent: failed within the timeout ($t s)" "[ \$(awk -v t=$t 'BEGIN { print (t >= 1.5 && t < 7) }') -eq 1 ]"
    # a refusal whose problem body never ends: read up to its bound, then reported
    t0=$(now)
    run 3 "pull: an endless problem body" timeout 30 "$BIN" pull acme/errflood hp-errflood --url "$PEER"
    err_has "errflood: the 500 reported" "HTTP status 500"
    check "errflood: at once ($(took "$t0") s)" "[ \$(awk -v t=$(took "$t0") 'BEGIN { print (t < 10) }') -eq 1 ]"
    # file names with terminal escapes, CR LF, C1 and DEL: refused before anything
    # is printed raw or written (not even the folder, not the clean file before them)
    run 3 "pull: escape sequences in file names" "$BIN" pull acme/escape hp-escape --url "$PEER"
    err_has "escape: unsafe_name" "unsafe_name: .*x1b"
    check "escape: no control character printed" "! LC_ALL=C grep -q \"\$(printf '[\\001-\\010\\013-\\037\\177]')\" out err"
    check "escape: nothing written" "[ ! -e hp-escape ]"
    run 3 "ls: escape sequences in file names" "$BIN" ls acme/escape@1 --url "$PEER"
    check "ls escape: no control character printed" "! LC_ALL=C grep -q \"\$(printf '[\\001-\\010\\013-\\037\\177]')\" out err"
    # tensor names are the publisher's to choose: shown with the escapes spelled out
    run 0 "ls --tensors: escape sequences in tensor names" "$BIN" ls acme/escape@1 --tensors --url "$PEER"
    out_has "ls --tensors: the name escaped" '^\\x1b\[31mred\\x07 +F32'
    check "ls --tensors: no control character printed" "! LC_ALL=C grep -q \"\$(printf '[\\001-\\010\\013-\\037\\177]')\" out err"
fi

# scan: the server's verdict, nothing stored
run 0 "scan a valid file" "$BIN" scan m/model-00001-of-00002.safetensors
out_has "scan valid" "valid safetensors"
run 1 "scan a pickle" "$BIN" scan bad.bin
out_has "scan names the refusal" "refused: refused_format: .*\(format pickle\)"
run 1 "scan --json" "$BIN" scan bad.bin --json
py "scan --json verdict" "
import json
v = json.load(open('out'))
assert v['valid'] is False and v['format'] == 'pickle' and v['file'] == 'bad.bin', v"
run 1 "scan names a pickle's imports" "$BIN" scan evil.bin
out_has "scan imports line" "^  imports posix.system \(dangerous, called\) at offset 19$"
run 1 "scan --json findings" "$BIN" scan evil.bin --json
py "scan --json findings" "
import json
v = json.load(open('out'))
assert v['findings'] == [{'global': 'posix.system', 'calls': True, 'severity': 'dangerous', 'offset': 19}], v"
run 0 "scan a sidecar by name" "$BIN" scan m/config.json
run 2 "scan a missing file" "$BIN" scan nope.bin

# rejections: what the server refused (the pickle push above), with the admin token
ADMIN=$("$BIN" token create --data ./data --scope admin 2>/dev/null | tail -n 1)
BAD_SHA=$(sha256sum bad.bin | cut -d' ' -f1)
BAD_SIZE=$(wc -c <bad.bin)
run 0 "rejections --help" "$BIN" rejections --help
out_has "rejections --help" "^usage: tensorgate rejections"
run 1 "rejections with a write token" "$BIN" rejections
err_has "rejections needs admin" "forbidden"
TENSORGATE_TOKEN=$ADMIN run 0 "rejections" "$BIN" rejections --namespace acme
out_has "rejections table header" "^TIME +REASON +NAMESPACE +SIZE +SHA256"
out_has "rejections lists the pickle" "refused_format +acme +$BAD_SIZE +$BAD_SHA .*acme/tiny@1 pytorch_model.bin$"
TENSORGATE_TOKEN=$ADMIN run 0 "rejections --jsonl --sha256" "$BIN" rejections --jsonl --sha256 "$BAD_SHA"
py "rejections --jsonl lines" "
import json
rs = [json.loads(l) for l in open('out')]
assert len(rs) >= 1, rs
for r in rs:
    assert r['sha256'] == '$BAD_SHA' and r['size'] == $BAD_SIZE, r
    assert r['namespace'] == 'acme' and isinstance(r['token_id'], int), r
    assert r['route'] == 'PUT /v1/models/{org}/{name}/versions/{rev}/files/{path*}', r
    assert r['client'] == '127.0.0.1' and r['job_id'] is None, r"
TENSORGATE_TOKEN=$ADMIN run 0 "rejections --limit 1" "$BIN" rejections --jsonl --limit 1
check "rejections --limit 1: one line" "[ \"\$(wc -l <out)\" -eq 1 ]"
TENSORGATE_TOKEN=$ADMIN run 0 "rejections --until" "$BIN" rejections --json --until 2000-01-01T00:00:00Z
check "rejections before 2000: none" "[ ! -s out ]"
TENSORGATE_TOKEN=$ADMIN run 1 "rejections --since bad" "$BIN" rejections --since yesterday
err_has "rejections names the bad time" "invalid_time"
TENSORGATE_TOKEN=$ADMIN run 1 "rejections --sha256 bad" "$BIN" rejections --sha256 abc
err_has "rejections names the bad sha256" "invalid_sha256"
run 2 "rejections --limit 0" "$BIN" rejections --limit 0
err_has "rejections --limit 0 says why" "positive integer"
# namespace policy: an admin of the org sets the code policy; a write token may not
ADMIN_ACME=$("$BIN" token create --data ./data --scope admin --namespace acme 2>/dev/null | tail -n 1)
ADMIN_OTHER=$("$BIN" token create --data ./data --scope admin --namespace other 2>/dev/null | tail -n 1)
run 0 "namespace --help" "$BIN" namespace --help
out_has "namespace --help" "^usage: tensorgate namespace show"
run 2 "namespace policy without ORG" "$BIN" namespace policy --token "$ADMIN_ACME"
run 2 "namespace policy with a bad value" "$BIN" namespace policy acme --allow-code maybe --token "$ADMIN_ACME"
run 2 "namespace without a subcommand we know" "$BIN" namespace frobnicate acme
run 0 "namespace policy shows the default" "$BIN" namespace policy acme --token "$ADMIN_ACME"
out_has "the default is refused" "^acme: code refused \(the default\)$"
run 1 "a write token may not read the policy" "$BIN" namespace policy acme
err_has "write token: forbidden" "forbidden"
run 1 "another namespace's admin may not set it" "$BIN" namespace policy acme --allow-code yes --token "$ADMIN_OTHER"
printf 'class X:\n    pass\n' >modeling_x.py
mkdir -p coded && cp modeling_x.py coded/ && cp m/config.json coded/
run 1 "push with code is refused by default" "$BIN" push coded acme/coded --publish
out_has "push names the code refusal" "^refused modeling_x.py: code_python"
run 0 "namespace policy --allow-code yes" "$BIN" namespace policy acme --allow-code yes --token "$ADMIN_ACME" --json
py "the policy as stored" "
import json
v = json.load(open('out'))
assert v['namespace'] == 'acme' and v['allow_code'] is True and v['updated_at'], v"
run 0 "push with code is admitted" "$BIN" push coded acme/coded --publish
run 0 "ls the version's files" "$BIN" ls acme/coded@latest
out_has "the code file's kind" " code +[0-9a-f]{64}  modeling_x.py$"
run 0 "ls marks the version" "$BIN" ls acme/coded
out_has "the version holds code" "^2 +published .*  holds code$"
run 0 "ls --json marks the version" "$BIN" ls acme/coded --json
py "the model marks its versions" "
import json
v = json.load(open('out'))
assert v['holds_code'] is True and v['versions'][-1]['holds_code'] is True, v"
run 0 "namespace policy --allow-code no" "$BIN" namespace policy acme --allow-code no --token "$ADMIN_ACME"
out_has "refused again" "^acme: code refused \(set "
run 1 "push with code is refused again" "$BIN" push coded acme/coded --publish

# the registry commands (cmd/registry.c): tags, descriptions, search, deprecation,
# deletion, aliases and the namespace quota, on acme/hub; each refusal names the
# server's reason and exits 1; a usage error exits 2 before anything is sent
OTHER_W=$("$BIN" token create --data ./data --scope write --namespace other 2>/dev/null | tail -n 1)
mkdir -p hubm && cp m/model-00001-of-00002.safetensors m/config.json hubm/
for c in model models version draft alias; do
    run 0 "$c --help" "$BIN" "$c" --help
    out_has "$c --help" "^(usage: | +)tensorgate $c "
done
run 0 "push acme/hub 1" "$BIN" push hubm acme/hub --publish
run 0 "push acme/hub 2" "$BIN" push hubm acme/hub --publish
run 2 "model tag without =" "$BIN" model tag acme/hub novalue
run 2 "model tag without a change" "$BIN" model tag acme/hub
run 2 "model describe without TEXT" "$BIN" model describe acme/hub
run 2 "version deprecate without @REV" "$BIN" version deprecate acme/hub
err_has "version deprecate wants @REV" "names no version"
run 2 "models --sort bogus" "$BIN" models --sort size
run 2 "alias set with version 0" "$BIN" alias set acme/hub best 0
run 2 "alias delete with a slash" "$BIN" alias delete acme/hub a/b
run 2 "version delete with a slash in REV" "$BIN" version delete acme/hub@1/2
run 2 "namespace quota --set 10X" "$BIN" namespace quota acme --set 10X --token "$ADMIN_ACME"
run 2 "namespace quota --set and --default" "$BIN" namespace quota acme --set 1G --default
run 0 "model tag" "$BIN" model tag acme/hub team=vision stage=prod empty=
out_has "model tag shows the tags" "^tags: +stage=prod, team=vision, empty=$|team=vision"
run 0 "model tag a version" "$BIN" model tag acme/hub@1 eval=old --json
py "the version's tags" "
import json
v = json.load(open('out'))
assert v['version'] == 1 and v['tags'] == {'eval': 'old'}, v"
run 1 "model tag with a bad key" "$BIN" model tag acme/hub 'bad..key=1'
err_has "the bad key's reason" "^tensorgate model tag: invalid_tag: "
TENSORGATE_TOKEN='' run 1 "model tag without a token" "$BIN" model tag acme/hub x=1
err_has "no token: the server's reason" "^tensorgate model tag: (unauthorized|missing_token|[a-z_]+): .+"
run 1 "model tag with another namespace's token" "$BIN" model tag acme/hub x=1 --token "$OTHER_W"
err_has "another namespace: forbidden" "^tensorgate model tag: forbidden: "
run 0 "model describe" "$BIN" model describe acme/hub "Vision encoder"
run 0 "model tag --remove" "$BIN" model tag acme/hub --remove stage --remove empty
# the server's own answer, read with curl and Python's json
curl -s "$TENSORGATE_URL/v1/models/acme/hub" >out
py "tags and description as the server stores them" "
import json
m = json.load(open('out'))
assert m['tags'] == {'team': 'vision'} and m['description'] == 'Vision encoder', m"
run 0 "models --tag" "$BIN" models --tag team=vision
out_has "models --tag finds it" "^acme/hub +[0-9]+  team=vision  Vision encoder$"
run 0 "models --tag with no match" "$BIN" models --tag team=audio
check "models --tag team=audio: nothing" "[ ! -s out ]"
run 0 "models --search" "$BIN" models --search 'VISION enc' --sort downloads --json
py "models --search --json" "
import json
ms = json.load(open('out'))
assert [m['name'] for m in ms] == ['acme/hub'], ms"
run 1 "models --tag with a bad key" "$BIN" models --tag 'a..b'
err_has "models: invalid_tag" "invalid_tag"
run 0 "version deprecate" "$BIN" version deprecate acme/hub@2 --reason "regressed on evals"
out_has "the version is marked" "^deprecated: .*: regressed on evals$"
run 0 "model show" "$BIN" model show acme/hub
out_has "model show marks it" "^2 +published .* deprecated: regressed on evals$"
out_has "model show: tags" "^tags: +team=vision$"
run 0 "latest skips the deprecated version" "$BIN" model show acme/hub@latest --json
py "latest is 1" "import json; assert json.load(open('out'))['version'] == 1"
run 1 "version deprecate with another namespace's token" "$BIN" version deprecate acme/hub@1 --token "$OTHER_W"
run 0 "version undeprecate" "$BIN" version undeprecate acme/hub@2 --json
py "undeprecated" "import json; v = json.load(open('out')); assert v['version'] == 2 and not v.get('deprecated'), v"
run 0 "push a draft" "$BIN" push hubm acme/hub
run 1 "draft delete of a published version" "$BIN" draft delete acme/hub@2
err_has "draft delete says why" "is published, not a draft"
run 0 "draft delete" "$BIN" draft delete acme/hub@3
run 1 "the draft is gone" "$BIN" model show acme/hub@3
run 0 "alias set" "$BIN" alias set acme/hub best 1
run 0 "alias delete" "$BIN" alias delete acme/hub best
run 1 "alias delete again" "$BIN" alias delete acme/hub best
err_has "alias_not_found" "^tensorgate alias delete: alias_not_found: "
run 1 "alias set latest" "$BIN" alias set acme/hub latest 1
err_has "reserved_alias" "reserved_alias"
run 1 "version delete of a published version with a write token" "$BIN" version delete acme/hub@1
err_has "version delete needs admin" "forbidden"
run 0 "version delete (admin)" "$BIN" version delete acme/hub@1 --token "$ADMIN_ACME"
run 1 "the deleted version answers 410" "$BIN" model show acme/hub@1
err_has "version_deleted" "^tensorgate model show: version_deleted: "
run 0 "namespace show" "$BIN" namespace show acme
out_has "namespace show: usage" "^acme: usage .* \([0-9]+ bytes\)$"
run 1 "namespace quota --set with a write token" "$BIN" namespace quota acme --set 10G
run 1 "namespace quota --set by another namespace's admin" "$BIN" namespace quota acme --set 10G --token "$ADMIN_OTHER"
run 0 "namespace quota --set 10G" "$BIN" namespace quota acme --set 10G --token "$ADMIN_ACME"
out_has "the quota" "^acme: quota 10.0 GiB \(10737418240 bytes\)$"
run 0 "namespace quota --set 1" "$BIN" namespace quota acme --set 1 --token "$ADMIN_ACME"
run 1 "an upload over the quota" "$BIN" push hubm acme/hub2 --publish
out_has "the upload names the quota" "storage_quota_exceeded"
run 0 "namespace quota --default" "$BIN" namespace quota acme --default --token "$ADMIN_ACME" --json
curl -s "$TENSORGATE_URL/v1/namespaces/acme" >out
py "back to the default" "
import json
n = json.load(open('out'))
assert n['quota_default'] is True and n['quota_bytes'] is None and n['usage_bytes'] > 0, n"

# a program linked against libtgclient (shared and static), as `make install` ships it
BUILD_DIR=$(dirname "$BIN")
if command -v cc >/dev/null 2>&1 && [ -f "$BUILD_DIR/libtgclient.so" ] && [ -f "$BUILD_DIR/libtgclient.a" ]; then
    mkdir -p inc && cp "$SRC_DIR/clients/c/tensorgate_client.h" inc/
    cat >app.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <tensorgate_client.h>
int main(int argc, char **argv)
{
    tgc_options o = {.base_url = argv[1]};
    tgc_error e;
    tgc_client *c = tgc_connect(&o, &e);
    tgc_resolved v;
    if (c == NULL || tgc_resolve(c, "acme/tiny", "stable", &v, &e) != 0 ||
        tgc_download(c, "acme/tiny", "stable", "config.json", argv[2], NULL, &e) != 0) {
        fprintf(stderr, "%s: %s\n", e.reason, e.detail);
        return 1;
    }
    float w[12];
    tgc_tensor_info info;
    if (tgc_tensor_to_buffer(c, "acme/tiny", "stable", "weight", NULL, w, sizeof w, &info, &e) != 0)
        return 1;
    printf("version %d %s %s %g\n", v.version, info.dtype, info.shape, (double)w[11]);
    json_decref(v.version_json);
    tgc_close(c);
    return argc == 3 && v.version == 2 && w[11] == 11.0f ? 0 : 1;
}
EOF
    CF=$(pkg-config --cflags jansson 2>/dev/null)
    # the ASan+UBSan build's library needs its runtime in the program too
    if nm -D "$BUILD_DIR/libtgclient.so" 2>/dev/null | grep -q __asan_init; then
        CF="$CF -fsanitize=address,undefined"
    fi
    run 0 "a program links libtgclient.so" cc -std=c11 -Iinc $CF app.c -o app-shared -L"$BUILD_DIR" -ltgclient -ljansson
    run 0 "the shared program runs" env LD_LIBRARY_PATH="$BUILD_DIR" ./app-shared "$TENSORGATE_URL" app-config.json
    out_has "the shared program's answer" "^version 2 F32 \[4,3\] 11$"
    check "the shared program downloaded" "cmp -s m/config.json app-config.json"
    run 0 "a program links libtgclient.a" cc -std=c11 -Iinc $CF app.c -o app-static "$BUILD_DIR/libtgclient.a" $(pkg-config --libs libcurl jansson libcrypto) -lpthread
    run 0 "the static program runs" ./app-static "$TENSORGATE_URL" app-config2.json
    check "the shared library exports only the API" "! nm -D --defined-only '$BUILD_DIR/libtgclient.so' | grep -q ' tg_sha256\| tg_write_all'"
fi

# exit 3: no server
TENSORGATE_RETRIES=1 run 3 "no server: exit 3" "$BIN" ls --url http://127.0.0.1:1
err_has "no server: reason" "connection_failed"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
