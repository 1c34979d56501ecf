#!/usr/bin/env bash
# The generated API clients in clients/ (docs/clients.md).
# Usage:
#   deploy/clients.sh install         the pinned toolchains, once, under ~/.cache/dialectic-clients:
#                                     node_modules from clients/typescript/package-lock.json
#                                     (buf, protoc-gen-es, esbuild, tsc and the client's runtime),
#                                     a virtualenv from clients/python/requirements.txt (grpcio,
#                                     grpcio-tools, protobuf); a rerun with unchanged pins does nothing
#   deploy/clients.sh env             prints the exports the tests read (eval "$(deploy/clients.sh env)")
#   deploy/clients.sh generate        writes clients/python/gen and clients/typescript/gen from
#                                     proto/ with buf.gen.yaml
#   deploy/clients.sh check           generates into a temporary directory and fails when the
#                                     checked-in code differs; type-checks the TypeScript (CI)
#   deploy/clients.sh web [DIR]       bundles the example page (examples/web) into DIR
#                                     (default examples/web/dist) with esbuild
#   deploy/clients.sh bundle-example FILE
#                                     bundles clients/typescript/example.ts for node into FILE
# DIALECTIC_CLIENTS_CACHE moves the toolchains elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${DIALECTIC_CLIENTS_CACHE:-$HOME/.cache/dialectic-clients}"
node_dir="$cache/node"
venv="$cache/venv"
lock=clients/typescript/package-lock.json
requirements=clients/python/requirements.txt

say() { echo "[clients] $*" >&2; }

# A stamp is the hash of the pins and of the interpreter they were installed
# for; the toolchain is reinstalled only when it changes.
stamp_of() { { cat "$1"; "$2" --version; } | sha256sum | cut -d' ' -f1; }

install_node() {
  command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
  local want
  want="$(stamp_of "$lock" node)"
  if [ "$(cat "$node_dir/.stamp" 2>/dev/null)" != "$want" ]; then
    say "installing the TypeScript toolchain into $node_dir"
    mkdir -p "$node_dir"
    rm -f "$node_dir/.stamp"
    cp clients/typescript/package.json "$lock" "$node_dir/"
    npm ci --prefix "$node_dir" --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null
    echo "$want" > "$node_dir/.stamp"
  fi
  # Editors and tsc resolve the client's imports through this link (gitignored).
  ln -sfn "$node_dir/node_modules" clients/typescript/node_modules
}

install_python() {
  local want
  want="$(stamp_of "$requirements" python3)"
  if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
    say "installing the Python toolchain into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    echo "$want" > "$venv/.stamp"
  fi
}

install() {
  mkdir -p "$cache"
  # One installer at a time (deploy/test.sh installs in the background while
  # a test may ask for the same toolchain).
  exec 9>"$cache/.lock"
  flock 9
  install_node
  install_python
  flock -u 9
}

# buf with the pinned plugins first on PATH: protoc-gen-es, and the
# virtualenv's python3 for clients/tools/protoc_builtin.py.
run_buf() {
  PATH="$venv/bin:$node_dir/node_modules/.bin:$PATH" buf generate --template buf.gen.yaml "$@"
}

esbuild() {
  # NODE_PATH: examples/web imports the client from outside clients/typescript.
  NODE_PATH="$node_dir/node_modules" "$node_dir/node_modules/.bin/esbuild" --log-level=warning "$@"
}

check() {
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  run_buf -o "$tmp"
  local dir stale=0
  for dir in clients/python/gen clients/typescript/gen; do
    if ! diff -r -x __pycache__ "$dir" "$tmp/$dir" > "$tmp/diff.txt"; then
      # Lines cut short: a _pb2.py holds its descriptor on one line of many kB.
      cut -c1-160 "$tmp/diff.txt" | head -40
      echo "$dir is not what buf.gen.yaml generates from proto/: run deploy/clients.sh generate and commit it" >&2
      stale=1
    fi
  done
  [ "$stale" = 0 ] || return 1
  echo "ok   clients/python/gen and clients/typescript/gen are what proto/ generates"
  "$node_dir/node_modules/.bin/tsc" -p clients/typescript
  echo "ok   tsc: the TypeScript client, its example and examples/web type-check"
}

case "${1:-}" in
  install) install ;;
  env)
    echo "export DIALECTIC_CLIENTS_PYTHON=$venv/bin/python3"
    ;;
  generate)
    install
    run_buf
    echo "generated clients/python/gen and clients/typescript/gen"
    ;;
  check)
    install
    check
    ;;
  web)
    install
    out="${2:-examples/web/dist}"
    mkdir -p "$out"
    cp examples/web/index.html "$out/"
    esbuild examples/web/src/app.ts --bundle --format=iife --target=es2022 --outfile="$out/app.js"
    echo "bundled the page into $out"
    ;;
  bundle-example)
    [ -n "${2:-}" ] || { echo "usage: $0 bundle-example FILE" >&2; exit 2; }
    install
    esbuild clients/typescript/example.ts --bundle --platform=node --format=esm --target=node20 --outfile="$2"
    ;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: $0 install | env | generate | check | web [DIR] | bundle-example FILE" >&2; exit 2 ;;
esac
