"""Everything `calib evaluate` does, in one package.

- `driver`: `evaluate_file`, the one streaming loop for both kinds of prediction; `runs`: what
  each kind reads and computes (`BinaryRun`: probability columns and binary maps; `KClassRun`:
  K-class predictions and multiclass maps).
- `metrics/`: the definitions: `binary` (log-loss, Brier, AUC, ECE/MCE, CalBin, slope and
  intercept, Spiegelhalter, Field-ECE/RCE) over `kernels` (chunked passes), `kclass` (the K-class
  metrics), `corp`, `smooth`, `gof`, `prefix`, `intervals`, `diagnostics`, `selection` (what a
  run computes), and the multicalibration error over segments (`multicalibration` with
  `segments`, `segment_plan`, `segment_paths`, `segment_states`). The metric table itself
  (names, directions) is the door's: `calibcli.requests.metrics`.
- `multical`: the multicalibration error in a run (`--segment-col`): the segment columns
  collected beside the predictions, each result row's metrics and worst segments.
- `state/`: the mergeable states, `binary` (`EvalState`, `compute_all`) and `kclass`
  (`KClassState`), and `builder` (streams batches into a state).
- `bootstrap`: seeded confidence intervals; `results`: the report and its JSON schema, gate
  checks, a baseline; `gates`: deciding gates and checking baselines; `baseline`: the report
  on disk (`--save-baseline`, `--baseline`).
- `render/`: `report` (terminal tables, CSV, Markdown), `html` (the --plot .html page), `plot`
  (images), `figures` (the diagrams), `views` (the bins a diagram draws).

Submodules are imported on use, so `import calibcli.evaluation.metrics.binary` stays light.
"""
