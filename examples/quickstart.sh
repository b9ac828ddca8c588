#!/usr/bin/env sh
# The main job on the bundled example data: fit maps, apply one in a pipe, evaluate them;
# then the same path for K classes (scikit-learn's digits, examples/data/make_digits.py).
set -eu
cd "$(dirname "$0")/data"
out="${TMPDIR:-/tmp}/calib-quickstart"
mkdir -p "$out"
calib fit --method isotonic cal.csv -o "$out/isotonic.json"
calib fit --method bayes-iso cal.csv -o "$out/bayes-iso.json"
calib fit --method field-aware --field-col field cal.parquet -o "$out/field-aware.parquet"
cat test.csv | calib apply "$out/isotonic.json" - | calib evaluate - --prob-col score --prob-col calibrated --field-col field
calib evaluate test.parquet --map "$out/isotonic.json" --map "$out/bayes-iso.json" --map "$out/field-aware.parquet" --field-col field
calib fit --score-cols 'p_*' --method temperature digits_scores.csv -o "$out/digits.json"
cat digits_test.csv | calib apply "$out/digits.json" - | calib evaluate - --prob-cols 'calibrated_*' --fail-above top-label-ece=0.03
calib compare digits_scores.csv --score-cols 'p_*' -m temperature -m vector -m dirichlet -m isotonic
