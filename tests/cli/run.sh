#!/bin/sh
# CLI tests of the local commands: tests/cli/run.sh BINARY
# Builds fixtures with /usr/bin/python3 (numpy, torch), runs validate, inspect and
# convert, and checks exit codes, output fields, SHA-256 (sha256sum), NaN/Inf counts
# (numpy) and converted values (torch .to()). Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-cli.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
passed=0
failed=0

ok() {
    passed=$((passed + 1))
}
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ -s "$W/out" ] && sed 's/^/  out: /' "$W/out" | head -n 20
    [ -s "$W/err" ] && sed 's/^/  err: /' "$W/err" | head -n 20
}

# run WANT_EXIT DESCRIPTION CMD...: runs CMD with stdout in $W/out, stderr in $W/err
run() {
    want=$1
    desc=$2
    shift 2
    "$@" >"$W/out" 2>"$W/err"
    got=$?
    if [ "$got" -eq "$want" ]; then ok; else fail "$desc: exit $got, want $want"; fi
}
# out_is DESCRIPTION TEXT: stdout is exactly TEXT (one line)
out_is() {
    if [ "$(cat "$W/out")" = "$2" ]; then ok; else fail "$1: stdout is not '$2'"; fi
}
# out_has / err_has DESCRIPTION PATTERN (grep -E)
out_has() {
    if grep -Eq -- "$2" "$W/out"; then ok; else fail "$1: stdout lacks /$2/"; fi
}
err_has() {
    if grep -Eq -- "$2" "$W/err"; then ok; else fail "$1: stderr lacks /$2/"; fi
}
# json DESCRIPTION EXPR: Python EXPR over the JSON lines of stdout (d = the last one)
json() {
    if "$PY" "$HERE/cli_files.py" json "$W/out" "$2" >"$W/pyout" 2>&1; then ok; else
        fail "$1"
        cat "$W/pyout"
    fi
}

"$PY" "$HERE/cli_files.py" make "$W" || { echo "fixtures failed"; echo "0 passed, 1 failed"; exit 1; }
cd "$W" || exit 2
: >"$W/convert_checks"

# ---- validate: exit codes and the text line ----
run 0 "validate valid" "$BIN" validate valid.safetensors
out_is "validate valid line" "valid.safetensors: valid (safetensors, 3 tensors)"
run 0 "validate several valid" "$BIN" validate valid.safetensors empty.safetensors pk_magic.safetensors
out_has "empty file has 0 tensors" "^empty.safetensors: valid \(safetensors, 0 tensors\)$"
out_has "PK-magic length is valid" "^pk_magic.safetensors: valid \(safetensors, 1 tensor\)$"
run 1 "validate valid + pickle" "$BIN" validate valid.safetensors model.bin
out_has "pickle line" "^model.bin: refused: refused_format: .*\[format pickle\]$"
run 1 "truncated" "$BIN" validate truncated.safetensors
out_has "truncated line" "^truncated.safetensors: refused: data_truncated( at offset [0-9]+)?.*: .+ \[format safetensors\]$"
run 2 "missing file" "$BIN" validate valid.safetensors no-such-file
err_has "missing file message" "no-such-file"
out_has "the other file is still judged" "^valid.safetensors: valid"
run 2 "directory" "$BIN" validate .
err_has "directory message" "directory"
run 2 "refused + missing is 2" "$BIN" validate model.bin no-such-file
run 2 "no file" "$BIN" validate
run 2 "unknown option" "$BIN" validate --frobnicate valid.safetensors
err_has "usage on stderr" "usage"
run 2 "max-header 0" "$BIN" validate --max-header 0 valid.safetensors
run 2 "max-header not a number" "$BIN" validate --max-header 12k valid.safetensors
run 2 "max-header above the reference bound" "$BIN" validate --max-header 100000001 valid.safetensors
run 0 "help" "$BIN" validate --help
out_has "help text" "usage: tensorgate validate"
run 0 "stdin" sh -c "\"$BIN\" validate - < valid.safetensors"
run 1 "stdin pickle" sh -c "\"$BIN\" validate - < model.bin"

