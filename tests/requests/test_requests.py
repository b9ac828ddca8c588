"""Each option is checked once, at the door (`calibcli.requests`): a bad value is refused with the
same message by the `calib` command and by the Python API, and no other module checks it again."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calibcli
from calibcli.cli.app import app
from calibcli.errors import CalibError
from calibcli.export import dispatch as export
from calibcli.fitting import compare
from calibcli.requests import ApplyRequest, Columns, CompareRequest, EvaluateOptions, FitRequest, evaluate_output
from repo import REPO

runner = CliRunner()


def _compare(path, methods=None, folds=5, seed=0, metric="log_loss", score_cols=None):
    """`calib compare` from Python: the request built at the door, then the comparison."""
    return compare.compare_file(path, CompareRequest.build(folds, seed, metric, Columns(score_cols=score_cols)),
                                methods)
ROOT = REPO
DATA = ROOT / "examples" / "data"
PACKAGE = ROOT / "calibcli"

_rng = np.random.default_rng(0)
S = _rng.random(60)
Y = (_rng.random(60) < S).astype(float)


def _dask_frame():
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    return dd.from_pandas(pd.DataFrame({"score": S, "label": Y}), npartitions=2)


def _dask(name):
    pytest.importorskip("dask.dataframe")
    from calibcli.engines import dask as engine

    return getattr(engine, name)


FIT = ["fit", str(DATA / "cal.csv")]
EVALUATE = ["evaluate", str(DATA / "test.csv")]
EXPORT = ["export", "map.json", "--sql"]  # refused before the map is read: it need not exist
COMPARE = ["compare", str(DATA / "cal.csv")]
KCOMPARE = ["compare", str(DATA / "digits_scores.csv"), "--score-cols", "p_*"]

# (option, command line, the same request through the Python API)
CASES = [
    ("--method", [*FIT, "--method", "isotonik"], lambda: calibcli.fit(S, Y, "isotonik")),
    ("--param range", [*FIT, "-m", "bayes-iso", "-p", "samples=0"], lambda: calibcli.fit(S, Y, "bayes-iso", samples=0)),
    ("--param name", [*FIT, "-p", "knots=3"], lambda: calibcli.fit(S, Y, "isotonic", knots=3)),
    ("--param choice", [*FIT, "-m", "logistic", "-p", "score_kind=odds"],
     lambda: calibcli.fit(S, Y, "logistic", score_kind="odds")),
    ("--seed range", [*FIT, "-m", "bayes-iso", "--seed", "-1"], lambda: calibcli.fit(S, Y, "bayes-iso", seed=-1)),
    ("--seed deterministic", [*FIT, "--seed", "3"], lambda: calibcli.fit(S, Y, "isotonic", seed=3)),
    ("--seed twice", [*FIT, "-m", "bayes-iso", "--seed", "3", "-p", "seed=4"],
     lambda: calibcli.requests.FitRequest.build("bayes-iso", {"seed": "4"}, texts=True, seed=3)),
    ("--weight-kind", [*FIT, "--weight-kind", "counts"], lambda: calibcli.fit(S, Y, weight_kind="counts")),
    ("--weight-kind unweighted", [*FIT, "--weight-kind", "importance"],
     lambda: calibcli.fit(S, Y, weight_kind="importance")),
    ("--field-col", [*FIT, "--field-col", "field"], lambda: calibcli.fit(S, Y, features={"field": ["a"] * S.size})),
    ("--field-col contract", [*FIT, "--field-col", "field"],  # the contract's refusal of a direct fit
     lambda: calibcli.calibrators.registry.get("isotonic")().fit(S, Y, features={"field": ["a"] * S.size})),
    ("engine --method", [*FIT, "--method", "isotonik"], lambda: _dask("fit")(_dask_frame(), "isotonik")),
    ("engine --seed", [*FIT, "-m", "bayes-iso", "--seed", "-1"], lambda: _dask("fit")(_dask_frame(), "bayes-iso", seed=-1)),
    ("--calbin-window", [*EVALUATE, "--calbin-window", "0"], lambda: calibcli.evaluate(Y, S, calbin_window=0)),
    ("--calbin-window high", [*EVALUATE, "--calbin-window", "10000001"],
     lambda: _dask("evaluate")(_dask_frame(), calbin_window=10_000_001)),
    ("--step", [*EVALUATE, "--step", "0"], lambda: _dask("evaluate")(_dask_frame(), step=0.0)),
    ("summarize --step", ["summarize", str(DATA / "cal.csv"), "--step", "-1"],
     lambda: _dask("summarize")(_dask_frame(), step=-1.0)),
    ("--ece-bins", [*EVALUATE, "--ece-bins", "0"], lambda: EvaluateOptions.build(ece_bins=0)),
    ("--ece-strategy", [*EVALUATE, "--ece-strategy", "equal"], lambda: EvaluateOptions.build(ece_strategy="equal")),
    ("--top", [*EVALUATE, "--top", "0"], lambda: EvaluateOptions.build(top=0)),
    ("--bootstrap", [*EVALUATE, "--bootstrap", "10001"], lambda: EvaluateOptions.build(bootstrap=10_001)),
    ("--by-field", [*EVALUATE, "--by-field"], lambda: EvaluateOptions.build(by_field=True)),
    ("--bootstrap --weight-col", [*EVALUATE, "--bootstrap", "5", "--weight-col", "w"],
     lambda: EvaluateOptions.build(bootstrap=5, weight_col="w")),
    ("--bootstrap --step", [*EVALUATE, "--bootstrap", "5", "--step", "0.01"],
     lambda: EvaluateOptions.build(bootstrap=5, step=0.01)),
    ("--step --ece-strategy", [*EVALUATE, "--step", "0.01", "--ece-strategy", "quantile"],
     lambda: EvaluateOptions.build(step=0.01, ece_strategy="quantile")),
    ("--on-invalid", ["apply", "map.json", "in.csv", "--on-invalid", "drop"],
     lambda: ApplyRequest.build(on_invalid="drop")),
    ("--bands", [*EVALUATE, "--bands", "-1"], lambda: EvaluateOptions.build(bands=-1)),
    ("--bands high", [*EVALUATE, "--bands", "100001"], lambda: EvaluateOptions.build(bands=100_001)),
    ("--hl-groups", [*EVALUATE, "--hl-groups", "2"], lambda: EvaluateOptions.build(hl_groups=2)),
    ("--dialect", [*EXPORT, "--dialect", "mysql"], lambda: export.export_sql("map.json", dialect="mysql")),
    ("--dialect K-class", [*EXPORT, "--dialect", "tsql"], lambda: export.export_sql("map.json", dialect="tsql")),
    ("--score-expr --score-col", [*EXPORT, "--score-col", "s", "--score-expr", "s * 2"],
     lambda: export.export_sql("map.json", "s", "s * 2")),
    ("--score-cols --score-col", [*EXPORT, "--score-cols", "a,b", "--score-col", "s"],
     lambda: export.export_sql("map.json", "s", score_cols=["a", "b"])),
    ("--score-expr", [*EXPORT, "--score-expr", "s; DROP TABLE t"],
     lambda: export.export_sql("map.json", expression="s; DROP TABLE t")),
    ("--score-col empty", [*EXPORT, "--score-col", ""], lambda: export.export_sql("map.json", "")),
    ("--max-knots", [*EXPORT, "--max-knots", "1"], lambda: export.export_sql("map.json", max_knots=1)),
    ("--folds", [*COMPARE, "--folds", "1"], lambda: _compare(str(DATA / "cal.csv"), folds=1)),
    ("--folds K-class", [*KCOMPARE, "--folds", "101"],
     lambda: _compare(str(DATA / "digits_scores.csv"), folds=101, score_cols="p_*")),
    ("compare --seed", [*COMPARE, "--seed", "-1"], lambda: _compare(str(DATA / "cal.csv"), seed=-1)),
    ("compare --metric", [*COMPARE, "--metric", "auc"],
     lambda: _compare(str(DATA / "cal.csv"), metric="auc")),
    ("compare --metric K-class", [*KCOMPARE, "--metric", "ece"],
     lambda: _compare(str(DATA / "digits_scores.csv"), metric="ece", score_cols="p_*")),
]


@pytest.mark.parametrize("option, argv, call", CASES, ids=[c[0] for c in CASES])
def test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call):
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    with pytest.raises(CalibError) as exc:
        call()
    assert exc.value.message == lines[0].removeprefix("error: ")


def test_a_calbin_window_that_is_no_whole_number_is_refused_in_python():
    with pytest.raises(CalibError, match=r"^--calbin-window 2\.5 is not an integer$"):
        calibcli.evaluate(Y, S, calbin_window=2.5)
    assert calibcli.evaluate(Y, S, calbin_window=np.int64(7))["calbin"] >= 0


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def _message(node: ast.expr) -> str:
    """A message's text, each value an f-string puts in written {} (plain or f-strings)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return ""


