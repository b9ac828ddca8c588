"""The door of `calib fit` and `calib compare` (and `calibcli.fit/compare`, the engines' `fit`):
one `FitRequest` for both kinds of scores, checked here once.

The kind comes from the columns (`kinds.kind_of`: K score columns make a K-class fit); the
calibrator is built once, through `registry.calibrator` (its method looked up, the `--param`
texts converted and checked by its Params, `--seed` set), whichever door the request came by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

from calibcli.errors import UsageError
from calibcli.kinds import BINARY, KCLASS, kind_of
from calibcli.requests import bounds
from calibcli.requests.names import column_options
from calibcli.calibrators.params import COMPARED, KCLASS_COMPARED, WEIGHT_KINDS

if TYPE_CHECKING:
    from calibcli.calibrators.estimator import Estimator


@dataclass(frozen=True)
class Columns:
    """Which input columns hold what (the --*-col options), and how K score columns read."""

    score: str = "score"  # one binary score column (--score-col)
    label: str = "label"
    weight: str | None = None
    fields: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    pos_label: str | None = None  # --pos-label: the positive value of two labels that are not 0/1
    score_cols: str | None = None  # --score-cols SPEC: the K score columns of a K-class prediction
    classes: tuple | None = None  # --classes: the class of each of the K columns, in order
    score_kind: str = "auto"  # --score-kind of the K columns: auto, probability or logit

    def __post_init__(self) -> None:
        column_options([("--score-col", self.score), ("--label-col", self.label), ("--weight-col", self.weight),
                        *(("--field-col", c) for c in self.fields), *(("--feature-col", c) for c in self.features)])
        named = [*self.fields, *self.features]
        twice = next((c for c in named if named.count(c) > 1), None)
        if twice is not None:
            raise UsageError(f"column {twice!r} is given more than once with --field-col/--feature-col",
                             hint="name each column once: --field-col for segments, --feature-col for other inputs")


@dataclass(frozen=True)
class FitRequest:
    """A fit to run: the configured, unfitted calibrator (binary or K-class), the columns and
    what the weights mean."""

    calibrator: Estimator
    columns: Columns = Columns()
    weight_kind: str = "frequency"

    @property
    def method(self) -> str:
        return self.calibrator.name

    @property
    def kind(self) -> str:
        return kind_of(self.calibrator)

    @classmethod
    def build(cls, method: str, params: Mapping[str, Any] | Sequence[str] | None = None, *, texts: bool = False,
              seed: int | None = None, weight_kind: str = "frequency", columns: Columns = Columns(),
              weighted: bool | None = None, from_summary: bool = False, kind: str | None = None) -> "FitRequest":
        """Check and configure a fit. `params` are typed values (Python API), or with `texts` the
        `--param key=value` texts (or {key: text}); `weighted`: weights are given (default:
        `columns.weight`); `from_summary`: the fit reads a score summary, whose counts are weights;
        `kind`: of the scores (default: of the columns; the Python API's from its arrays)."""
        from calibcli.calibrators import registry

        kind = kind_of(columns) if kind is None else kind
        weight_kind = weight_kind_option(weight_kind, columns.weight is not None if weighted is None else weighted,
                                         from_summary)
        params = param_texts(params) if texts else dict(params or {})
        _OPTIONS[kind](columns, from_summary)
        _METHODS[kind](method, params, columns, from_summary)
        score_kind = "probability" if columns.score_kind == "auto" else columns.score_kind
        calibrator = registry.calibrator(method, kind, params, texts=texts, seed=seed_option(seed),
                                         score_kind=score_kind)
        return cls(calibrator, columns, weight_kind)


def _binary_options(columns: Columns, from_summary: bool = False) -> None:
    """One score column: the K-class options refused."""
    if columns.classes is not None or columns.score_kind != "auto":
        flag = "--classes" if columns.classes is not None else "--score-kind"
        raise UsageError(f"{flag} is for K-class scores: give the K columns with --score-cols",
                         hint="binary methods take --param score_kind=... where they have it")


def _kclass_options(columns: Columns, from_summary: bool = False) -> None:
    """K score columns: the binary options refused, the score kind and class names checked."""
    from calibcli.kinds.probabilities import check_classes, check_kind_option

    given = [flag for flag, value in (("--pos-label", columns.pos_label), ("--field-col", columns.fields),
                                      ("--feature-col", columns.features), ("--from-summary", from_summary))
             if value]
    if given:
        raise UsageError(f"--score-cols (K classes) cannot be combined with {given[0]}",
                         hint="--score-col, --pos-label, --field-col, --feature-col and --from-summary "
                         "are for one binary score column")
    check_kind_option(columns.score_kind)
    if columns.classes is not None:
        check_classes(columns.classes)


def _binary_method(method: str, params: Mapping[str, Any], columns: Columns, from_summary: bool) -> None:
    """Feature columns only for methods that read them; no feature method on a summary."""
    from calibcli.calibrators import registry

    cls = registry.binary(method)
    if from_summary and cls.uses_features:
        raise UsageError(f"method {method!r} uses feature columns, which a score summary does not have",
                         hint="fit it with `calib fit --field-col ...` on the rows")
    if (columns.fields or columns.features) and not cls.uses_features:
        from calibcli.calibrators.base import refuse_features

        refuse_features(method, (*columns.fields, *columns.features))  # the contract's own refusal


def _kclass_method(method: str, params: Mapping[str, Any], columns: Columns, from_summary: bool) -> None:
    """The score kind of K columns is --score-kind's, not a --param."""
    if "score_kind" in params:
        raise UsageError("give the score kind with --score-kind (score_kind=), not --param score_kind")


_OPTIONS = {BINARY: _binary_options, KCLASS: _kclass_options}
_METHODS = {BINARY: _binary_method, KCLASS: _kclass_method}


def fit_inputs(input: str | None, from_summary: str | None, *, score_cols: str | None = None,
               score_col: str | None = None, weight_col: str | None = None, field_col: Sequence[str] = (),
               feature_col: Sequence[str] = (), fmt: str | None = None, pos_label: str | None = None) -> None:
    """How `calib fit`'s inputs combine: a score file or --from-summary; --score-col or
    --score-cols, not both; a summary's options (the rest is `FitRequest.build`'s)."""
    if input is None and from_summary is None:
        raise UsageError("missing the score file to fit on (or --from-summary FILE)",
                         hint="e.g. `calib fit cal.csv -o map.json`, or `-` to read stdin")
    if input is not None and from_summary is not None:
        raise UsageError("give either a score file or --from-summary FILE, not both",
                         hint="e.g. `calib fit cal.csv` or `calib fit --from-summary summary.parquet`")
    if score_cols is not None and score_col is not None:
        raise UsageError("--score-cols (K classes) cannot be combined with --score-col",
                         hint="--score-col names one binary score column, --score-cols the K columns of K classes")
    if from_summary is not None and (weight_col or field_col or feature_col or fmt or pos_label is not None):
        raise UsageError("--weight-col, --field-col, --feature-col, --pos-label and --format apply to score "
                         "files, not to --from-summary", hint="give them to `calib summarize` instead")


def param_texts(pairs: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """`--param key=value` texts (`calib fit`, binary and K-class) as {key: text}; a mapping as it is."""
    if pairs is None or isinstance(pairs, Mapping):
        return dict(pairs or {})
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {pair!r} is not key=value", hint="e.g. --param platt_correction=true")
        out[key.strip()] = value
    return out


def seed_option(seed: int | None) -> int | None:
    """`--seed` of a fit or comparison: None, or a whole number within its bounds (whether the
    method takes a seed is its calibrator's check, `Estimator.configured`)."""
    return None if seed is None else bounds.whole("--seed", seed)


def weight_kind_option(kind: str, weighted: bool, from_summary: bool = False) -> str:
    """`--weight-kind` (binary and K-class fits): frequency, or importance of given weights."""
    if kind not in WEIGHT_KINDS:
        raise UsageError(f"--weight-kind must be one of {', '.join(WEIGHT_KINDS)}, got {kind!r}")
    if kind != "frequency" and not (weighted or from_summary):
        raise UsageError("--weight-kind needs --weight-col (or --from-summary)")
    return kind


class CompareRequest(NamedTuple):
    """How `calib compare` splits and ranks (--folds, --seed, --metric) and which columns it reads
    (binary or K-class): built first thing, for the CLI and the Python API alike."""

    folds: int
    seed: int
    metric: str
    columns: Columns = Columns()

    @classmethod
    def build(cls, folds: int = 5, seed: int = 0, metric: str = "log_loss",
              columns: Columns = Columns()) -> "CompareRequest":
        bounds.check(folds=folds, seed=seed)
        kind = kind_of(columns)
        allowed, of = {BINARY: (COMPARED, ""), KCLASS: (KCLASS_COMPARED, " for K classes")}[kind]
        metric = metric.replace("-", "_")
        if metric not in allowed:
            raise UsageError(f"--metric {metric!r}: expected one of {', '.join(allowed)}{of}")
        _OPTIONS[kind](columns)
        return cls(folds, seed, metric, columns)


__all__ = ["Columns", "CompareRequest", "FitRequest", "fit_inputs", "param_texts", "seed_option",
           "weight_kind_option"]
