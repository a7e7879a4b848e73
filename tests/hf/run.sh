#!/bin/sh
# tests/hf/run.sh: runs metadata.mjs (the real @huggingface/hub client) against a
# running tensorgate; TG_HF_EXPECT names the expectations (see metadata.mjs), and
# TG_HF_SCRIPT another script of this folder to run instead (write.mjs).
# The client is installed into tests/hf/node_modules by `npm ci` (version pinned in
# package-lock.json) the first time, and again only when the lock file changed.
# Exits 77 when node is not installed (the caller skips), 2 when the client
# cannot be installed, else metadata.mjs's status.
set -eu
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
    echo "tests/hf: node not found; skipping the @huggingface/hub client test" >&2
    exit 77
fi
stamp=node_modules/.tg-lock-stamp
if [ ! -d node_modules/@huggingface/hub ] || [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
    if ! command -v npm >/dev/null 2>&1 ||
        ! npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1; then
        echo "tests/hf: cannot install @huggingface/hub (npm ci failed; is the npm registry reachable?)" >&2
        exit 2
    fi
    cp package-lock.json "$stamp"
fi
exec node "${TG_HF_SCRIPT:-metadata.mjs}"
