#!/usr/bin/env bash
# Local backing services for dialectic: PostgreSQL, Redis, RabbitMQ and an
# S3-compatible store (s3s-fs). Development/CI only: loopback, trust auth.
#
#   deploy/stack.sh [up]   install what is missing, start what is down,
#                          create the S3 bucket and the database (idempotent)
#   deploy/stack.sh status one line per service; exit 0 only if all are up
#   deploy/stack.sh down   stop only what this script started itself
#   deploy/stack.sh env    print `export KEY=value` lines for the app config
#                          (and the local bootstrap API key, made once)
#   deploy/stack.sh stop redis / start redis
#                          take Redis down and bring it back (outage tests)
#   deploy/stack.sh restart postgres|redis|rabbitmq|s3
#   deploy/stack.sh kill postgres|rabbitmq      SIGKILL and start again (crash recovery)
#                          stop one backing service and start it again (the
#                          fault tests use it; clients see their connections drop)
#
# Migrations are NOT applied here; run the project's `migrate` command after.
set -euo pipefail

STATE_DIR="${DIALECTIC_STATE_DIR:-$HOME/.local/share/dialectic}"
DB_NAME="${DIALECTIC_DB_NAME:-dialectic}"
S3_HOST=127.0.0.1
S3_PORT="${DIALECTIC_S3_PORT:-9000}"
S3_BUCKET="${DIALECTIC_S3_BUCKET:-dialectic}"
S3_ACCESS_KEY="${DIALECTIC_S3_ACCESS_KEY:-dialectic}"
S3_SECRET_KEY="${DIALECTIC_S3_SECRET_KEY:-dialectic-secret}"
S3_REGION=us-east-1
S3_DATA_DIR="$STATE_DIR/s3"
S3_LOG="$STATE_DIR/s3s-fs.log"
S3_PID_FILE="$STATE_DIR/s3s-fs.pid"
# s3s-fs 0.14.1 with three patches (deploy/s3s-fs): short sidecar file names, so
# keys longer than ~160 bytes work; TCP_NODELAY on accepted connections (a
# GET took 43 ms, the delayed-ACK stall, instead of 1); and ListMultipartUploads,
# which upstream does not implement (exports' cleanup is tested with it). Bump
# the suffix when the patches change.
S3S_FS_VERSION=0.14.1+dialectic.3
S3S_FS_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/s3s-fs"
S3S_FS_ROOT="$STATE_DIR/s3s-fs-install"
STARTED_FILE="$STATE_DIR/started"
LOCK_FILE="$STATE_DIR/stack.lock"

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_PORT=6379
AMQP_PORT=5672

# Keep psql from hanging on a wedged server.
export PGCONNECT_TIMEOUT=5

