#!/usr/bin/env bash
# Sets up everything the tests need (Postgres, RabbitMQ, Redis, S3 server) and
# runs the whole suite. Tests isolate themselves: a fresh database, bucket and
# queue prefix per test, so nothing depends on what an earlier run left behind.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
deploy/stack.sh up
eval "$(deploy/stack.sh env)"
# The real local model (llama.cpp server + SmolLM2-135M) for the tests that
# run shipped pipelines on it; built once into ~/.cache, then reused. Its
# one-time build runs beside the checks below and is waited for before the tests.
LOCAL_MODEL_PID=
if [ "${DIALECTIC_SKIP_LOCAL_MODEL:-}" != 1 ]; then
    deploy/local-model.sh up &
    LOCAL_MODEL_PID=$!
fi
# Headless Chromium for the browser test (tests/tests/browser.rs), from
# Debian's packages; DIALECTIC_SKIP_BROWSER=1 skips both.
if [ "${DIALECTIC_SKIP_BROWSER:-}" != 1 ] && ! command -v chromium >/dev/null; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "[test] installing chromium (Debian package) for the browser test"
    $SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
        || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; } \
        || { echo "cannot install chromium; set DIALECTIC_SKIP_BROWSER=1 to skip the browser test" >&2; exit 1; }
fi
# The generated clients' toolchains (deploy/clients.sh: buf, protoc-gen-es,
# esbuild, tsc, and a virtualenv with grpcio) for the clients check and
# tests/tests/clients.rs; installed once into ~/.cache/dialectic-clients beside
# the checks below. DIALECTIC_SKIP_CLIENTS=1 skips both.
CLIENTS_PID=
if [ "${DIALECTIC_SKIP_CLIENTS:-}" != 1 ]; then
    deploy/clients.sh install &
    CLIENTS_PID=$!
fi
# Reuse one build directory across clones of this repository on the same machine.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dialectic-target}"

# The Helm chart: lint, render, Kubernetes schema validation, values schema, checkov.
deploy/chart-check.sh
# The protos: buf lint, buf breaking against proto/baseline.json (docs/proto.md).
deploy/proto-check.sh
# The checked-in clients are what proto/ generates, and type-check.
if [ -n "$CLIENTS_PID" ]; then
    wait "$CLIENTS_PID" || { echo "the client toolchains did not install (deploy/clients.sh install)" >&2; exit 1; }
    deploy/clients.sh check
    eval "$(deploy/clients.sh env)"
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if [ -n "$LOCAL_MODEL_PID" ]; then
    wait "$LOCAL_MODEL_PID" || { echo "the local model server did not start (deploy/local-model.sh up)" >&2; exit 1; }
    eval "$(deploy/local-model.sh env)"
fi
cargo test --workspace --locked
# A short fuzz run of every cargo-fuzz target (deploy/fuzz.sh SECONDS for a long one).
deploy/fuzz.sh "${FUZZ_SECONDS:-10}"
