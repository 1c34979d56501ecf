#!/usr/bin/env bash
# The whole comparison in one command: dialectic's ladder (sessions x models at
# 0 ms and 1 s simulated model latency), the Celery peer on the same rungs, and
# the machine's own limits (pgbench replaying one job's transactions, a raw
# RabbitMQ confirm/ack loop); prints the table and writes bench-results.json.
#
#   deploy/bench.sh              # default ladder 10,100,1000 (under 15 min on 2 cores)
#   deploy/bench.sh --quick      # ladder 10,50, bounds for 5 s: about 5 minutes on 2 cores
#   deploy/bench.sh --ladder 10,100 --latencies 1000 --models 2   # any dialectic-bench flag
#   BENCH_NO_PEER=1 deploy/bench.sh --quick   # without the Celery peer
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
deploy/stack.sh up
eval "$(deploy/stack.sh env)"
command -v pgbench >/dev/null || { apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null || true; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dialectic-target}"
cargo build --release --locked -p dialectic-e2e --bin dialectic-bench --bin chaos-service

args=()
if [[ "${1:-}" == "--quick" ]]; then
  shift
  args+=(--ladder 10,50 --bound-seconds 5)
fi

if [[ -z "${BENCH_NO_PEER:-}" ]]; then
  venv="${DIALECTIC_BENCH_VENV:-$HOME/.cache/dialectic-bench-venv}"
  stamp="$venv/.installed-v1"
  if [[ ! -f "$stamp" ]]; then
    if ! python3 -m venv "$venv" 2>/dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check -r bench/peers/celery/requirements.txt
    touch "$stamp"
  fi
  args+=(--peer bench/peers/celery/peer.py --python "$venv/bin/python")
fi

exec "$CARGO_TARGET_DIR/release/dialectic-bench" --out "${BENCH_OUT:-bench-results.json}" "${args[@]}" "$@"
