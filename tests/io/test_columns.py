"""`--pos-label VALUE`: binary labels that are not 0/1 (-1/1, yes/no, churn/stay) on fit,
summarize, evaluate and compare give the same numbers as the same file with 0/1 labels;
without it, two such values are refused with a hint naming --pos-label."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.errors import InputError
from calibcli.io import columns
from calibcli.kinds import labels
from calibcli.errors import Where

runner = CliRunner()


def _files(tmp_path, positive, negative):
    rng = np.random.default_rng(3)
    s = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < s ** 2).astype(int)
    words = np.where(y == 1, positive, negative)
    base, named = tmp_path / "01.csv", tmp_path / "named.csv"
    pacsv.write_csv(pa.table({"score": s, "label": y}), base)
    pacsv.write_csv(pa.table({"score": s, "label": pa.array(words.tolist())}), named)
    return base, named


def _run(args):
    result = runner.invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("positive, negative", [(1, -1), ("yes", "no"), ("churn", "stay")])
def test_fit_evaluate_compare_summarize_match_the_01_file(tmp_path, positive, negative):
    base, named = _files(tmp_path, positive, negative)
    pos = ["--pos-label", str(positive)]
    code, ref, _ = _run(["fit", str(base), "-m", "logistic"])
    assert code == 0
    code, got, err = _run(["fit", str(named), "-m", "logistic", *pos])
    assert code == 0, err
    ref_map, got_map = json.loads(ref), json.loads(got)
    assert got_map["state"] == ref_map["state"]
    assert got_map["training"]["pos_label"] == str(positive)
    assert got_map["training"]["positives"] == ref_map["training"]["positives"]
    code, ref, _ = _run(["evaluate", str(base), "--json"])
    code, got, err = _run(["evaluate", str(named), "--json", *pos])
    assert code == 0, err
    assert json.loads(got)["results"] == json.loads(ref)["results"]
    code, ref, _ = _run(["compare", str(base), "-m", "isotonic", "-m", "logistic", "--json"])
    code, got, err = _run(["compare", str(named), "-m", "isotonic", "-m", "logistic", "--json", *pos])
    assert code == 0, err
    assert json.loads(got)["methods"] == json.loads(ref)["methods"]
    code, ref, _ = _run(["summarize", str(base)])
    code, got, err = _run(["summarize", str(named), *pos])
    assert code == 0, err
    got, ref = json.loads(got), json.loads(ref)
    assert {**got, "input": None} == {**ref, "input": None}


@pytest.mark.parametrize("positive, negative, hint", [
    (1, -1, "--pos-label '1'"), ("yes", "no", "--pos-label 'yes'"), ("stay", "churn", "--pos-label 'stay'")])
def test_two_values_without_pos_label_are_refused_with_a_hint(tmp_path, positive, negative, hint):
    _, named = _files(tmp_path, positive, negative)
    out = tmp_path / "m.json"
    for args in (["fit", str(named), "-o", str(out)], ["evaluate", str(named)], ["compare", str(named)]):
        code, _, err = _run(args)
        assert code == 2
        lines = err.strip().splitlines()
        assert lines[0].startswith(f"error: {named.name}: column 'label', row ") or \
            lines[0].startswith(f"error: {named}: column 'label', row ")
        assert hint in lines[1] and lines[1].startswith("hint:")
    assert not out.exists()


def test_a_third_value_is_refused_naming_its_row_across_batches():
    pos = labels.BinaryLabels("yes")
    first = pa.table({"y": ["yes", "no", "yes"]})
    np.testing.assert_array_equal(labels.from_file(first, "y", "f.csv", pos), [1, 0, 1])
    later = pa.table({"y": ["yes", "maybe"]})
    with pytest.raises(InputError, match=r"f.csv: column 'y', row 5: label 'maybe' is a third value"):
        labels.from_file(later, "y", "f.csv", pos, 3)


@pytest.mark.parametrize("values, pos, expected", [
    ([-1, 1, 1], "1", [0, 1, 1]),
    ([-1.0, 1.0], "1.0", [0, 1]),
    ([True, False], "true", [1, 0]),
    ([" yes", "no "], "yes", [1, 0]),
    ([2, 7, 7], "7", [0, 1, 1]),
])
def test_pos_label_reads_numbers_booleans_and_text(values, pos, expected):
    y = labels.from_file(pa.table({"y": values}), "y", "f", labels.BinaryLabels(pos))
    np.testing.assert_array_equal(y, expected)


def test_pos_label_is_refused_with_from_summary(tmp_path):
    code, _, err = _run(["fit", "--from-summary", str(tmp_path / "s.json"), "--pos-label", "yes"])
    assert code == 2 and "--pos-label" in err


@pytest.mark.parametrize("command", [["fit"], ["evaluate", "--prob-col", "score"], ["summarize"], ["compare"]])
@pytest.mark.parametrize("pos, hint", [("YES", "labels are compared as written: --pos-label 'yes'"),
                                       ("maybe", "name the positive label, e.g. --pos-label 'yes'")])
def test_a_pos_label_that_is_no_label_is_named_as_such(tmp_path, command, pos, hint):
    _, named = _files(tmp_path, "yes", "no")
    code, out, err = _run([command[0], str(named), *command[1:], "--pos-label", pos])
    assert code == 2 and out == ""
    assert err.splitlines() == [f"error: --pos-label '{pos}' is not a label of {named} column 'label' "
                                "(its values: 'no', 'yes')", f"hint: {hint}"]


def test_a_pos_label_absent_from_every_batch_is_named_not_a_third_value():
    pos = labels.BinaryLabels("churn")
    assert pos.read(pa.chunked_array([["stay", "stay"]]), Where("f.csv", "y", 0)).tolist() == [0.0, 0.0]
    with pytest.raises(InputError, match=r"--pos-label 'churn' is not a label of f.csv column 'y' "
                                         r"\(its values: 'left', 'stay'\)"):
        pos.read(pa.chunked_array([["stay", "left"]]), Where("f.csv", "y", 2))
    seen = labels.BinaryLabels("churn")  # once the positive value was read, another value is a third one
    seen.read(pa.chunked_array([["stay", "churn"]]), Where("f.csv", "y", 0))
    with pytest.raises(InputError, match="row 4: label 'left' is a third value"):
        seen.read(pa.chunked_array([["stay", "left"]]), Where("f.csv", "y", 2))
