#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ (JSON sanitizer, storage-key
# deconstructor, recipe DAG validation, queue-message decoding, PDF and DOCX
# conversion).
#   deploy/fuzz.sh            short smoke run (what deploy/test.sh does): 15 s per target
#   deploy/fuzz.sh 600        the long run: 10 minutes per target
#   FUZZ_TARGETS="recipe_dag" deploy/fuzz.sh 60
# cargo-fuzz needs nightly's -Z flags; RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them. Sanitizer: none by default (the targets are safe Rust,
# so ASan mostly costs speed); FUZZ_SANITIZER=address turns it on.
# New inputs found go to a work corpus under the target directory; the
# committed seed corpora in fuzz/corpus are only read. A crash leaves its input
# in fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-15}"
targets="${FUZZ_TARGETS:-json_sanitizer path_deconstruct recipe_dag queue_message convert_pdf convert_docx}"
sanitizer="${FUZZ_SANITIZER:-none}"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/dialectic-fuzz-target}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked --version 0.13.2
fi

cd fuzz
cargo fuzz build --sanitizer "$sanitizer" 2>&1 | tail -n 3
for target in $targets; do
  work="$CARGO_TARGET_DIR/corpus/$target"
  mkdir -p "$work"
  log="$CARGO_TARGET_DIR/fuzz-$target.log"
  # -timeout: one input running over 10 s counts as a hang (a finding).
  if ! cargo fuzz run --sanitizer "$sanitizer" "$target" "$work" "corpus/$target" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz target $target failed: see fuzz/artifacts/$target and $log" >&2
    exit 1
  fi
  runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  printf 'fuzz %-18s %12s executions in %ss, no crash, no hang\n' "$target" "${runs:-?}" "$seconds"
done
