"""`--score-cols SPEC` resolved against a schema: comma lists, shell patterns in natural order,
list columns, class names, label codes and the one-line refusals."""

import fnmatch
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from calibcli.errors import InputError, UsageError, Where
from calibcli.kinds import columns as sc, labels, probabilities
from calibcli.kinds.names import canonical_text


def label_codes(table, name, classes, source, offset=0, how=None):
    """A file's label column as class codes, and how it read (`kinds.labels.ClassLabels`)."""
    reader = labels.ClassLabels(classes, how)
    return labels.from_file(table, name, source, reader, offset), reader.how


def score_kind_of(P, kind, cols, source):
    return probabilities.resolve_kind(P, kind, Where(source), cols.columns)[0]


def _table(**cols):
    return pa.table(cols)


def test_comma_list_keeps_its_order_and_names_classes_by_suffix():
    t = _table(p_cat=[0.2], p_dog=[0.3], p_car=[0.5], label=["dog"])
    cols = sc.resolve("p_dog,p_cat,p_car", t.schema, "f.csv")
    assert cols.columns == ("p_dog", "p_cat", "p_car")
    assert cols.classes == ("dog", "cat", "car")
    np.testing.assert_array_equal(sc.matrix_from(t, cols, "f.csv"), [[0.3, 0.2, 0.5]])


def test_pattern_in_natural_order():
    names = [f"p_{i}" for i in (10, 2, 1, 0, 11, 3)]
    t = pa.table({n: [0.1] for n in names})
    cols = sc.resolve("p_*", t.schema, "f.csv")
    assert cols.columns == ("p_0", "p_1", "p_2", "p_3", "p_10", "p_11")
    assert cols.classes == ("0", "1", "2", "3", "10", "11")


def test_explicit_classes_replace_the_suffixes():
    t = _table(a=[0.5], b=[0.5])
    assert sc.resolve("a,b", t.schema, "f", classes=("x", "y")).classes == ("x", "y")


@pytest.mark.parametrize("names, expected", [
    (["p_cat", "p_car", "p_dog"], ("cat", "car", "dog")),
    (["prob1", "prob2", "prob10"], ("1", "2", "10")),
    (["p1", "p10", "p11"], ("1", "10", "11")),
    (["cat", "car"], ("cat", "car")),
    (["score.a", "score.b"], ("a", "b")),
    (["x", "x_1"], ("x", "x_1")),
])
def test_class_names_are_whole_runs_after_the_common_prefix(names, expected):
    assert sc.class_names(names) == expected


def test_list_column_gives_k_from_its_data():
    t = pa.table({"probs": pa.array([[0.1, 0.9], [0.5, 0.5]])})
    cols = sc.resolve("probs", t.schema, "f.parquet")
    assert cols.list_column == "probs" and cols.k is None
    P = sc.matrix_from(t, cols, "f.parquet")
    np.testing.assert_array_equal(P, [[0.1, 0.9], [0.5, 0.5]])
    assert cols.with_k(2, "f").classes == ("0", "1")


def test_fixed_size_list_column_and_a_sliced_batch():
    values = pa.array(np.arange(12, dtype=np.float64))
    arr = pa.FixedSizeListArray.from_arrays(values, 3)
    t = pa.table({"probs": arr})
    cols = sc.resolve("probs", t.schema, "f.parquet", classes=("a", "b", "c"))
    assert cols.k == 3 and cols.classes == ("a", "b", "c")
    batch = t.to_batches()[0].slice(2, 2)
    np.testing.assert_array_equal(sc.matrix_from(batch, cols, "f"), np.arange(6, 12).reshape(2, 3))


def test_ragged_list_is_refused_naming_the_row():
    t = pa.table({"probs": pa.array([[0.1, 0.9], [0.2, 0.3, 0.5]])})
    cols = sc.resolve("probs", t.schema, "f.parquet")
    with pytest.raises(InputError, match=r"f.parquet: column 'probs', row 12: 3 scores, expected 2"):
        sc.matrix_from(t, cols, "f.parquet", offset=10)


