#!/usr/bin/env bash
# The release gate of a team's own system on its own suite, as CI runs it (docs/own-suite.md,
# step 7; deploy/ci/github-actions.yml runs this file). Exit 0 when the verdict passes, 1 when it
# is blocked (by default also a drop the suite cannot tell from the band; under
# statistics.inconclusive: block_likely only a likely one), 2 on bad input (one line).
#   RAGEVAL_SUITE   the suite (data/suites/<name>), required
#   RAGEVAL_SYSTEM  one system of data/systems.yaml (job evaluate_<system>); default: every
#                   system (job evaluate_dataset)
#   RAGEVAL_STORAGE the storage folder CI caches between runs (default data/storage)
set -euo pipefail
cd "$(dirname "$0")/../.."
suite=${RAGEVAL_SUITE:?set RAGEVAL_SUITE to the suite to gate on (data/suites/<name>)}
bash scripts/setup
export HF_HUB_OFFLINE=1
data=$(.venv/bin/python -m rageval_pipeline.core.settings --folder data)
# Refuse a broken suite, systems file or policy before anything runs (exit 2, one line).
.venv/bin/rageval validate "$data/suites/$suite" "$data/systems.yaml" "$data/gate.yaml"
if [ -n "${RAGEVAL_SYSTEM:-}" ]; then
  export RAGEVAL_JOB="evaluate_$RAGEVAL_SYSTEM"
fi
# `dagster job execute` through scripts/evaluate: the verdict per system, where the reports
# are, and last the verdict line; its exit status is the job's.
exec bash scripts/evaluate --description "${GITHUB_SHA:-${CI_COMMIT_SHA:-ci}}" "$suite"
