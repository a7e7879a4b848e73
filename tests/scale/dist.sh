#!/bin/sh
# tests/scale/dist.sh [BUILD_DIR]: the distributed suite (tests/scale/dist.py):
# three replicas of BUILD_DIR/tensorgate-test (the test build: dist.py sets a
# test hook, common/test_hooks.h) on one throwaway PostgreSQL cluster and
# one throwaway Ceph RADOS Gateway, behind nginx, all on loopback, all removed at
# the end. Needs scripts/install-deps.sh's packages (postgresql-15, radosgw,
# ceph-mon, ceph-osd, nginx-light, python3-numpy).
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
exec tests/scale/with-postgres.sh tests/scale/with-radosgw.sh /usr/bin/python3 tests/scale/dist.py "$build/tensorgate-test"
