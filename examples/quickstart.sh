#!/usr/bin/env sh
# The main job on the bundled example data: fit a map, apply it in a pipe, evaluate it.
set -eu
cd "$(dirname "$0")/data"
out="${TMPDIR:-/tmp}/calib-quickstart"
mkdir -p "$out"
calib fit --method isotonic cal.csv -o "$out/isotonic.json"
calib fit --method logistic cal.parquet -o "$out/logistic.parquet"
cat test.csv | calib apply "$out/isotonic.json" - | calib evaluate - --prob-col score --prob-col calibrated --field-col field
calib evaluate test.parquet --map "$out/isotonic.json" --map "$out/logistic.parquet" --field-col field