# ---- validate --json ----
run 0 "json valid" "$BIN" validate --json valid.safetensors
json "json valid fields" 'd == {"file": "valid.safetensors", "valid": True, "reason": None, "detail": None, "offset": None, "tensor": None, "format": "safetensors", "findings": []}'
run 1 "json formats" "$BIN" validate --json model.bin proto0.txt torch_zip.safetensors array.safetensors config.json README.md
json "one line per file" 'len(lines) == 6 and [l["file"] for l in lines] == ["model.bin", "proto0.txt", "torch_zip.safetensors", "array.safetensors", "config.json", "README.md"]'
json "all refused as formats" 'all(not l["valid"] and l["reason"] == "refused_format" and l["detail"] for l in lines)'
json "formats named by content" '[l["format"] for l in lines[:5]] == ["pickle", "pickle", "pytorch-zip", "numpy", "json"] and lines[5]["format"] in ("text", "json")'
json "keys" 'all(sorted(l) == sorted(["file", "valid", "reason", "detail", "offset", "tensor", "format", "findings"]) for l in lines)'
run 1 "json truncated" "$BIN" validate --json truncated.safetensors
json "truncated fields" 'd["reason"] == "data_truncated" and d["format"] == "safetensors" and isinstance(d["offset"], int)'
run 1 "json trailing" "$BIN" validate --json trailing.safetensors
size=$(wc -c <valid.safetensors)
json "trailing at the end of the data" "d['reason'] == 'data_trailing' and d['offset'] == $size"
run 1 "json header whitespace" "$BIN" validate --json header_ws.safetensors
json "header_start" 'd["reason"] == "header_start" and d["format"] == "safetensors"'
run 1 "json max-header" "$BIN" validate --json --max-header 16 valid.safetensors
json "header_too_large" 'd["reason"] == "header_too_large"'
run 0 "max-header large enough" "$BIN" validate --max-header 100000 valid.safetensors
run 0 "nonfinite allowed by default" "$BIN" validate nan.safetensors
run 1 "refuse-nonfinite" "$BIN" validate --json --refuse-nonfinite nan.safetensors
json "nonfinite names the first tensor" 'd["reason"] == "nonfinite_values" and d["tensor"] == "big.f32" and d["offset"] > 0'
run 0 "refuse-nonfinite on finite file" "$BIN" validate --refuse-nonfinite valid.safetensors

# ---- what a refused pickle would do (issue 23) ----
run 1 "pickle findings" "$BIN" validate evil.bin
out_has "the refusal names the worst import" "imports posix.system \(dangerous, called\) \[format pickle\]$"
out_has "one line per import" "^  imports posix.system \(dangerous, called\) at offset [0-9]+$"
run 1 "pickle findings json" "$BIN" validate --json evil.bin proto0.txt valid.safetensors
json "findings in the JSON" 'lines[0]["findings"] == [{"global": "posix.system", "calls": True, "severity": "dangerous", "offset": 19}] and lines[1]["findings"][0]["global"] == "os.system" and lines[2]["findings"] == []'
run 1 "data-only pickle text" "$BIN" validate --json data_only.txt nb.md
json "data-only pickles are text" '[(l["reason"], l["format"], l["findings"]) for l in lines] == [("refused_format", "text", []), ("refused_format", "text", [])]'
run 0 "data-only pickle sidecars" "$BIN" validate --json --sidecar data_only.txt nb.md
json "admitted as text" '[(l["valid"], l["format"]) for l in lines] == [(True, "text"), (True, "text")]'

