#!/bin/sh
# Installs the Debian 12 packages tensorgate needs to build, test and run.
# Only what is missing is installed; running it again does nothing.
#   scripts/install-deps.sh          build + run + test
#   scripts/install-deps.sh --bench  also the benchmark load generators (wrk; ab from
#                                    apache2-utils for HEAD, which wrk cannot count)
#   scripts/install-deps.sh --build  only what `make` needs (the Docker build stage)
#   scripts/install-deps.sh --run    what `make run` needs: --build, and curl, sqlite3
#                                    and python3 with NumPy for the README walk-through
#                                    and the Python client (no test stack: no Ceph,
#                                    PostgreSQL server, nginx, Chromium, torch, Node.js)
#   scripts/install-deps.sh --runtime   only the shared libraries the tensorgate
#                                       binary loads (the Docker runtime stage)
# Used by the Makefile (make run: --run; make test; make bench: --bench), .ci/run and
# docker/Dockerfile (--build, --runtime).
set -eu

packages="gcc make pkg-config clang libclang-rt-14-dev clang-format clang-tidy cppcheck
libmicrohttpd-dev libsqlite3-dev libjansson-dev libyaml-dev libssl-dev libcurl4-openssl-dev
curl sqlite3 coreutils python3 python3-numpy python3-torch python3-cryptography
radosgw ceph-mon ceph-osd ceph-common
libpq-dev postgresql-15 nginx-light openssl chromium"

if [ "${1:-}" = "--bench" ]; then
    packages="$packages wrk apache2-utils"
fi

build_packages="gcc make pkg-config libc6-dev
libmicrohttpd-dev libsqlite3-dev libjansson-dev libyaml-dev libssl-dev libcurl4-openssl-dev libpq-dev"
if [ "${1:-}" = "--build" ]; then
    packages=$build_packages
elif [ "${1:-}" = "--run" ]; then
    packages="$build_packages curl sqlite3 python3 python3-numpy"
elif [ "${1:-}" = "--runtime" ]; then
    # The libraries of the build's LDLIBS (libcrypto is in libssl3); libcurl is the
    # S3 blob store's HTTP client (and the tests').
    packages="libmicrohttpd12 libsqlite3-0 libjansson4 libyaml-0-2 libssl3 libcurl4 libpq5"
# Node.js runs the OpenAPI linter; a machine that already has a node on PATH keeps it.
elif ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    packages="$packages nodejs npm"
fi

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "install-deps: installing:$missing" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing on a fresh machine or image.
if ! $sudo apt-get install -y -q --no-install-recommends $missing; then
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends $missing
fi
