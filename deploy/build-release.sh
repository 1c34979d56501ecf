#!/usr/bin/env bash
# Builds the release binaries that the container image ships, exactly as the
# Dockerfile's build stage does (it runs this script), so a machine without a
# Docker engine (CI, a developer's laptop) produces the same binaries.
#
#   deploy/build-release.sh [OUT_DIR]      # default: dist/
#
# OUT_DIR receives dialecticd (every service, chosen by argument, plus
# `migrate`), dialectic (the CLI, for `admin dlq` from inside the cluster) and
# s3s-fs (deploy/s3s-fs: the S3 server the Helm chart's quickstart runs).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-dist}"
# --locked: the image must be built from the versions reviewed in Cargo.lock.
cargo build --release --locked -p dialecticd -p dialectic-cli
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$out"
for bin in dialecticd dialectic; do
  install -m 0755 "$target_dir/release/$bin" "$out/$bin"
done
# s3s-fs is its own workspace with its own Cargo.lock: built apart, into a target
# directory of its own, so it never touches the project's build.
CARGO_TARGET_DIR="$target_dir/s3s-fs" cargo build --release --locked \
  --manifest-path deploy/s3s-fs/Cargo.toml --features binary --bin s3s-fs
install -m 0755 "$target_dir/s3s-fs/release/s3s-fs" "$out/s3s-fs"
echo "release binaries in $out:"
ls -l "$out"
