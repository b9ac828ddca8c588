"""Everything `calib evaluate` does, in one package.

- `metrics`: the metric definitions (log-loss, Brier, AUC, ECE/MCE, CalBin, slope and
  intercept, Spiegelhalter, Field-ECE/RCE) on rows and on a distribution of p;
  `kernels`: their chunked passes (the Newton fit of the slope is `calibcli.numeric.newton`).
- `state`: the mergeable evaluation state and `compute_all` (every metric of rows);
  `builder`: streams batches into a state.
- `kclass_metrics`: the K-class metrics (log-loss, Brier, accuracy, top-label and classwise
  ECE, macro one-vs-rest AUC); `kclass_state`: their mergeable state; `kclass_evaluate`:
  the driver for K-class predictions (`--prob-cols`, multiclass maps).
- `evaluate`: the driver, `evaluate_file` (read the input, metrics per column and map).
- `bootstrap`: seeded percentile confidence intervals.
- `results`: the result types (the report and its JSON schema, gate checks, a baseline).
- `gates`: `--fail-above`/`--fail-below`/`--max-regression` decisions and baseline checks.
- `baseline`: the evaluation JSON report on disk, its writer and its reader (`--baseline`).
- `diagnostics`: per-field bias and reliability bins; `report`: terminal tables;
  `plot`: reliability diagram images.

Submodules are imported on use, so `import calibcli.evaluation.metrics.binary` stays light.
"""