# ---- validate --sidecar ----
run 0 "sidecars" "$BIN" validate --json --sidecar config.json README.md valid.safetensors
json "sidecar formats" '[l["format"] for l in lines] == ["json", "text", "safetensors"] and all(l["valid"] for l in lines)'
run 1 "sidecar duplicate key" "$BIN" validate --json --sidecar dup.json
json "sidecar_json_invalid" 'd["reason"] == "sidecar_json_invalid"'
run 1 "sidecar protocol-0 pickle" "$BIN" validate --json --sidecar proto0.txt
json "protocol 0 is a pickle, not text" 'd["reason"] == "refused_format" and d["format"] == "pickle"'
run 1 "sidecar zip" "$BIN" validate --json --sidecar torch_zip.safetensors
json "zip in a sidecar" 'd["reason"] == "refused_format" and d["format"] == "pytorch-zip"'
run 1 "sidecar truncated safetensors" "$BIN" validate --json --sidecar truncated.safetensors
json "still a safetensors error" 'd["reason"] == "data_truncated"'
# a name ending in .json must hold strict JSON; the same bytes named .txt are text
printf '\357\273\277{"a":1}' >bom.json
cp bom.json bom.txt
printf 'null' >null.json
run 1 "sidecar strict json" "$BIN" validate --json --sidecar bom.json bom.txt null.json
json "BOM and bare null refused under .json" '[(l["valid"], l["reason"], l["format"]) for l in lines] == [(False, "sidecar_json_invalid", "json"), (True, None, "text"), (False, "sidecar_json_invalid", "json")]'

# ---- validate: code a loader would execute (the upload's verdict, by name and content) ----
printf 'import os\nos.system("echo pwned")\n' >modeling_evil.py
cp modeling_evil.py modeling_notes.txt
printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000' >model_elf.bin
mkdir -p auto_map
printf '{"model_type": "evil", "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}' >auto_map/config.json
printf '#!/bin/sh\nrm -rf ~\n' >script.md
run 1 "code sidecars" "$BIN" validate --json --sidecar modeling_evil.py model_elf.bin auto_map/config.json script.md modeling_notes.txt
json "code reasons" '[(l["valid"], l["reason"], l["format"]) for l in lines] == [(False, "code_python", "text"), (False, "code_native", "native"), (False, "code_reference", "json"), (False, "code_script", "script"), (True, None, "text")]'
json "code sentences name the file and the key" '"modeling_evil.py" in lines[0]["detail"] and "model_elf.bin" in lines[1]["detail"] and "auto_map/config.json" in lines[2]["detail"] and "auto_map" in lines[2]["detail"]'
run 1 "code in plain validate" "$BIN" validate --json modeling_evil.py model_elf.bin
json "plain validate names code too" '[l["reason"] for l in lines] == ["code_python", "code_native"]'
run 1 "code text line" "$BIN" validate modeling_evil.py
out_has "code text line names the reason" "code_python"
run 1 "code from stdin by content" sh -c "\"$BIN\" validate --sidecar - < model_elf.bin"
run 0 "stdin sidecar is judged by content" sh -c "\"$BIN\" validate --sidecar - < bom.json"

# ---- the tensor of a verdict is the whole name, U+0000 included ----
"$PY" -c 'import struct,sys; h=b"{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"; sys.stdout.buffer.write(struct.pack("<Q", len(h)) + h + b"x")' >nul_name.safetensors
run 1 "nul in a tensor name" "$BIN" validate --json nul_name.safetensors
json "tensor keeps its NUL" 'd["reason"] == "tensor_name_control" and d["tensor"] == "a\x00b"'
run 1 "nul in a tensor name, text line" "$BIN" validate nul_name.safetensors
out_has "text line shows it escaped" '\(tensor a\\x00b\)'

# ---- inspect ----
run 0 "inspect" "$BIN" inspect valid.safetensors
sum=$(sha256sum valid.safetensors | cut -d' ' -f1)
out_has "sha256 matches sha256sum" "^sha256: $sum$"
out_has "tensor row" "^  w +F32 +\[2, 3\] +[0-9]+ +[0-9]+ +0 +0$"
out_has "parameters" "^parameters: 13 \(F32: 9, I64: 4\)$"
out_has "metadata" "^  format: pt$"
run 0 "inspect --json nan" "$BIN" inspect --json nan.safetensors
if "$PY" "$HERE/cli_files.py" inspect "$W" "$W/out" nan.safetensors >"$W/pyout" 2>&1; then ok; else
    fail "inspect nan.safetensors agrees with numpy and hashlib"
    cat "$W/pyout"
