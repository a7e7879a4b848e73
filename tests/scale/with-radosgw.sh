#!/bin/bash
# with-radosgw.sh CMD [ARGS...]: runs CMD against a real Ceph RADOS Gateway.
#
# Under one temporary directory it starts one ceph-mon, one ceph-osd (memstore)
# and one radosgw (beast frontend on 127.0.0.1, a free port), all as plain
# background processes with `auth none`; creates an S3 user and a bucket; runs
# CMD with
#   TENSORGATE_TEST_S3_ENDPOINT=http://127.0.0.1:PORT
#   TENSORGATE_TEST_S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
#   TG_RGW_STOP / TG_RGW_START: shell commands that stop / restart radosgw only
#   TG_RGW_DIR: the temporary directory (ceph.conf, logs)
# then stops everything and removes the directory (also on failure or a signal).
# The exit status is CMD's. memstore keeps objects in RAM: keep them small
# (TG_RGW_MEMSTORE_BYTES sizes the store, default 2 GiB; objects deleted stay until
# radosgw's garbage collection).
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi
for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool curl; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "with-radosgw: $b not found (scripts/install-deps.sh installs radosgw ceph-mon ceph-osd ceph-common)" >&2
        exit 2
    fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/tg-rgw.XXXXXX") || exit 2
pids=""

