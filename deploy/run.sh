#!/usr/bin/env bash
# The main job: set everything up, start all six services in one process, run a
# whole session (thesis → antithesis → synthesis → parenthesis → paralysis) on the
# sample prompt with the simulated models, advancing stage by stage until it is
# ready for review, then show the rendered documents and a summary per stage.
#
#   deploy/run.sh [extra `dialectic run` flags, e.g. --model simulated]
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
deploy/stack.sh up
eval "$(deploy/stack.sh env)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dialectic-target}"
STATE_DIR="${DIALECTIC_STATE_DIR:-$HOME/.local/share/dialectic}"
mkdir -p "$STATE_DIR"

cargo build --locked -p dialecticd -p dialectic-cli
BIN="$CARGO_TARGET_DIR/debug"

"$BIN/dialecticd" migrate

LOG="$STATE_DIR/dialecticd.log"
"$BIN/dialecticd" run >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT
echo "dialecticd running (pid $SERVER_PID, log $LOG)"

if [ "$#" -eq 0 ]; then
    set -- --model simulated --model simulated-b
fi
OUT="$STATE_DIR/last-run.txt"
"$BIN/dialectic" run --name "Tool library" --prompt-file deploy/sample-prompt.md \
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