log() { printf '[stack] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# True if something accepts TCP connections on host:port. A child bash under
# timeout, because a filtered port would block /dev/tcp for minutes.
port_open() {
    # shellcheck disable=SC2016 # expanded by the child bash, on purpose
    timeout 2 bash -c ': >"/dev/tcp/$1/$2"' port_open "$1" "$2" 2>/dev/null
}

# wait_for DESCRIPTION SECONDS CMD...: poll CMD once a second.
wait_for() {
    local what=$1 secs=$2 i
    shift 2
    for ((i = 0; i < secs; i++)); do
        if "$@"; then return 0; fi
        sleep 1
    done
    die "$what not ready after ${secs}s"
}

# Remember that we started a service, so `down` only stops our own.
mark_started() {
    touch "$STARTED_FILE"
    grep -qx "$1" "$STARTED_FILE" || echo "$1" >>"$STARTED_FILE"
}
was_started() { [[ -f $STARTED_FILE ]] && grep -qx "$1" "$STARTED_FILE"; }
unmark_started() {
    [[ -f $STARTED_FILE ]] || return 0
    local rest
    rest=$(grep -vx "$1" "$STARTED_FILE" || true)
    printf '%s\n' "$rest" | sed '/^$/d' >"$STARTED_FILE"
}

# Serialise up/down; children must not inherit fd 9 (see `9>&-` below),
# otherwise a daemon would hold the lock forever.
take_lock() {
    mkdir -p "$STATE_DIR"
    exec 9>"$LOCK_FILE"
    if ! flock -n 9; then
        log "waiting for another stack.sh holding $LOCK_FILE"
        flock -w 1800 9 || die "could not take $LOCK_FILE"
    fi
}

# ---------------------------------------------------------------- checks

pg_up() {
    if have pg_isready; then
        pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 3
    else
        port_open "$PG_HOST" "$PG_PORT"
    fi
}
pg_query() { psql -X -q -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
redis_up() {
    if have redis-cli; then
        [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
    else
        port_open 127.0.0.1 "$REDIS_PORT"
    fi
}
amqp_up() { port_open 127.0.0.1 "$AMQP_PORT"; }
rabbit_ping() { rabbitmq-diagnostics -q ping >/dev/null 2>&1; }
s3_up() { port_open "$S3_HOST" "$S3_PORT"; }

# Newest installed major version (the brief's `$(ls /etc/postgresql)` breaks
# with two versions side by side).
pg_version() {
    local v
    v=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V | tail -n1)
    [[ -n $v ]] || die "no cluster under /etc/postgresql"
    echo "$v"
}

# -------------------------------------------------------------- packages

# apt-get only for services that are down *and* not installed; a service
# reachable on its port (whoever runs it) needs nothing from us.
ensure_packages() {
    local pkgs=()
    if ! pg_up && { ! have pg_ctlcluster || ! have psql || ! compgen -G '/etc/postgresql/*/main' >/dev/null; }; then
        pkgs+=(postgresql)
    elif ! have psql; then
        pkgs+=(postgresql-client)
    fi
    if ! redis_up && ! have redis-server; then pkgs+=(redis-server); fi
    if ! amqp_up && ! have rabbitmq-server; then pkgs+=(rabbitmq-server); fi
    ((${#pkgs[@]})) || return 0
    log "installing ${pkgs[*]} via apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update 9>&- >&2
    apt-get install -y "${pkgs[@]}" 9>&- >&2
}

# -------------------------------------------------------------- services

ensure_postgres() {
    if ! pg_up; then
        local ver
        ver=$(pg_version)
        log "starting postgresql $ver/main"
        pg_ctlcluster --skip-systemctl-redirect "$ver" main start 9>&- >&2
        mark_started postgres
        wait_for postgresql 30 pg_up
    fi
    pg_trust_localhost
    log "postgresql up on $PG_HOST:$PG_PORT"
}

# A fresh Debian cluster uses scram over TCP; the app connects without a
# password, so put trust rules for loopback ahead of everything else.
pg_trust_localhost() {
    pg_query -c 'select 1' >/dev/null 2>&1 && return 0
    local ver hba
    ver=$(pg_version)
    hba="/etc/postgresql/$ver/main/pg_hba.conf"
    [[ -f $hba ]] || die "cannot connect as postgres and $hba is missing"
    if ! grep -q '# dialectic stack.sh' "$hba"; then
        log "enabling trust auth for loopback in $hba"
        local tmp
        tmp=$(mktemp)
        {
            echo '# dialectic stack.sh: passwordless loopback for local dev'
            echo 'host all all 127.0.0.1/32 trust'
            echo 'host all all ::1/128 trust'
            cat "$hba"
        } >"$tmp"
        cat "$tmp" >"$hba" # keep owner/mode of the original file
        rm -f "$tmp"
    fi
    pg_ctlcluster --skip-systemctl-redirect "$ver" main reload 9>&- >&2
    wait_for "postgresql trust auth" 10 pg_query -c 'select 1' -o /dev/null
}

ensure_redis() {
    if ! redis_up; then
        log "starting redis-server"
        mkdir -p /var/lib/redis /var/log/redis
        redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
            --save "" --appendonly no --dir /var/lib/redis \
            --logfile /var/log/redis/ci.log 9>&- >&2
        mark_started redis
        wait_for redis 15 redis_up
    fi
    log "redis up on 127.0.0.1:$REDIS_PORT"
}

ensure_rabbitmq() {
    if ! amqp_up; then
        # The node may be running but still booting its listeners; starting
        # a second one would fail on the node name, so only start if dead.
        if ! rabbit_ping; then
            log "starting rabbitmq-server (takes a while)"
            rabbitmq-server -detached 9>&- >&2
            mark_started rabbitmq
            wait_for "rabbitmq node" 60 rabbit_ping
        fi
        wait_for "rabbitmq amqp listener" 60 amqp_up
    fi
    log "rabbitmq up on 127.0.0.1:$AMQP_PORT"
}

# ------------------------------------------------------------------- s3

s3s_fs_bin() {
    local bin="$S3S_FS_ROOT/bin/s3s-fs"
    [[ -x $bin && $(cat "$S3S_FS_ROOT/version" 2>/dev/null) == "$S3S_FS_VERSION" ]] || return 1
    echo "$bin"
}

install_s3s_fs() {
    local cargo
    cargo=$(command -v cargo 2>/dev/null || echo "$HOME/.cargo/bin/cargo")
    [[ -x $cargo ]] || die "s3s-fs missing and no cargo to install it"
    log "building s3s-fs $S3S_FS_VERSION from $S3S_FS_SRC (several minutes, once)"
    # Its own target dir: never touch the project's build.
    CARGO_TARGET_DIR="$STATE_DIR/s3s-fs-target" "$cargo" install --locked --force \
        --path "$S3S_FS_SRC" --features binary --root "$S3S_FS_ROOT" 9>&- >&2 \
        || die "building s3s-fs failed"
    echo "$S3S_FS_VERSION" >"$S3S_FS_ROOT/version"
}

# Pid from the pid file, only if it still is a running s3s-fs (guards
# against a recycled pid).
s3_pid() {
    local pid
    [[ -f $S3_PID_FILE ]] || return 1
    pid=$(<"$S3_PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == s3s-fs ]] || return 1
    echo "$pid"
}

# Fail fast (with the log) if the fresh s3s-fs died, e.g. port in use.
# Only liveness here: right after the fork, comm may still be setsid/nohup.
s3_started_ok() {
    if ! kill -0 "$(<"$S3_PID_FILE")" 2>/dev/null; then
        tail -n 20 "$S3_LOG" >&2
        die "s3s-fs exited; see $S3_LOG"
    fi
    s3_up
}

ensure_s3() {
    local running
    local stale=""
    if running=$(s3_pid); then
        if [[ $(cat "$S3_PID_FILE.version" 2>/dev/null) != "$S3S_FS_VERSION" ]]; then
            stale="it is not $S3S_FS_VERSION"
        elif [[ $(readlink "/proc/$running/cwd" 2>/dev/null) == *" (deleted)" ]]; then
            # s3s-fs resolves every object path against its working directory:
            # once that is gone (a removed checkout), every request fails.
            stale="its working directory was deleted"
        fi
    fi
    if [[ -n $stale ]]; then
        log "restarting s3s-fs (pid $running): $stale"
        kill "$running" 2>/dev/null || true
        wait_for "s3s-fs to stop" 15 bash -c "! kill -0 $running 2>/dev/null"
    fi
    if s3_up; then
        s3_pid >/dev/null || log "port $S3_PORT already in use by a process not started by stack.sh; using it as is"
    else
        local bin
        bin=$(s3s_fs_bin) || { install_s3s_fs; bin=$(s3s_fs_bin) || die "s3s-fs not found after install"; }
        mkdir -p "$S3_DATA_DIR" # s3s-fs canonicalizes the root, so it must exist
        log "starting $bin on $S3_HOST:$S3_PORT (data $S3_DATA_DIR, log $S3_LOG)"
        # No --domain: clients use path-style addressing. It runs in its state
        # directory, not the caller's, which may be a checkout removed later.
        pushd "$STATE_DIR" >/dev/null
        RUST_LOG=info setsid nohup "$bin" \
            --host "$S3_HOST" --port "$S3_PORT" \
            --access-key "$S3_ACCESS_KEY" --secret-key "$S3_SECRET_KEY" \
            "$S3_DATA_DIR" </dev/null >>"$S3_LOG" 2>&1 9>&- &
        # setsid does not fork here (we are no group leader), so $! is s3s-fs.
        echo "$!" >"$S3_PID_FILE"
        popd >/dev/null
        echo "$S3S_FS_VERSION" >"$S3_PID_FILE.version"
        wait_for s3s-fs 30 s3_started_ok
        s3_pid >/dev/null || die "pid in $S3_PID_FILE is not s3s-fs; \`down\` could not stop it"
    fi
    log "s3s-fs up on $S3_HOST:$S3_PORT"
}

ensure_boto3() {
    python3 -c 'import boto3' 2>/dev/null && return 0
    log "installing boto3 with pip"
    python3 -m pip install --quiet boto3 >&2
}

# Create the bucket and prove credentials + path-style access work.
ensure_bucket() {
    ensure_boto3
    S3_ENDPOINT="http://$S3_HOST:$S3_PORT" S3_BUCKET="$S3_BUCKET" \
        S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" S3_REGION="$S3_REGION" \
        python3 - <<'PY' || die "S3 bucket check failed against http://$S3_HOST:$S3_PORT"
import os, sys, time
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

env = os.environ
s3 = boto3.client(
    "s3",
    endpoint_url=env["S3_ENDPOINT"],
    region_name=env["S3_REGION"],
    aws_access_key_id=env["S3_ACCESS_KEY"],
    aws_secret_access_key=env["S3_SECRET_KEY"],
    config=Config(s3={"addressing_style": "path"}, connect_timeout=5,
                  read_timeout=30, retries={"max_attempts": 3}),
)
bucket = env["S3_BUCKET"]
try:
    s3.create_bucket(Bucket=bucket)
    print(f"[stack] created bucket {bucket}", file=sys.stderr)
except ClientError as e:
    if e.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
        raise

key = "_stack_check"
body = f"stack check {time.time()}".encode()
s3.put_object(Bucket=bucket, Key=key, Body=body)
got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
s3.delete_object(Bucket=bucket, Key=key)
if got != body:
    sys.exit(f"[stack] round trip mismatch: put {body!r}, got {got!r}")
print(f"[stack] bucket {bucket} ok (put/get/delete round trip)", file=sys.stderr)
PY
}

# ------------------------------------------------------------- database

ensure_db() {
    # Validated so it can be interpolated into SQL and URLs safely.
    [[ $DB_NAME =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "bad DIALECTIC_DB_NAME: $DB_NAME"
    if [[ $(pg_query -tAc "select 1 from pg_database where datname='$DB_NAME'") == 1 ]]; then
        log "database $DB_NAME exists"
    else
        log "creating database $DB_NAME"
        pg_query -c "create database \"$DB_NAME\""
    fi
}

# ------------------------------------------------------------- commands

cmd_up() {
    take_lock
    ensure_packages
    ensure_postgres
    ensure_redis
    ensure_rabbitmq
    ensure_s3
    ensure_bucket
    ensure_db
    log "stack is up (migrations not applied; run the project's migrate command)"
}

cmd_status() {
    local rc=0 name addr check state
    while read -r name addr check; do
        if "$check" </dev/null; then state=up; else state=down; rc=1; fi
        printf '%-9s %-16s %s\n' "$name" "$addr" "$state"
    done <<EOF
postgres $PG_HOST:$PG_PORT pg_up
redis 127.0.0.1:$REDIS_PORT redis_up
rabbitmq 127.0.0.1:$AMQP_PORT amqp_up
s3s-fs $S3_HOST:$S3_PORT s3_up
EOF
    return "$rc"
}

stop_s3() {
    local pid i
    if pid=$(s3_pid); then
        log "stopping s3s-fs (pid $pid)"
        kill "$pid" 2>/dev/null || true
        for ((i = 0; i < 15; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "s3s-fs did not exit; sending SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
    else
        log "s3s-fs: no running instance started by stack.sh"
    fi
    rm -f "$S3_PID_FILE"
}

cmd_down() {
    take_lock
    stop_s3
    if was_started rabbitmq; then
        log "stopping rabbitmq"
        rabbitmqctl stop 9>&- >&2 || log "rabbitmqctl stop failed"
        unmark_started rabbitmq
    fi
    if was_started redis; then
        log "stopping redis"
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
        unmark_started redis
    fi
    if was_started postgres; then
        log "stopping postgresql"
        pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main stop 9>&- >&2 ||
            log "pg_ctlcluster stop failed"
        unmark_started postgres
    fi
    log "down done (services not started by stack.sh left running)"
}

# Outage tests: stop a backing service and start it again later. Redis only:
# the others restart in place (`restart`), which the fault tests use.
cmd_stop() {
    take_lock
    case "${1:-}" in
    redis)
        log "stopping redis"
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
        wait_for "redis to stop" 15 bash -c "! redis-cli -h 127.0.0.1 -p $REDIS_PORT ping >/dev/null 2>&1"
        ;;
    *) die "stop what? redis (the others: restart)" ;;
    esac
}

cmd_start() {
    take_lock
    case "${1:-}" in
    redis) ensure_redis ;;
    *) die "start what? redis (the others: up)" ;;
    esac
}

# SIGKILL, then start again: no shutdown of any kind, so the server recovers
# from its own logs (Postgres replays its WAL, RabbitMQ its quorum queues').
cmd_kill() {
    take_lock
    case "${1:-}" in
    postgres)
        local datadir pid
        datadir="$(pg_lsclusters -h | awk -v v="$(pg_version)" '$1 == v && $2 == "main" {print $6}')"
        pid="$(head -n1 "$datadir/postmaster.pid" 2>/dev/null)" || die "no postmaster.pid under $datadir"
        log "SIGKILL postgres (postmaster $pid)"
        kill -9 "$pid"
        wait_for "the postmaster to die" 30 bash -c "! kill -0 $pid 2>/dev/null"
        # Backends notice their postmaster died and exit; the shared memory
        # they hold must be gone before a new postmaster can start.
        wait_for "postgres backends to exit" 30 bash -c "! pgrep -u postgres -f '^postgres: $(pg_version)/main' >/dev/null"
        pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start 9>&- >&2
        wait_for postgresql 60 pg_up
        ;;
    rabbitmq)
        local pid
        pid="$(rabbitmqctl -q eval 'os:getpid().' 2>/dev/null | tr -dc '0-9')"
        [[ -n $pid ]] || die "cannot find the rabbitmq node's pid"
        log "SIGKILL rabbitmq (beam $pid)"
        kill -9 "$pid"
        wait_for "rabbitmq to die" 30 bash -c "! kill -0 $pid 2>/dev/null"
        rabbitmq-server -detached 9>&- >&2
        wait_for "rabbitmq node" 90 rabbit_ping
        wait_for "rabbitmq amqp listener" 60 amqp_up
        ;;
    *) die "kill what? postgres or rabbitmq (the others: restart)" ;;
    esac
}

cmd_restart() {
    take_lock
    case "${1:-}" in
    postgres)
        log "restarting postgresql (fast: open connections are cut)"
        pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main restart -m fast 9>&- >&2
        wait_for postgresql 30 pg_up
        ;;
    redis)
        log "restarting redis"
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
        wait_for "redis to stop" 15 bash -c "! redis-cli -h 127.0.0.1 -p $REDIS_PORT ping >/dev/null 2>&1"
        ensure_redis
        ;;
    rabbitmq)
        # Stopping the app (not the node) closes every connection and keeps
        # the quorum queues' contents, as a broker restart does, in seconds.
        log "restarting the rabbitmq application"
        rabbitmqctl -q stop_app 9>&- >&2
        rabbitmqctl -q start_app 9>&- >&2
        wait_for "rabbitmq amqp listener" 60 amqp_up
        ;;
    s3)
        s3_pid >/dev/null || die "s3s-fs was not started by stack.sh; cannot restart it"
        stop_s3
        ensure_s3
        ;;
    *) die "restart what? postgres, redis, rabbitmq or s3" ;;
    esac
}

