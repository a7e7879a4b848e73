#!/bin/sh
# pg-suite.sh [BUILD]: the PostgreSQL catalog suite. Run it under
# tests/scale/with-postgres.sh, which gives TENSORGATE_TEST_PG (and TG_PG_STOP /
# TG_PG_START); scripts/run-tests.sh does:
#   tests/scale/with-postgres.sh tests/scale/pg-suite.sh
# 1. the catalog unit tests against the real server: the backend-independent
#    tests of tests/unit/server/storage/catalog.c, and catalog_pg.c (replicas
#    migrating at once, version numbers, one publish wins, alias moves, deletes,
#    job claims and leases, a restart under the pool);
# 2. tests/integration/pg_replicas: two servers on the catalog (publish race,
#    PostgreSQL stopped and started, a dead replica's job taken over);
# 2b. tests/import/pg-replicas.sh: an import from a slow source queued on two
#    replicas with a 3 s lease is fetched once (the lease is renewed), the file
#    appears once;
# 2c. tests/audit/pg.sh: 160 writes at once through two replicas make one audit
#    chain, seq without a gap, every write once; an edit made in psql is found;
# 2d. tests/webhooks/pg-replicas.sh: webhook deliveries shared by two replicas,
#    each event received once (each retried one three times, under one id);
# 3. existing integration programs (rejections among them: its filters, paging and
#    export on the PostgreSQL dialect) with every server on the PostgreSQL catalog
#    (TENSORGATE_CATALOG): the same answers as on SQLite. Left out: the programs
#    that test the SQLite file itself (models: a newer schema written into
#    catalog.db; integrity: a full disk under SQLite) and convert, whose kill -9
#    restarts expect the job back at once (on PostgreSQL a dead server's job
#    waits for its lease: pg_replicas tests that).
# Prints one line per program and "pg-suite: N passed, N failed" (checks).
set -u
cd "$(dirname "$0")/../.."
build=${1:-build}
if [ -z "${TENSORGATE_TEST_PG:-}" ]; then
    echo "pg-suite: TENSORGATE_TEST_PG is unset; run it under tests/scale/with-postgres.sh" >&2
    echo "pg-suite: 0 passed, 1 failed"
    exit 1
fi

passed=0
failed=0
run() {
    name=$1
    shift
    out=$(mktemp)
    timeout -k 5 120 "$@" >"$out" 2>&1
    rc=$?
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    p=$(echo "$line" | sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/p')
    f=$(echo "$line" | sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/p')
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "PASS $name: $p checks"
    else
        echo "FAIL $name (exit $rc): $p passed, $f failed"
        grep -vE ' (info|debug) ' "$out" | tail -n 40 | sed 's/^/    /'
    fi
    rm -f "$out"
}

run "unit catalog (SQLite, then PostgreSQL)" "$build/tests/unit/server/storage/catalog"
run "unit catalog_pg" "$build/tests/unit/server/storage/catalog_pg"
run "unit catalog_webhooks (SQLite, then PostgreSQL)" "$build/tests/unit/server/storage/catalog_webhooks"
run "unit catalog_lifecycle (SQLite, then PostgreSQL)" "$build/tests/unit/server/storage/catalog_lifecycle"
run "unit catalog_hub (SQLite, then PostgreSQL)" "$build/tests/unit/server/storage/catalog_hub"
run "Hub writes, pending LFS across a restart (PostgreSQL catalog)" \
    env TENSORGATE_CATALOG="$TENSORGATE_TEST_PG" "$build/tests/unit/server/routes/hf_write" "$build"
run "integration pg_replicas" "$build/tests/integration/pg_replicas" "$build"
run "import on two replicas" tests/import/pg-replicas.sh "$build/tensorgate"
run "audit chain on two replicas" tests/audit/pg.sh "$build/tensorgate"
run "webhooks on two replicas" tests/webhooks/pg-replicas.sh "$build/tensorgate"
run "mirror route (PostgreSQL catalog)" env TENSORGATE_CATALOG="$TENSORGATE_TEST_PG" \
    "$build/tests/unit/server/routes/mirror" "$build"
for t in auth tenancy routes metrics digests tensors hf authz_matrix cases rejections codepolicy registry lifecycle; do
    run "integration $t (PostgreSQL catalog)" env TENSORGATE_CATALOG="$TENSORGATE_TEST_PG" \
        "$build/tests/integration/$t" "$build"
done
echo "pg-suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
