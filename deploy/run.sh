#!/usr/bin/env bash
# The main job: set everything up, start all six services in one process, run a
# whole session on a sample with the simulated models, advancing stage by
# stage until it is ready for review, then show the rendered documents and a
# summary per stage.
#
#   deploy/run.sh [--local-model] [--pipeline dialectic|essay|contract_stack] [extra `dialectic run` flags]
#
# --local-model: run on a real model instead, the llama.cpp server with
#   SmolLM2-135M-Instruct on loopback (deploy/local-model.sh: built once into
#   ~/.cache, then reused); registered as `smollm2` with `dialecticd model add`.
#
# dialectic (default): thesis → antithesis → synthesis → parenthesis →
#   paralysis on deploy/samples/dialectic-prompt.md with two models.
# essay: the essay pipeline (seed 003) on deploy/samples/essay-prompt.md.
# contract_stack: the contract-stack analysis (seed 004) over the base
#   agreement and two amendments in deploy/samples/contract-stack/, then the
#   blackboard its steps filled.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
deploy/stack.sh up
eval "$(deploy/stack.sh env)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dialectic-target}"
STATE_DIR="${DIALECTIC_STATE_DIR:-$HOME/.local/share/dialectic}"
mkdir -p "$STATE_DIR"

LOCAL_MODEL=
PIPELINE=dialectic
while [ "$#" -gt 0 ]; do
    case "$1" in
        --local-model) LOCAL_MODEL=1; shift ;;
        --pipeline)
            PIPELINE="${2:?--pipeline needs a name: dialectic, essay or contract_stack}"
            shift 2
            ;;
        *) break ;;
    esac
done
if [ -n "$LOCAL_MODEL" ]; then
    deploy/local-model.sh up
    eval "$(deploy/local-model.sh env)"
fi

cargo build --locked -p dialecticd -p dialectic-cli
BIN="$CARGO_TARGET_DIR/debug"

"$BIN/dialecticd" migrate
if [ -n "$LOCAL_MODEL" ]; then
    # One call at a time: the server answers one request at a time anyway,
    # and queued calls would spend their first-byte timeout waiting. The
    # output limit goes in max_tokens: llama-cpp-python ignores
    # max_completion_tokens and would write until its context is full.
    "$BIN/dialecticd" model add "$DIALECTIC_LOCAL_MODEL_NAME" --provider openai-compatible \
        --base-url "$DIALECTIC_LOCAL_MODEL_URL" --context-window "$DIALECTIC_LOCAL_MODEL_CONTEXT" \
        --max-output 1024 --structured-output json_object_schema --max-concurrency 1 \
        --token-limit-param max_tokens --display-name "Local model (llama.cpp)"
fi

LOG="$STATE_DIR/dialecticd.log"
"$BIN/dialecticd" run >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT
echo "dialecticd running (pid $SERVER_PID, log $LOG)"

SAMPLES=deploy/samples
case "$PIPELINE" in
    dialectic)
        NAME="Tool library"
        SAMPLE=(--prompt-file "$SAMPLES/dialectic-prompt.md")
        DEFAULT_MODELS=(--model simulated --model simulated-b)
        ;;
    essay)
        NAME="Broadband essay"
        SAMPLE=(--prompt-file "$SAMPLES/essay-prompt.md")
        DEFAULT_MODELS=(--model simulated)
        ;;
    contract_stack)
        NAME="Harbour Street lease"
        SAMPLE=(--prompt-file "$SAMPLES/contract-stack/prompt.md")
        for doc in "$SAMPLES"/contract-stack/0*.md; do
            SAMPLE+=(--doc "$doc")
        done
        DEFAULT_MODELS=(--model simulated)
        ;;
    *)
        echo "unknown pipeline $PIPELINE: use dialectic, essay or contract_stack" >&2
        exit 2
        ;;
esac
if [ -n "$LOCAL_MODEL" ]; then
    DEFAULT_MODELS=(--model "$DIALECTIC_LOCAL_MODEL_NAME")
fi
if [ "$#" -eq 0 ]; then
    set -- "${DEFAULT_MODELS[@]}"
fi
OUT="$STATE_DIR/last-run.txt"
"$BIN/dialectic" --wait-for-gateway 60s run --name "$NAME" --pipeline "$PIPELINE" "${SAMPLE[@]}" \
    "$@" | tee "$OUT"

PROJECT_ID=$(grep -Eo 'project[: ]+[0-9a-f-]{36}' "$OUT" | grep -Eo '[0-9a-f-]{36}' | head -n1 || true)
if [ -n "$PROJECT_ID" ]; then
    echo
    echo "S3 objects of project $PROJECT_ID (bucket $DIALECTIC_S3__BUCKET, as any S3 client sees them):"
    python3 - "$PROJECT_ID" <<'PY'
import os, sys
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["DIALECTIC_S3__ENDPOINT"],
                  aws_access_key_id=os.environ["DIALECTIC_S3__ACCESS_KEY"],
                  aws_secret_access_key=os.environ["DIALECTIC_S3__SECRET_KEY"],
                  region_name=os.environ["DIALECTIC_S3__REGION"],
                  config=Config(s3={"addressing_style": "path"}))
paginator = s3.get_paginator("list_objects_v2")
for page in paginator.paginate(Bucket=os.environ["DIALECTIC_S3__BUCKET"], Prefix=f"projects/{sys.argv[1]}/"):
    for obj in page.get("Contents", []):
        print(f"  {obj['Size']:>7}  {obj['Key']}")
PY
fi

echo
sed -n '/^stage  /,/^session /p' "$OUT"

SESSION_ID=$(grep -Eo '^session [0-9a-f-]{36}' "$OUT" | grep -Eo '[0-9a-f-]{36}' | head -n1 || true)
if [ "$PIPELINE" = contract_stack ] && [ -n "$SESSION_ID" ]; then
    echo
    echo "Blackboard of session $SESSION_ID:"
    "$BIN/dialectic" blackboard --session "$SESSION_ID"
fi