# What a refusal of an option's value says (a refusal for what else the run holds, such as a
# K-class map that takes no --interval, is not one).
REFUSES_VALUE = ("out of range", "must be", "expected", "not an integer", "needs", "cannot be combined",
                 "is not one of", "for K-class", "applies to K-class", "is not key=value", "appears twice",
                 "an empty class name")


# Options with a request: their values are refused nowhere but in the request builders.
DOOR_OPTIONS = ("--seed", "--weight-kind", "--calbin-window", "--step", "--top", "--bootstrap",
                "--ece-bins", "--ece-strategy", "--by-field", "--on-invalid", "--method", "--field-col",
                "--bands", "--hl-groups", "--dialect", "--folds", "--metric", "--score-col", "--score-expr",
                "--max-knots", "--gate-on", "--diagram", "--interval-cols", "--output-format", "--save-baseline",
                "--classes", "--score-kind", "--param", "--segment-col", "--segment-bins", "--segment-top",
                "--segment-depth", "--segment-min-rows", "--segment-max", "--segments")
DOORS = {str(p.relative_to(ROOT)) for p in (PACKAGE / "requests").glob("*.py")}  # the requests package
# Left where it is, for now: --interval-cols against the input's columns (known once it is read).
NOT_YET = {("--interval-cols", "calibcli/evaluation/metrics/intervals.py")}
# The single lower-level function a builder calls: K-class --classes and --score-kind (the class
# name and score kind rules, `kinds.names`), --seed on a method (`Estimator.configured`, the one
# path parameters reach a calibrator by).
LOWER = {("--classes", "calibcli/kinds/names.py"), ("--score-kind", "calibcli/kinds/names.py"),
         ("--seed", "calibcli/calibrators/estimator.py")}