@pytest.mark.parametrize("spec, match, error", [
    ("p_a", r"f.csv: --score-cols 'p_a' gives only column 'p_a'", UsageError),
    ("q_*", r"f.csv: --score-cols pattern 'q_\*' matches no column", InputError),
    ("p_a,nope", r"f.csv: no column 'nope'", InputError),
    ("p_a,p_a", r"names column 'p_a' more than once", UsageError),
    ("p_a,", r"an empty column name", UsageError),
])
def test_bad_specs_are_one_line(spec, match, error):
    t = _table(p_a=[0.5], p_b=[0.5])
    with pytest.raises(error, match=match) as info:
        sc.resolve(spec, t.schema, "f.csv")
    assert "\n" not in info.value.message


def test_duplicate_and_miscounted_classes_are_refused():
    t = _table(a=[0.5], b=[0.5])
    with pytest.raises(UsageError, match="class name 'x' appears twice"):
        sc.resolve("a,b", t.schema, "f", classes=("x", "x"))
    with pytest.raises(UsageError, match="--classes names 3 classes but the score columns give 2"):
        sc.resolve("a,b", t.schema, "f", classes=("x", "y", "z"))


def test_non_finite_score_names_column_and_row():
    t = _table(a=[0.5, 0.5, np.nan], b=[0.5, 0.5, 0.5])
    cols = sc.resolve("a,b", t.schema, "f.csv")
    with pytest.raises(InputError, match=r"f.csv: column 'a', row 3: score nan is not finite"):
        sc.matrix_from(t, cols, "f.csv")


def test_probability_rows_checked_and_auto_kind():
    t = _table(a=[0.5, 0.2], b=[0.5, 0.8])
    cols = sc.resolve("a,b", t.schema, "f.csv")
    P = sc.matrix_from(t, cols, "f.csv")
    assert score_kind_of(P, "auto", cols, "f.csv") == "probability"
    assert score_kind_of(P + 1e-7, "auto", cols, "f.csv") == "probability"  # within 1e-6
    assert score_kind_of(P * 2, "auto", cols, "f.csv") == "logit"
    assert score_kind_of(P - 0.6, "logit", cols, "f.csv") == "logit"
    with pytest.raises(InputError, match=r"f.csv: column 'b', row 7: probability -0.1 is negative"):
        probabilities.refuse_rows(np.array([[0.5, 0.5], [1.1, -0.1]]), Where("f.csv", offset=5), cols.columns)
    with pytest.raises(InputError, match=r"f.csv: columns a,b, row 2: the probabilities sum to 0.9, not 1"):
        score_kind_of(np.array([[0.5, 0.5], [0.4, 0.5]]), "probability", cols, "f.csv")


def test_labels_as_names_integers_or_indices():
    t = _table(p_cat=[0.5] * 3, p_dog=[0.5] * 3, y=["dog", "cat", "dog"], i=[1, 0, 1], f=[1.0, 0.0, 1.0])
    classes = sc.resolve("p_*", t.schema, "f").classes
    codes, how = label_codes(t, "y", classes, "f")
    assert codes.tolist() == [1, 0, 1] and how == labels.NAMES
    codes, how = label_codes(t, "i", classes, "f")
    assert codes.tolist() == [1, 0, 1] and how == labels.INDICES
    codes, how = label_codes(t, "f", classes, "f")
    assert codes.tolist() == [1, 0, 1] and how == labels.INDICES
    digits = _table(p_0=[0.5] * 2, p_1=[0.5] * 2, y=[1, 0])
    codes, how = label_codes(digits, "y", ("1", "0"), "f")  # integers equal to the suffixes
    assert codes.tolist() == [0, 1] and how == labels.NAMES


@pytest.mark.parametrize("labels, row, value", [
    (["dog", "cow"], 2, "'cow'"),     # a name among names
    ([0, 2], 2, "2"),                 # an index past K - 1
    ([0, -1], 2, "-1"),
    ([0.5, 1.0], 1, "0.5"),
    (["0", "x"], 2, "'x'"),
])
def test_label_not_a_class_names_the_row(labels, row, value):
    t = _table(y=labels)
    with pytest.raises(InputError, match=rf"f.csv: column 'y', row {row + 3}: label {re.escape(value)} is not a class"):
        label_codes(t, "y", ("cat", "dog"), "f.csv", offset=3)


