#!/usr/bin/env sh
# The main job on the bundled example data: ask which method calibrates the scores, fit it,
# apply the map in a pipe, evaluate; then the same path for K classes (scikit-learn's
# digits, examples/data/make_digits.py). `calib compare` recommends ilps for cal.csv and
# temperature for the digits.
set -eu
cd "$(dirname "$0")/data"
out="${TMPDIR:-/tmp}/calib-quickstart"
mkdir -p "$out"
calib compare cal.csv
calib fit --method ilps cal.csv -o "$out/ilps.json"
calib fit --method bayes-iso cal.csv -o "$out/bayes-iso.json"
calib fit --method field-aware --field-col field cal.parquet -o "$out/field-aware.parquet"
cat test.csv | calib apply "$out/ilps.json" - | calib evaluate - --prob-col score --prob-col calibrated --field-col field
calib evaluate test.parquet --map "$out/ilps.json" --map "$out/bayes-iso.json" --map "$out/field-aware.parquet" --field-col field
calib compare digits_scores.csv --score-cols 'p_*'
calib fit --score-cols 'p_*' --method temperature digits_scores.csv -o "$out/digits.json"
cat digits_test.csv | calib apply "$out/digits.json" - | calib evaluate - --prob-cols 'calibrated_*' --fail-above top-label-ece=0.03