def test_each_option_is_refused_in_exactly_one_place():
    """A refusal whose message starts with one of these options, a bounds check, a method's
    `--param` parse or a weight-kind test lives in the request builders and nowhere else."""
    found: dict[str, list[str]] = {}
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                text = _message(node.exc.args[0])
                option = next((o for o in DOOR_OPTIONS if text.startswith(o + " ")
                               and any(words in text for words in REFUSES_VALUE)), None)
                if option is not None:
                    found.setdefault(option, []).append(name)
            called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None)
            if called in ("_whole", "whole") and node.args and _message(node.args[0]).startswith("--"):
                found.setdefault(_message(node.args[0]), []).append(name)  # a whole-number option
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = ast.unparse(node.func.value)
                if (owner, node.func.attr) == ("bounds", "check"):
                    assert name in DOORS or name.startswith("calibcli/cli/"), f"{name}: bounds.check outside a door"
                if node.func.attr == "from_cli":
                    found.setdefault("from_cli", []).append(name)
            if isinstance(node, ast.Name) and node.id in ("WEIGHT_KINDS", "ON_INVALID", "ECE_STRATEGIES",
                                                          "SQL_DIALECTS", "DIAGRAMS", "GATE_ON", "OUTPUT_FORMATS") \
                    and isinstance(node.ctx, ast.Load):
                found.setdefault(node.id, []).append(name)
    outside = {key: sorted(set(where) - DOORS - {name for option, name in NOT_YET | LOWER if option == key})
               for key, where in found.items()}
    assert {key: where for key, where in outside.items() if where} == {}
    assert {"--weight-kind", "--calbin-window", "--ece-strategy", "--on-invalid",
            "WEIGHT_KINDS", "--dialect", "--metric", "SQL_DIALECTS", "--gate-on", "--diagram", "--interval-cols",
            "--save-baseline", "DIAGRAMS", "GATE_ON", "OUTPUT_FORMATS", "--score-kind", "--param"} <= set(found)