fi
sum=$(sha256sum nan.safetensors | cut -d' ' -f1)
json "inspect sha256 is sha256sum's" "d['sha256'] == '$sum'"
run 0 "inspect --json conv" "$BIN" inspect --json conv.safetensors
if "$PY" "$HERE/cli_files.py" inspect "$W" "$W/out" conv.safetensors >"$W/pyout" 2>&1; then ok; else
    fail "inspect conv.safetensors agrees with numpy"
    cat "$W/pyout"
fi
run 1 "inspect refused" "$BIN" inspect model.bin
out_has "inspect prints the verdict" "^model.bin: refused: refused_format: .*\[format pickle\]$"
run 1 "inspect --json refused" "$BIN" inspect --json truncated.safetensors
json "inspect refused json" 'd["valid"] is False and d["reason"] == "data_truncated"'
run 2 "inspect two files" "$BIN" inspect valid.safetensors valid.safetensors
run 2 "inspect missing" "$BIN" inspect no-such-file

# ---- convert ----
for dtype in BF16 F16 F32 F64; do
    run 0 "convert to $dtype" "$BIN" convert conv.safetensors "out_$dtype.safetensors" --dtype "$dtype"
    out_has "convert summary $dtype" "converted to $dtype"
    echo "conv.safetensors out_$dtype.safetensors $dtype" >>"$W/convert_checks"
    run 0 "converted file validates ($dtype)" "$BIN" validate "out_$dtype.safetensors"
    [ ! -e "out_$dtype.safetensors.tmp" ] && ok || fail "no .tmp left behind ($dtype)"
done
for dtype in F8_E4M3 F8_E5M2; do
    run 0 "convert to $dtype" "$BIN" convert f8src.safetensors "f8_$dtype.safetensors" --dtype "$dtype"
    echo "f8src.safetensors f8_$dtype.safetensors $dtype" >>"$W/convert_checks"
done
run 0 "convert with globs" "$BIN" convert conv.safetensors globs.safetensors --dtype BF16 --tensors 'layer.*.weight,head.*'
out_has "glob summary" "3 of 8 tensors converted to BF16, 5 kept"
echo "conv.safetensors globs.safetensors BF16 layer.*.weight,head.*" >>"$W/convert_checks"
run 0 "glob matching nothing warns" "$BIN" convert conv.safetensors none.safetensors --dtype F16 --tensors 'zzz*,scalar'
err_has "warning names the glob" "zzz\*"
run 0 "convert in place" sh -c "cp conv.safetensors inplace.safetensors && \"$BIN\" convert inplace.safetensors inplace.safetensors --dtype F16"
echo "conv.safetensors inplace.safetensors F16" >>"$W/convert_checks"
run 2 "unsupported dtype" "$BIN" convert conv.safetensors bad.safetensors --dtype I32
err_has "unsupported dtype message" "unsupported dtype 'I32'"
run 2 "unknown dtype" "$BIN" convert conv.safetensors bad.safetensors --dtype float16
[ ! -e bad.safetensors ] && ok || fail "no output for a bad dtype"
run 2 "missing --dtype" "$BIN" convert conv.safetensors bad.safetensors
run 2 "empty glob" "$BIN" convert conv.safetensors bad.safetensors --dtype F16 --tensors 'a,,b'
run 1 "convert a refused file" "$BIN" convert model.bin bad.safetensors --dtype F16
out_has "convert prints the verdict" "^model.bin: refused: refused_format"
[ ! -e bad.safetensors ] && [ ! -e bad.safetensors.tmp ] && ok || fail "no output for a refused input"
run 1 "globs matching no tensor are refused" "$BIN" convert conv.safetensors none2.safetensors --dtype F16 --tensors 'zzz*,yyy'
out_has "the refusal names tensors_not_found" "refused: tensors_not_found"
[ ! -e none2.safetensors ] && [ ! -e none2.safetensors.tmp ] && ok || fail "no output when no tensor matches"
run 2 "convert into a missing directory" "$BIN" convert conv.safetensors no/such/dir/x.safetensors --dtype F16