# The local bootstrap API key: made once per machine, kept in the state dir,
# accepted by the gateway for the seeded admin user (gateway.bootstrap_key) and
# sent by the CLI (DIALECTIC_API_KEY). Local use only; production keys come
# from `dialecticd admin create-key`.
bootstrap_key() {
    state_secret bootstrap-key dlk_local_
}

# The secret local services sign their calls to each other with
# (internal.token_secret), so services run as separate processes agree.
internal_secret() {
    state_secret internal-token-secret ""
}

# A random secret made once per machine and kept in the state dir: $1 names
# the file, $2 prefixes the value.
state_secret() {
    local file="$STATE_DIR/$1" tmp
    if [ ! -s "$file" ]; then
        mkdir -p "$STATE_DIR"
        tmp="$(mktemp "$STATE_DIR/$1.XXXXXX")"
        printf '%s%s\n' "$2" "$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" >"$tmp"
        chmod 600 "$tmp"
        # A concurrent first call may have won: keep whichever value landed first.
        if [ -s "$file" ]; then rm -f "$tmp"; else mv -f "$tmp" "$file"; fi
    fi
    cat "$file"
}

cmd_env() {
    local k v key internal
    key="$(bootstrap_key)"
    internal="$(internal_secret)"
    while IFS='=' read -r k v; do
        printf 'export %s=%q\n' "$k" "$v"
    done <<EOF
DIALECTIC_DATABASE__URL=postgres://postgres@$PG_HOST:$PG_PORT/$DB_NAME
DIALECTIC_AMQP__URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f
DIALECTIC_REDIS__URL=redis://127.0.0.1:$REDIS_PORT
DIALECTIC_S3__ENDPOINT=http://$S3_HOST:$S3_PORT
DIALECTIC_S3__BUCKET=$S3_BUCKET
DIALECTIC_S3__ACCESS_KEY=$S3_ACCESS_KEY
DIALECTIC_S3__SECRET_KEY=$S3_SECRET_KEY
DIALECTIC_S3__REGION=$S3_REGION
DIALECTIC_GATEWAY__BOOTSTRAP_KEY=$key
DIALECTIC_API_KEY=$key
DIALECTIC_INTERNAL__TOKEN_SECRET=$internal
EOF
}

main() {
    case "${1:-up}" in
    up) cmd_up ;;
    status) cmd_status ;;
    down) cmd_down ;;
    env) cmd_env ;;
    restart) cmd_restart "${2:-}" ;;
    kill) cmd_kill "${2:-}" ;;
    stop) cmd_stop "${2:-}" ;;
    start) cmd_start "${2:-}" ;;
    -h | --help | help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) die "unknown command '$1' (expected up, status, down, env, restart, kill, stop or start)" ;;
    esac
}

main "$@"