# `--param`: converted from text by its Param, checked (names and values) by the method's constructor
PARAM_CASES = [
    ("--param type", [*FIT, "-p", "platt_correction=maybe"], lambda: calibcli.fit(S, Y, platt_correction="maybe")),
    ("--param choice", [*FIT, "-m", "binning", "-p", "strategy=foo"],
     lambda: calibcli.fit(S, Y, "binning", strategy="foo")),
    ("--param integer", [*FIT, "-m", "binning", "-p", "bins=2.5"], lambda: calibcli.fit(S, Y, "binning", bins="2.5")),
    ("-p seed type", [*FIT, "-m", "bayes-iso", "-p", "seed=x"],
     lambda: calibcli.requests.FitRequest.build("bayes-iso", {"seed": "x"})),
    # the Python API takes keywords; a text that is not key=value is refused by the request builder
    ("--param not key=value", [*FIT, "-p", "platt_correction"],
     lambda: calibcli.requests.FitRequest.build("isotonic", ["platt_correction"], texts=True)),
    ("--param no key", [*FIT, "-m", "temperature", "--score-cols", "p_*", "-p", "=3"],
     lambda: calibcli.requests.FitRequest.build("isotonic", ["=3"], texts=True)),
]


@pytest.mark.parametrize("option, argv, call", PARAM_CASES, ids=[c[0] for c in PARAM_CASES])
def test_a_bad_param_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call):
    test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call)


def test_a_seed_is_checked_once_and_set_on_the_calibrator():
    from calibcli.requests import FitRequest

    assert FitRequest.build("bayes-iso", seed=np.int64(7)).calibrator.params["seed"] == 7
    with pytest.raises(CalibError, match=r"^--seed 2\.5 is not an integer$"):
        FitRequest.build("bayes-iso", seed=2.5)


# `calib evaluate`'s gates, plot and output options: checked by the request builders alone
EVALUATE_CASES = [
    ("--gate-on", [*EVALUATE, "--gate-on", "lower"], lambda: EvaluateOptions.build(gate_on="lower")),
    ("--gate-on upper", [*EVALUATE, "--gate-on", "upper"], lambda: EvaluateOptions.build(gate_on="upper")),
    ("--gate-on upper mce", [*EVALUATE, "--gate-on", "upper", "--bootstrap", "5", "--fail-above", "mce=0.1"],
     lambda: EvaluateOptions.build(gate_on="upper", bootstrap=5, fail_above=["mce=0.1"])),
    ("--fail-above unknown", [*EVALUATE, "--fail-above", "fild-rce=0.1"],
     lambda: EvaluateOptions.build(fail_above=["fild-rce=0.1"])),
    ("compare --method", [*COMPARE, "--method", "isotonik"],
     lambda: _compare(str(DATA / "cal.csv"), ["isotonik"])),
    ("--max-regression --baseline", [*EVALUATE, "--max-regression", "auc=0.01"],
     lambda: EvaluateOptions.build(max_regression=["auc=0.01"])),
    ("--diagram", [*EVALUATE, "--diagram", "pie"], lambda: EvaluateOptions.build(diagram="pie")),
    ("--interval-cols", [*EVALUATE, "--interval-cols", "low"], lambda: EvaluateOptions.build(interval_cols="low")),
    ("--output-format", [*EVALUATE, "--output-format", "pdf"], lambda: evaluate_output("pdf")),
    ("--save-baseline -", [*EVALUATE, "--save-baseline", "-"], lambda: evaluate_output(save_baseline="-")),
    ("--segment-bins", [*EVALUATE, "--segment-col", "field", "--segment-bins", "0"],
     lambda: calibcli.evaluate(Y, S, segments={"field": ["a"] * S.size}, segment_bins=0)),
    ("--segment-top integer", [*EVALUATE, "--segment-col", "field", "--segment-top", "101"],
     lambda: calibcli.evaluate(Y, S, segments={"field": ["a"] * S.size}, segment_top=101)),
    ("--segment-col twice", [*EVALUATE, "--segment-col", "field", "--segment-col", "field"],
     lambda: EvaluateOptions.build(segment_cols=["field", "field"])),
    ("--segments without --segment-col", [*EVALUATE, "--segments", "3"], lambda: EvaluateOptions.build(segments=3)),
    ("--metrics multical without --segment-col", [*EVALUATE, "--metrics", "multical"],
     lambda: calibcli.evaluate(Y, S, metrics="multical")),
    ("engine --segment-depth", [*EVALUATE, "--segment-col", "field", "--segment-depth", "11"],
     lambda: _dask("evaluate")(_dask_frame(), segment_cols=["score"], segment_depth=11)),
    ("engine K-class --segment-max", ["evaluate", str(DATA / "digits_scores.csv"), "--prob-cols", "p_*",
                                      "--segment-col", "label", "--segment-max", "0"],
     lambda: _dask("evaluate_kclass")(_dask_frame(), ["score"], segment_cols=["label"], segment_max=0)),
]