def test_later_batches_keep_the_first_batch_reading():
    classes = ("cat", "dog")
    _, how = label_codes(_table(y=["dog"]), "y", classes, "f")
    with pytest.raises(InputError, match="row 1: label '0' is not a class"):
        label_codes(_table(y=["0"]), "y", classes, "f", how=how)


_name = st.text(alphabet="abc_", min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10 ** 6), min_size=2, max_size=30, unique=True), _name)
def test_natural_order_sorts_numeric_suffixes_as_numbers(numbers, prefix):
    names = [f"{prefix}{n}" for n in numbers]
    assert sorted(names, key=sc.natural_key) == [f"{prefix}{n}" for n in sorted(numbers)]
    cols = sc.resolve(f"{prefix}*", pa.schema([(n, pa.float64()) for n in names]), "f")
    assert list(cols.columns) == [f"{prefix}{n}" for n in sorted(numbers)]
    assert [int(c) for c in cols.classes] == sorted(numbers)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab_1*?.", min_size=1, max_size=5), min_size=2, max_size=12, unique=True),
       st.text(alphabet="ab_1", min_size=0, max_size=3))
def test_pattern_matches_exactly_the_prefix_columns(names, prefix):
    schema = pa.schema([(n, pa.float64()) for n in names])
    expected = [n for n in names if n.startswith(prefix)]
    spec = prefix + "*"
    if spec in names:  # a column literally named like the pattern is taken as that column
        return
    reference = [n for n in names if re.fullmatch(re.escape(prefix) + ".*", n, flags=re.S)]
    assert reference == expected
    suffixes = [canonical_text(n[len(prefix):]) for n in expected]
    if len(expected) < 2 or len(set(suffixes)) < len(suffixes):  # too few, or one class twice ('1', '1.')
        with pytest.raises((InputError, UsageError)):
            sc.resolve(spec, schema, "f")
        return
    cols = sc.resolve(spec, schema, "f")
    assert sorted(cols.columns) == sorted(expected)
    assert list(cols.columns) == sorted(expected, key=sc.natural_key)
    assert len(set(cols.classes)) == len(cols.classes)
    assert all(fnmatch.fnmatchcase(c, spec) for c in cols.columns)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab_01", min_size=1, max_size=6), min_size=2, max_size=8, unique=True))
def test_class_names_are_distinct_non_empty_suffixes(names):
    classes = sc.class_names(names)
    prefix = sc.common_prefix(names)
    assert all(n == prefix + c and c for n, c in zip(names, classes))
    assert len(set(classes)) == len(names)


def _near_probabilities(n=300, seed=0):
    """Probability rows written with 6 decimals (sums off by up to ~1e-6 and more) and one row
    with a negative cell: `auto` reads them as logits, as its spec says, but warns."""
    rng = np.random.default_rng(seed)
    P = np.round(rng.dirichlet([1.0, 1.0, 1.0], n), 6)
    P[0] = [0.3, 0.3, 0.4000021]  # a sum 2.1e-6 from 1: auto's 1e-6 fails for sure
    P[1] = [-0.0001, 0.5001, 0.5]
    return P, np.array(["a", "b", "c"])[rng.integers(0, 3, n)]


