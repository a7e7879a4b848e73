#!/bin/sh
# Lints openapi.yaml with @redocly/cli (version pinned in
# tools/openapi-lint/package.json and package-lock.json). The linter is installed
# into tools/openapi-lint/node_modules/ by `npm ci` the first time, and again only
# when package-lock.json changed since then.
# Exits non-zero on any lint error (warnings are printed but do not fail).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tool=tools/openapi-lint

stamp=$tool/node_modules/.tg-lock-stamp
if [ ! -x $tool/node_modules/.bin/redocly ] || [ ! -f "$stamp" ] || ! cmp -s $tool/package-lock.json "$stamp"; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "lint-openapi: npm not found; run scripts/install-deps.sh" >&2
        exit 2
    fi
    (cd $tool && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    cp $tool/package-lock.json "$stamp"
fi

# No telemetry, no update check: the lint must work without the network.
export REDOCLY_TELEMETRY=off
export REDOCLY_SUPPRESS_UPDATE_NOTICE=true
exec $tool/node_modules/.bin/redocly lint --config "$root/scripts/redocly.yaml" --format=stylish "$root/openapi.yaml"