@pytest.mark.parametrize("option, argv, call", EVALUATE_CASES, ids=[c[0] for c in EVALUATE_CASES])
def test_a_bad_evaluate_option_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call):
    test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call)


# --metrics and gates of the other kind of prediction: `EvaluateOptions.check_kind`, once the kind is known
KCSV = str(DATA / "digits_scores.csv")
KIND_CASES = [
    ("--metrics binary on K classes", ["evaluate", KCSV, "--prob-cols", "p_*", "--metrics", "smece"],
     lambda: calibcli.evaluate([0, 1, 2], np.eye(3), metrics="smece")),
    ("--metrics K-class on binary", [*EVALUATE, "--metrics", "top-label-smece"],
     lambda: calibcli.evaluate(Y, S, metrics="top_label_smece")),
    ("engine --metrics binary on K classes", ["evaluate", KCSV, "--prob-cols", "p_*", "--metrics", "smece"],
     lambda: _dask("evaluate_kclass")(_dask_frame(), ["score"], metrics="smece")),
]


@pytest.mark.parametrize("option, argv, call", KIND_CASES, ids=[c[0] for c in KIND_CASES])
def test_a_metric_of_the_other_kind_is_refused_with_one_message(option, argv, call):
    test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call)


# K-class fits (`calib fit --score-cols`, `calibcli.fit` on (n, K) scores): --seed, --param,
# --score-kind and --classes refused in the same words by the command and the API
KFIT = ["fit", str(DATA / "digits_scores.csv"), "--score-cols", "p_*"]
KP = np.random.default_rng(0).dirichlet(np.ones(10), 40)
KY = np.arange(40) % 10
KCLASS_FIT_CASES = [
    ("K-class --seed deterministic", [*KFIT, "-m", "temperature", "--seed", "3"],
     lambda: calibcli.fit(KP, KY, method="temperature", seed=3)),
    ("K-class --param name", [*KFIT, "-m", "temperature", "-p", "bins=3"],
     lambda: calibcli.fit(KP, KY, method="temperature", bins=3)),
    ("K-class --score-kind", [*KFIT, "--score-kind", "odds"], lambda: calibcli.fit(KP, KY, score_kind="odds")),
    ("K-class --classes twice", [*KFIT, "--classes", "a,b,c,d,e,f,g,h,i,a"],
     lambda: calibcli.fit(KP, KY, method="temperature", classes=list("abcdefghia"))),
]

# --classes/--score-kind on binary scores: refused at the door of fit, compare and evaluate
BINARY_RUN_CASES = [
    ("fit --classes binary", [*FIT, "--classes", "a,b"], lambda: calibcli.fit(S, Y, classes=["a", "b"])),
    ("fit --score-kind binary", [*FIT, "--score-kind", "logit"],
     lambda: FitRequest.build("isotonic", columns=Columns(score_kind="logit"))),
    ("compare --classes binary", [*COMPARE, "--classes", "a,b"], lambda: calibcli.fit(S, Y, classes=["a", "b"])),
    ("compare --score-kind binary", [*COMPARE, "--score-kind", "logit"],
     lambda: FitRequest.build("isotonic", columns=Columns(score_kind="logit"))),
    ("evaluate --classes binary", [*EVALUATE, "--classes", "a,b"], lambda: calibcli.evaluate(Y, S, classes=[0, 1])),
    ("engine evaluate --classes binary", [*EVALUATE, "--classes", "a,b"],
     lambda: EvaluateOptions.build(classes=("a", "b"))),
]


@pytest.mark.parametrize("option, argv, call", BINARY_RUN_CASES, ids=[c[0] for c in BINARY_RUN_CASES])
def test_a_kclass_option_on_binary_scores_is_refused_with_one_message(option, argv, call):
    test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call)


@pytest.mark.parametrize("option, argv, call", KCLASS_FIT_CASES, ids=[c[0] for c in KCLASS_FIT_CASES])
def test_a_bad_kclass_fit_option_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call):
    test_a_bad_value_is_refused_with_one_message_by_the_command_and_the_api(option, argv, call)
