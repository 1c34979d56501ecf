#!/usr/bin/env bash
# Offline checks of the Helm chart (part of deploy/test.sh, so of CI):
#   the chart's files match what its version was recorded with (--update-digest
#   records them after a version bump), the README's values table is the one
#   values.schema.json generates (--update-readme writes it), helm lint --strict,
#   render with default / production / every-option / derived-keys / some-disabled /
#   EKS / quickstart / quickstart-mirror values (twice each: the renders must be byte-identical),
#   validate every manifest against the Kubernetes schemas, prove that
#   values.schema.json rejects wrong-typed values, and run checkov on the
#   rendered manifests (skips explained in helm/dialectic/.checkov.yaml).
# Needs only python3 (with venv) and PyPI: helm-python-sdk (Helm 4 as a
# library, no helm binary), kubernetes-validate, checkov.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${DIALECTIC_CHART_VENV:-$HOME/.cache/dialectic-chart-venv}"
stamp="$venv/.installed-v1"
if [ ! -f "$stamp" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian/Ubuntu ship venv separately.
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check \
    'helm-python-sdk==0.2.2' 'kubernetes-validate==1.37.0' 'checkov==3.3.30'
  touch "$stamp"
fi

# After bumping Chart.yaml's version: record the chart's files for that version
# (helm/dialectic/.chart-digest; the check below fails when they change and the
# version does not).
# --update-readme: write the values table (generated from values.schema.json's
# descriptions) into helm/dialectic/README.md. Both may be given; the table first.
if [ "${1:-}" = --update-digest ] || [ "${1:-}" = --update-readme ]; then
  exec "$venv/bin/python" deploy/chart_check.py "$@"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$venv/bin/python" deploy/chart_check.py "$out"

# (The quickstart manifests are rendered, validated and checked above but not
# scanned: their Postgres, RabbitMQ, Redis and aws-cli are third-party images by
# tag, for evaluation only.)
for values in default production every-option derived-keys eks; do
  extra=()
  if [ "$values" = default ] || [ "$values" = derived-keys ]; then
    # The defaults cannot know the digest of the image an operator builds, so
    # they name a tag (CKV_K8S_43) and pull it IfNotPresent (CKV_K8S_15, which
    # passes for digests). Production values pin a digest and pass both checks.
    # (A --skip-check flag replaces the config file's list, so it repeats CKV_K8S_35.)
    extra=(--skip-check CKV_K8S_35,CKV_K8S_43,CKV_K8S_15)
  fi
  # --skip-download: offline; --quiet prints failed checks only; findings exit non-zero.
  if ! "$venv/bin/checkov" --config-file helm/dialectic/.checkov.yaml --skip-download \
      "${extra[@]}" -d "$out/$values" > "$out/checkov-$values.txt" 2>&1; then
    cat "$out/checkov-$values.txt"
    echo "checkov: findings in the $values manifests" >&2
    exit 1
  fi
  echo "ok   checkov ($values manifests): $(grep -o 'Passed checks: [0-9]*, Failed checks: [0-9]*, Skipped checks: [0-9]*' "$out/checkov-$values.txt" || echo 'no failed checks')"
done
# The image definition too (its one skip is explained inline in the Dockerfile).
if ! "$venv/bin/checkov" --skip-download --quiet --compact --framework dockerfile \
    -f deploy/Dockerfile > "$out/checkov-dockerfile.txt" 2>&1; then
  cat "$out/checkov-dockerfile.txt"
  echo "checkov: findings in deploy/Dockerfile" >&2
  exit 1
fi
echo "ok   checkov (deploy/Dockerfile): $(grep -o 'Passed checks: [0-9]*, Failed checks: [0-9]*, Skipped checks: [0-9]*' "$out/checkov-dockerfile.txt")"
echo "chart-check: all passed"
