#!/usr/bin/env bash
# Checks of the protos in proto/ (part of deploy/test.sh, so of CI; docs/proto.md):
#   buf lint      STANDARD rules; the documented exceptions are in proto/buf.yaml
#   buf breaking  wire and JSON compatibility (WIRE_JSON, plus no deleted RPC or
#                 service) against the committed baseline proto/baseline.json
#   baseline      proto/baseline.json describes the protos as they are, so the
#                 next change is compared with this one
# Usage:
#   deploy/proto-check.sh           check; any finding exits non-zero
#   deploy/proto-check.sh --update  rewrite the baseline after a compatible change
#                                   (refused while buf breaking finds a break)
#   deploy/proto-check.sh --accept  rewrite the baseline although buf breaking finds
#                                   a break: an intentional breaking change. Commit
#                                   proto/baseline.json with it; its diff shows the
#                                   break in review.
# Needs only npm (buf ships in the npm package @bufbuild/buf; installed with
# apt-get when missing) and python3 (formats the baseline one element a line).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=check
case "${1:-}" in
  "") ;;
  --update) mode=update ;;
  --accept) mode=accept ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--update | --accept]" >&2; exit 2 ;;
esac

BUF_VERSION=1.75.0
tools="${DIALECTIC_TOOLS_DIR:-$HOME/.cache/dialectic-tools}"
buf="$tools/node_modules/.bin/buf"
if [ "$("$buf" --version 2>/dev/null || true)" != "$BUF_VERSION" ]; then
  if ! command -v npm >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  fi
  npm install --prefix "$tools" --save-exact --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@bufbuild/buf@$BUF_VERSION" >/dev/null
  [ "$("$buf" --version)" = "$BUF_VERSION" ] || { echo "buf $BUF_VERSION did not install" >&2; exit 1; }
fi

baseline=proto/baseline.json
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The image of proto/ as it is: descriptors only (no comments or line numbers,
# so editing a comment leaves the baseline alone), with the imported
# google/protobuf files, formatted one field, value or method a line so that a
# diff of the baseline names what changed.
build_image() {
  "$buf" build proto --exclude-source-info -o "$tmp/image.json"
  python3 - "$tmp/image.json" "$1" <<'PY'
import json, sys

def fmt(v, ind):
    flat = lambda x: not isinstance(x, (dict, list)) or not x
    if isinstance(v, dict) and v and not all(flat(x) for x in v.values()):
        items = [f'{" " * (ind + 1)}{json.dumps(k)}: {fmt(x, ind + 1)}' for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    if isinstance(v, list) and v and not all(flat(x) for x in v):
        items = [" " * (ind + 1) + fmt(x, ind + 1) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + " " * ind + "]"
    return json.dumps(v, ensure_ascii=False)

with open(sys.argv[1], encoding="utf-8") as f:
    image = json.load(f)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(fmt(image, 0) + "\n")
PY
}

if ! "$buf" lint proto; then
  echo "buf lint: findings above (rules and exceptions: proto/buf.yaml, docs/proto.md)" >&2
  exit 1
fi
echo "ok   buf lint (STANDARD, exceptions in proto/buf.yaml)"

build_image "$tmp/current.json"
if [ ! -f "$baseline" ]; then
  if [ "$mode" = check ]; then
    echo "$baseline is missing: deploy/proto-check.sh --update records it" >&2
    exit 1
  fi
  cp "$tmp/current.json" "$baseline"
  echo "recorded $baseline"
  exit 0
fi

if ! "$buf" breaking proto --against "$baseline" > "$tmp/breaking.txt" 2>&1; then
  cat "$tmp/breaking.txt"
  if [ "$mode" != accept ]; then
    echo "buf breaking: the changes above break clients of the last recorded API ($baseline)." >&2
    echo "  Keep the old fields/RPCs (reserve what you delete), or, if the break is intended," >&2
    echo "  run deploy/proto-check.sh --accept and commit $baseline with the change (docs/proto.md)." >&2
    exit 1
  fi
  cp "$tmp/current.json" "$baseline"
  echo "accepted: the breaking changes above are now in $baseline; commit it with the change"
  exit 0
fi
echo "ok   buf breaking (WIRE_JSON, RPC_NO_DELETE, PACKAGE_SERVICE_NO_DELETE) against $baseline"

if ! cmp -s "$tmp/current.json" "$baseline"; then
  if [ "$mode" = check ]; then
    diff -u "$baseline" "$tmp/current.json" | head -40 || true
    echo "$baseline is out of date: proto/ changed compatibly since it was recorded." >&2
    echo "  Run deploy/proto-check.sh --update and commit $baseline with the change, so the" >&2
    echo "  next change is checked against this one (a field added now and deleted later is a break)." >&2
    exit 1
  fi
  cp "$tmp/current.json" "$baseline"
  echo "updated $baseline (compatible changes only); commit it with the change"
  exit 0
fi
echo "ok   $baseline is current"
echo "proto-check: all passed"
