"""`calib compare --score-cols` and `calibcli.compare` on (n, K) scores: the binary comparison's
one path (`compare.cross_validate`) with the K-class methods, metrics and `none` row.

`none` is the scores as a K-class prediction without any map: the probabilities as given, or
the softmax of logits (temperature scaling with T = 1), so a K-class comparison also says
whether calibrating helps.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from calibcli.calibrators import kscores, registry
from calibcli.evaluation.metrics import kclass as kclass_metrics
from calibcli.fitting.compare import Comparison, cross_validate, unfitted
from calibcli.maps.classmap import ClassMap
from calibcli.requests import CompareRequest
from calibcli.requests.params import KCLASS_COMPARED


def fold_metrics(y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """A held-out fold's K-class metrics (`KCLASS_COMPARED`)."""
    return {"log_loss": kclass_metrics.log_loss(y, P), "brier": kclass_metrics.brier(y, P),
            "top_label_ece": kclass_metrics.top_label_ece(y, P),
            "classwise_ece": kclass_metrics.classwise_ece(y, P)}


def uncalibrated(kind: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """What `none` predicts from (n, K) scores of `kind`, and its description."""
    if kind == "probability":
        return "the probabilities as given", lambda P: P
    return "softmax of the logits as given", lambda Z: kscores.softmax(np.ascontiguousarray(Z.T)).T


def compare_arrays(source: str, P: np.ndarray, codes: np.ndarray, kind: str, methods: Sequence[str],
                   request: CompareRequest, *, classes: Sequence[Any], score_cols: Sequence[str] | None = None,
                   out: str | None = None, pick: str = "recommended", training: dict[str, Any] | None = None,
                   show_progress: bool = True) -> Comparison:
    """K-class methods compared on the same folds (scores `P` of `kind`, class codes `codes`);
    with `out`, the chosen method's map refitted on all rows, saved with `classes`."""
    described, transform = uncalibrated(kind)
    make = unfitted(lambda m: registry.kclass(m, {"score_kind": kind}), request.seed, transform)

    def refit(method: str) -> ClassMap:
        return ClassMap(make(method).fit(P, codes), classes, score_cols)

    return cross_validate(source, P, codes, methods, request, make=make, refit=refit, fold_metrics=fold_metrics,
                          compared=KCLASS_COMPARED, uncalibrated=described, out=out, pick=pick, training=training,
                          show_progress=show_progress)
