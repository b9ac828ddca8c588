"""`calib evaluate` as a library function: one streaming loop for both kinds of prediction.

The options (`requests.EvaluateOptions`, checked at the door) name what is evaluated and its
kind; the maps' envelopes were read there. The input streams in record batches through the run
of that kind (`runs.RUNS`: which columns it reads, how labels and states are built, what each
result row holds); no row is kept (but for `--bootstrap` of K classes), so memory follows the
number of distinct p and of field values. The gates and the baseline are the same for both.
"""

from __future__ import annotations

import numpy as np

from calibcli import io
from calibcli.errors import InputError, UsageError
from calibcli.evaluation import gates
from calibcli.evaluation.baseline import load_baseline
from calibcli.evaluation.results import Evaluation
from calibcli.evaluation.runs import RUNS
from calibcli.evaluation.weighttotal import WeightTotal
from calibcli.requests import EvaluateOptions
from calibcli.requests.segments import NO_SEGMENTS


def evaluate_file(path: str, options: EvaluateOptions | None = None, fmt: str | None = None) -> Evaluation:
    """Metrics for each probability column and each map the options name (binary or K-class).

    A baseline is checked against the options before the input is read, and matched to the
    evaluated columns once its schema is (`gates.match_baseline`)."""
    with np.errstate(all="ignore"):  # degenerate data gives NaN (n/a) metrics, never raw numpy warnings
        return _evaluate_file(path, options or EvaluateOptions(), fmt)


def _evaluate_file(path: str, opts: EvaluateOptions, fmt: str | None) -> Evaluation:
    if path == "-" and any(m == "-" for m, _ in opts.maps):
        raise UsageError("the input and a map cannot both come from stdin")
    if path == "-" and opts.gates.baseline == "-":
        raise UsageError("the input and the baseline cannot both come from stdin")
    loaded = []
    if opts.maps:
        from calibcli.maps import envelope as maps  # the calibrators load only when a map is evaluated

        loaded = [(m, maps.envelope_to_calibrator(envelope, io.display_name(m))) for m, envelope in opts.maps]
    run = RUNS[opts.kind](opts, loaded, path)
    header = run.header()
    segment_settings = opts.segments.settings() if opts.segments else NO_SEGMENTS
    baseline = None
    if opts.gates.baseline is not None:
        baseline = load_baseline(opts.gates.baseline)
        gates.check_baseline(baseline, None, header["field_col"], opts.calbin_window, opts.gates,
                             ece_bins=opts.ece_bins, ece_strategy=opts.ece_strategy, weight_col=opts.weight_col,
                             step=opts.step, label_col=opts.label_col, score_col=header["score_col"],
                             hl_groups=opts.choice.hl_groups, **segment_settings)
    source, schema, batches = io.iter_batches(path, fmt, string_columns=run.string_columns,
                                              dictionary_columns=run.dictionary_columns)
    name = source.name
    run.check(schema, name)
    if baseline is not None:  # matched once the input's columns are known, before any row is read
        baseline = gates.match_baseline(baseline, run.resolved(), opts.gates, run.resolver(schema, name))
    offset = 0
    weight_total = WeightTotal(opts.weight_col, name)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        w = io.weights_from(batch, opts.weight_col, name, offset) if opts.weight_col else None
        weight_total.add(w)
        run.add(batch, w, name, offset)
        offset += batch.num_rows
    if offset == 0:
        raise InputError(f"{name}: no data rows")
    weight_total.check()
    results = run.results()
    header = run.header()
    report = Evaluation(name, offset, header["positives"], header["field_col"], opts.calbin_window, results,
                        opts.bootstrap, weight_col=opts.weight_col, step=header.get("step"), ece_bins=opts.ece_bins,
                        ece_strategy=opts.ece_strategy, label_col=opts.label_col, score_col=header["score_col"],
                        hl_groups=header.get("hl_groups", 10), **segment_settings)
    report.gate = gates.decide(opts.gates, [(r.name, r.metrics, r.intervals) for r in results], baseline)
    return report


__all__ = ["EvaluateOptions", "evaluate_file"]  # EvaluateOptions: built and checked in calibcli.requests