def test_auto_choosing_logits_for_near_probabilities_warns_and_strict_refuses(tmp_path):
    import pyarrow.csv as pacsv
    from typer.testing import CliRunner

    from calibcli.cli.app import app

    P, y = _near_probabilities()
    f = tmp_path / "near.csv"
    pacsv.write_csv(pa.table({"p_a": P[:, 0], "p_b": P[:, 1], "p_c": P[:, 2], "label": y}), f)
    runner = CliRunner()
    out = tmp_path / "m.json"
    fit = ["fit", str(f), "--score-cols", "p_*", "-m", "temperature", "-o", str(out)]
    result = runner.invoke(app, fit)
    assert result.exit_code == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning == ["warning: --score-kind auto reads columns p_a,p_b,p_c as logits, though 299 of 300 rows are "
                       "probabilities to within 0.001 (auto needs every row within 1e-06): give --score-kind "
                       "probability (which names a row that is not) or --score-kind logit"]
    assert "scores read as logit (auto)" in result.stderr  # the spec holds: auto still chose logits
    out.unlink()
    strict = runner.invoke(app, ["--strict", *fit])
    assert strict.exit_code == 2 and "--score-kind auto reads columns p_a,p_b,p_c as logits" in strict.stderr
    assert "(an error with --strict)" in strict.stderr and not out.exists()
    refused = runner.invoke(app, [*fit, "--score-kind", "probability"])
    assert refused.exit_code == 2 and "near.csv: columns p_a,p_b,p_c, row 1: the probabilities sum to" in refused.stderr
    # true logits, and probabilities auto accepts, say nothing
    logits = tmp_path / "logits.csv"
    pacsv.write_csv(pa.table({"p_a": P[:, 0] * 5 - 1, "p_b": P[:, 1], "p_c": P[:, 2] - 2, "label": y}), logits)
    for src in (logits, tmp_path / "exact.csv"):
        if src.name == "exact.csv":
            Q = P[2:] / P[2:].sum(axis=1, keepdims=True)
            pacsv.write_csv(pa.table({"p_a": Q[:, 0], "p_b": Q[:, 1], "p_c": Q[:, 2], "label": y[2:]}), src)
        quiet = runner.invoke(app, ["fit", str(src), "--score-cols", "p_*", "-m", "temperature"])
        assert quiet.exit_code == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_one_column_hint_names_the_binary_option_of_the_flag():
    t = _table(p_a=[0.5], q=[0.5])
    with pytest.raises(UsageError) as prob:
        sc.resolve("p_a", t.schema, "s3.csv", flag="--prob-cols")
    assert prob.value.hint == "for one probability column (binary labels) use --prob-col"
    with pytest.raises(UsageError) as score:
        sc.resolve("p_a", t.schema, "s3.csv")
    assert score.value.hint == "for one score column (binary labels) use --score-col"


def test_labels_are_all_class_names_or_all_indices_and_the_hint_says_so():
    """Columns p_1,p_2,p_3 and labels 0..3: some labels are class names, so all are read as
    names and 0 is not a class; the hint must not offer index 0 as if it were accepted."""
    t = _table(label=[2, 0, 1, 3])
    with pytest.raises(InputError) as names:
        label_codes(t, "label", ("1", "2", "3"), "idx.csv")
    assert str(names.value.message) == "idx.csv: column 'label', row 2: label 0 is not a class"
    assert names.value.hint == ("classes: 1, 2, 3; labels are read as class names (some are), so none is read as "
                                "a 0-based index: give all labels as class names or all as indices; name the "
                                "classes with --classes")
    codes, how = label_codes(_table(label=[2, 0, 1]), "label", ("a", "b", "c"), "f.csv")
    assert how == labels.INDICES and codes.tolist() == [2, 0, 1]
    with pytest.raises(InputError) as indices:
        label_codes(_table(label=[2, 0, 3]), "label", ("a", "b", "c"), "f.csv")
    assert "row 3: label 3 is not a class" in indices.value.message
    assert indices.value.hint == ("no label is a class name (a, b, c), so labels are read as 0-based indices 0..2; "
                                  "name the classes with --classes")


def test_evaluate_prob_cols_of_one_column_hints_prob_col(tmp_path):
    import pyarrow.csv as pacsv
    from typer.testing import CliRunner

    from calibcli.cli.app import app

    f = tmp_path / "s3.csv"
    pacsv.write_csv(_table(p_a=[0.2, 0.7], p_b=[0.8, 0.3], label=["a", "b"]), f)
    result = CliRunner().invoke(app, ["evaluate", str(f), "--prob-cols", "p_a"])
    assert result.exit_code == 2 and "hint: for one probability column (binary labels) use --prob-col" in result.stderr
    assert "--score-col" not in result.stderr