cleanup() {
    # radosgw first (it holds the others), then the OSD, then the monitor.
    if [ -f "$dir/rgw.pid" ]; then kill "$(cat "$dir/rgw.pid")" 2>/dev/null; fi
    for p in $pids; do kill "$p" 2>/dev/null; done
    for _ in $(seq 50); do
        alive=0
        for p in $pids $( [ -f "$dir/rgw.pid" ] && cat "$dir/rgw.pid"); do
            kill -0 "$p" 2>/dev/null && alive=1
        done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in $pids $( [ -f "$dir/rgw.pid" ] && cat "$dir/rgw.pid"); do kill -9 "$p" 2>/dev/null; done
    if [ -n "${TG_RGW_KEEP:-}" ]; then
        echo "with-radosgw: kept $dir" >&2
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A port nothing listens on (bash's /dev/tcp connects; a refusal means free).
free_port() {
    local p
    for _ in $(seq 100); do
        # below the kernel's ephemeral range (32768-60999 on Debian), so that no
        # outgoing connection of a busy machine holds the port when ceph-mon binds it
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

fail() {
    echo "with-radosgw: $*" >&2
    for f in "$dir"/log/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f (tail)" >&2
        tail -n 15 "$f" >&2
    done
    exit 2
}

mon_port=$(free_port) || fail "no free port"
rgw_port=$(free_port) || fail "no free port"
while [ "$rgw_port" = "$mon_port" ]; do rgw_port=$(free_port) || fail "no free port"; done
fsid=$(cat /proc/sys/kernel/random/uuid)
mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/rgw" || fail "mkdir"
conf=$dir/ceph.conf

cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
ms mon client mode = crc secure
ms bind ipv6 = false
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
crash dir = $dir/crash
keyring = /dev/null
err to stderr = false
log to stderr = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon max pg per osd = 1000
paxos propose interval = 0.05
mon osd full ratio = 0.99
mon osd backfillfull ratio = 0.99
mon osd nearfull ratio = 0.99

[mon]
mon data = $dir/mon
mon cluster log file = $dir/log/cluster.log

[osd]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = ${TG_RGW_MEMSTORE_BYTES:-2147483648}
osd max object name len = 460
osd max object namespace len = 64
osd op num shards = 1
osd op num threads per shard = 2

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
rgw thread pool size = 64
rgw gc obj min wait = 1
rgw gc processor period = 5
rgw lc debug interval = 10
CONF

export CEPH_CONF=$conf

monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >"$dir/log/monmaptool.out" 2>&1 ||
    fail "monmaptool failed: $(cat "$dir/log/monmaptool.out")"
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >"$dir/log/mon-mkfs.out" 2>&1 ||
    fail "ceph-mon --mkfs failed: $(cat "$dir/log/mon-mkfs.out")"
ceph-mon -c "$conf" -i a -f >"$dir/log/mon.out" 2>&1 &
pids="$pids $!"
disown $! # no "Killed" job notices at the end

cl() { timeout 20 ceph -c "$conf" --connect-timeout 10 "$@"; }

osd_uuid=$(cat /proc/sys/kernel/random/uuid)
id=$(cl osd new "$osd_uuid" 2>"$dir/log/osd-new.err") || fail "ceph osd new failed: $(cat "$dir/log/osd-new.err")"
ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$osd_uuid" >"$dir/log/osd-mkfs.out" 2>&1 ||
    fail "ceph-osd --mkfs failed: $(cat "$dir/log/osd-mkfs.out")"
ceph-osd -c "$conf" -i "$id" -f >"$dir/log/osd.out" 2>&1 &
pids="$pids $!"
disown $!

rgw_start() {
    radosgw -c "$conf" -n client.rgw -f >>"$dir/log/rgw.out" 2>&1 &
    echo $! >"$dir/rgw.pid"
    disown $!
    # Up when the port answers HTTP.
    for _ in $(seq 300); do
        if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$rgw_port/"; then return 0; fi
        kill -0 "$(cat "$dir/rgw.pid")" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
rgw_stop() {
    [ -f "$dir/rgw.pid" ] || return 0
    p=$(cat "$dir/rgw.pid")
    kill "$p" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$p" 2>/dev/null
    rm -f "$dir/rgw.pid"
    return 0
}

rgw_start || fail "radosgw did not open 127.0.0.1:$rgw_port"

access=TGTESTACCESSKEY0001
secret=tgtestsecretkey0000000000000000000000001
bucket=tensorgate-test
region=us-east-1
timeout 30 radosgw-admin -c "$conf" user create --uid=tensorgate --display-name=tensorgate \
    --access-key="$access" --secret="$secret" >"$dir/log/user.out" 2>&1 ||
    fail "radosgw-admin user create failed: $(cat "$dir/log/user.out")"
code=$(curl -s -o "$dir/log/bucket.out" -w '%{http_code}' --max-time 20 -X PUT \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    --aws-sigv4 "aws:amz:$region:s3" --user "$access:$secret" \
    "http://127.0.0.1:$rgw_port/$bucket")
[ "$code" = 200 ] || fail "bucket create answered $code: $(cat "$dir/log/bucket.out")"

# Written as a script so TG_RGW_START/STOP work from any shell or program.
cat >"$dir/rgw-stop" <<S
#!/bin/sh
p=\$(cat "$dir/rgw.pid" 2>/dev/null) || exit 0
kill "\$p" 2>/dev/null
i=0
while kill -0 "\$p" 2>/dev/null && [ \$i -lt 30 ]; do sleep 0.1; i=\$((i + 1)); done
kill -9 "\$p" 2>/dev/null
rm -f "$dir/rgw.pid"
exit 0
S
cat >"$dir/rgw-start" <<S
#!/bin/sh
[ -f "$dir/rgw.pid" ] && kill -0 "\$(cat "$dir/rgw.pid")" 2>/dev/null && exit 0
CEPH_CONF="$conf" nohup radosgw -c "$conf" -n client.rgw -f >>"$dir/log/rgw.out" 2>&1 </dev/null &
echo \$! >"$dir/rgw.pid"
i=0
while [ \$i -lt 300 ]; do
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$rgw_port/" && exit 0
    sleep 0.1
    i=\$((i + 1))
done
exit 1
S
chmod +x "$dir/rgw-stop" "$dir/rgw-start"

export TENSORGATE_TEST_S3_ENDPOINT="http://127.0.0.1:$rgw_port"
export TENSORGATE_TEST_S3_BUCKET=$bucket
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=$region
unset AWS_SESSION_TOKEN AWS_PROFILE
export TG_RGW_STOP="$dir/rgw-stop"
export TG_RGW_START="$dir/rgw-start"
export TG_RGW_DIR=$dir

"$@"
status=$?
exit $status
