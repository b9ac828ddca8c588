"""Everything `calib evaluate` does, in one package.

- `metrics`: the metric functions (log-loss, Brier, AUC, ECE, CalBin, Field-ECE/RCE).
- `evaluate`: the driver, `evaluate_file` (read the input, metrics per column and map).
- `bootstrap`: seeded percentile confidence intervals.
- `gates`: `--fail-above`/`--fail-below`/`--max-regression` decisions.
- `baseline`: the evaluation JSON report, its writer and its reader (`--baseline`).
- `diagnostics`: per-field bias and reliability bins; `report`: terminal tables;
  `plot`: reliability diagram images.

Submodules are imported on use, so `import calibcli.evaluation.metrics` stays light.
"""