# every command's --help: usage on stdout, exit 0; --version and version
for c in validate inspect convert serve token "token create" "token list" "token revoke" gc fsck; do
    # shellcheck disable=SC2086 # "token create" is two words
    run 0 "$c --help" "$BIN" $c --help
    out_has "$c --help prints usage on stdout" "usage: tensorgate"
done
# the production binary holds no test hook (common/test_hooks.h): not one hook's name
if grep -aq TENSORGATE_TEST_ "$BIN"; then fail "a test hook in the production binary"; else ok; fi
run 0 "--version" "$BIN" --version
out_has "--version prints the version" "^tensorgate [0-9]+\.[0-9]+\.[0-9]+"
run 0 "version" "$BIN" version
out_has "version prints the version" "^tensorgate [0-9]+\.[0-9]+\.[0-9]+"

# the maintenance commands refuse a --data that is not a data directory (exit 3) and
# create nothing there; an empty existing directory is not one either
mkdir empty-data
for c in gc fsck "token list" "token revoke 1"; do
    # shellcheck disable=SC2086
    run 3 "$c with a mistyped --data" "$BIN" $c --data typo-data
    err_has "$c names the refusal" "not a tensorgate data directory"
    [ ! -e typo-data ] && ok || fail "$c created the mistyped --data"
    # shellcheck disable=SC2086
    run 3 "$c with an empty directory" "$BIN" $c --data empty-data
    [ -z "$(ls -A empty-data)" ] && ok || fail "$c wrote into an empty directory"
done

# token create makes a missing or empty data directory as serve does (mode 0700,
# migrated catalog), so the first admin token exists before the first start; a
# directory holding other things is still refused
run 0 "token create on a missing --data" "$BIN" token create --data first-data --scope admin
err_has "token create says it made the directory" "making a new data directory in first-data"
first_token=$(tail -n 1 "$W/out")
[ "$(stat -c %a first-data)" = 700 ] && [ -f first-data/catalog.db ] && ok ||
    fail "token create made first-data with mode $(stat -c %a first-data), catalog: $(ls first-data)"
run 0 "token list on the directory token create made" "$BIN" token list --data first-data
out_has "the token is listed" "^1	admin	-	"
run 0 "token create on an empty directory" "$BIN" token create --data empty-data --scope read
[ -f empty-data/catalog.db ] && ok || fail "token create did not make empty-data a data directory"
mkdir other-dir && echo keep >other-dir/notes.txt
run 3 "token create on a directory holding other files" "$BIN" token create --data other-dir --scope read
err_has "the refusal names it" "other-dir is not a tensorgate data directory .*not empty"
[ "$(ls -A other-dir)" = notes.txt ] && ok || fail "token create wrote into other-dir"
# serve on that directory accepts the token made before its first start
"$BIN" serve --listen 127.0.0.1:0 --data first-data >serve.out 2>serve.log &
serve_pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' serve.log | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
code=$(curl -s -o "$W/out" -w '%{http_code}' -H "Authorization: Bearer $first_token" \
    -d '{"name":"acme/first"}' "http://127.0.0.1:${port:-1}/v1/models")
[ "$code" = 201 ] && ok || fail "serve on token create's directory: POST /v1/models answered $code"
code=$(curl -s -o "$W/out" -w '%{http_code}' -H "Authorization: Bearer tg_not_a_token" \
    -d '{"name":"acme/second"}' "http://127.0.0.1:${port:-1}/v1/models")
[ "$code" = 401 ] && ok || fail "serve accepted an unknown token: $code"
kill "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null

# the converted values, against torch .to(), in one Python run (importing torch is slow)
"$PY" "$HERE/cli_files.py" convert "$W/convert_checks" >"$W/pyout" 2>&1
grep -v '^PASS' "$W/pyout" | sed 's/^/  /'
checked=$(grep -c '^PASS' "$W/pyout")
passed=$((passed + checked))
if [ "$checked" -ne "$(wc -l <"$W/convert_checks")" ]; then
    failed=$((failed + $(wc -l <"$W/convert_checks") - checked))
    echo "FAIL: converted values differ (see above)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
